"""The platform's Dagster component types (``dg list components`` lists the first).

- :class:`EventTimePipelines`: every pipeline of the pipelines folder as an asset group of
  its own, over the streams of the streams folder (``platform_defs/defs/pipelines/defs.yaml``
  is its one instance).
- :class:`EventTimePipeline`: what ``dg scaffold defs`` creates a new pipeline with: a
  description file in the pipelines folder, checked before it is written.
"""

from platform_defs.components.pipelines import EventTimePipelines
from platform_defs.components.scaffold import EventTimePipeline

__all__ = ["EventTimePipeline", "EventTimePipelines"]

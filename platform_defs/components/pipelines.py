"""The component type of the platform's event-time pipelines.

Dagster Components load an instance from a ``defs.yaml`` (one per folder); a pipeline here is
one file of the pipelines folder, named after the pipeline, which a user adds with nothing else
to edit. So one instance of :class:`EventTimePipelines` reads both folders and builds, per
stream, its landing files, arrival log and quarantine (a group named after the stream), and,
per pipeline, its windowed tables with their checks and job (a group named after the
pipeline): the definitions factory Components cannot replace (docs/streams-and-pipelines.md).
The folders come from the platform's settings (``PLATFORM_PIPELINES``, ``PLATFORM_STREAMS``),
the very ones the runs read, so the definitions and the runs cannot disagree.

Every asset, job and schedule it builds is described by one translator
(``platform_defs.translator``), as dagster-dbt's component describes dbt models with its
``DagsterDbtTranslator``: a subclass of the component whose
:meth:`EventTimePipelines.get_translator` returns a subclass of ``PlatformTranslator`` changes
what the UI shows, with nothing else to edit.
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
from pydantic import Field

from jobs.config.registry import platform_of
from platform_defs.live_job import live_job
from platform_defs.live_pipes import live_pipes_job, live_stream_job
from platform_defs.pipeline_assets import pipeline_assets, windowed_job
from platform_defs.process_assets import process_assets, process_job
from platform_defs.resources import load_settings
from platform_defs.schedules import finality_schedule
from platform_defs.sensors import landing_sensor
from platform_defs.stream_assets import stream_assets
from platform_defs.translator import OWNERS, PlatformTranslator


class EventTimePipelines(dg.Component, dg.Resolvable, dg.Model):
    """Every event-time pipeline of PLATFORM_PIPELINES as an asset group of its own (windowed
    results, late records, late-data metrics with daily partitions and checks), over the
    streams of PLATFORM_STREAMS (landing files, arrival log, quarantine)."""

    owners: list[str] = Field(default_factory=lambda: list(OWNERS),
                              description="Owners of every table asset")
    results_warn_after_hours: float = Field(
        default=2.0, gt=0, description="A pipeline's results are stale (warn) after this long "
                                       "without a refresh")
    results_fail_after_hours: float = Field(
        default=26.0, gt=0, description="... and fail their freshness after this long")

    def get_translator(self) -> PlatformTranslator:
        """The translator of every asset the component builds: the default one, with the
        component's owners. Override it to describe the tables otherwise."""
        return PlatformTranslator(owners=self.owners)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        platform = platform_of(load_settings())  # a wrong file fails the load, naming it
        translator = self.get_translator()
        freshness = dg.FreshnessPolicy.time_window(
            fail_window=timedelta(hours=self.results_fail_after_hours),
            warn_window=timedelta(hours=self.results_warn_after_hours))
        assets: list = []
        for stream in platform.streams.values():
            assets += stream_assets(stream, translator)
        windowed = [p for p in platform.pipelines.values() if not p.spec.is_process]
        processes = [p for p in platform.pipelines.values() if p.spec.is_process]
        for pipeline in windowed:
            assets += pipeline_assets(pipeline, freshness, translator)
        for pipeline in processes:
            assets += process_assets(pipeline, freshness, translator)
        return dg.Definitions(
            assets=assets,
            jobs=[*(windowed_job(p, translator) for p in windowed),
                  *(process_job(p, translator) for p in processes),
                  live_job, live_pipes_job, live_stream_job],
            schedules=[finality_schedule(windowed, translator)],
            sensors=[landing_sensor])

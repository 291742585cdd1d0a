"""The code location ``workspace.yaml`` loads: ``dagster dev -w workspace.yaml``.

The streams and pipelines come from the project's defs folder (``platform_defs/defs``): one
instance of the :class:`~platform_defs.components.EventTimePipelines` component, which builds
an asset group per stream and per pipeline from the folders ``PLATFORM_STREAMS`` and
``PLATFORM_PIPELINES`` name. The enrichment of each stream and the resources are added here.

Resources are configured here the Dagster way: every field can be set in the launchpad or by
``PLATFORM_*`` environment variables (their defaults); the enrichment token only ever comes from
the environment, through ``EnvVar``.
"""

import os
from pathlib import Path

from dagster import Definitions, EnvVar, load_from_defs_folder

from jobs.config.registry import platform_of
from platform_defs.enrichment_assets import EnrichmentServiceResource, enrichment_assets
from platform_defs.monitoring import MonitoringResource
from platform_defs.pipes_messages import subprocess_client
from platform_defs.resources import DeltaSparkResource, PlatformResource, load_settings
from services.enrichment_service import DEFAULT_TOKEN_ENV


def enrichment_resource() -> EnrichmentServiceResource:
    """The token is an ``EnvVar`` (resolved at run time, shown as a variable name, never a value)
    when the variable is set; without it the service is called without authentication."""
    if os.environ.get(DEFAULT_TOKEN_ENV):
        return EnrichmentServiceResource(token=EnvVar(DEFAULT_TOKEN_ENV))
    return EnrichmentServiceResource()


defs = Definitions.merge(
    load_from_defs_folder(path_within_project=Path(__file__).parent),
    Definitions(
        assets=[enrichment_assets(stream)
                for stream in platform_of(load_settings()).streams.values()],
        resources={
            "platform": PlatformResource(),
            "spark": DeltaSparkResource.from_settings(),
            "monitoring_thresholds": MonitoringResource(),
            "enrichment_service": enrichment_resource(),
            "pipes_subprocess_client": subprocess_client(),
        },
    ),
)

"""The code location ``workspace.yaml`` loads: ``dagster dev -w workspace.yaml``.

Resources are configured here the Dagster way: every field can be set in the launchpad or by
``PLATFORM_*`` environment variables (their defaults); the enrichment token only ever comes from
the environment, through ``EnvVar``.
"""

import os

from dagster import Definitions, EnvVar, PipesSubprocessClient

from platform_defs.assets import LIVE_TABLES, ingest_landing, landing_files, windowed_outputs
from platform_defs.enrichment_assets import EnrichmentServiceResource, enrichment
from platform_defs.live_job import live_job
from platform_defs.live_pipes import live_pipes_job, live_stream_job
from platform_defs.monitoring import MonitoringResource
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.schedules import finality_schedule, windowed_job
from platform_defs.sensors import landing_sensor
from services.enrichment_service import DEFAULT_TOKEN_ENV


def enrichment_resource() -> EnrichmentServiceResource:
    """The token is an ``EnvVar`` (resolved at run time, shown as a variable name, never a value)
    when the variable is set; without it the service is called without authentication."""
    if os.environ.get(DEFAULT_TOKEN_ENV):
        return EnrichmentServiceResource(token=EnvVar(DEFAULT_TOKEN_ENV))
    return EnrichmentServiceResource()


defs = Definitions(
    assets=[landing_files, ingest_landing, windowed_outputs, enrichment, *LIVE_TABLES],
    jobs=[windowed_job, live_job, live_pipes_job, live_stream_job],
    schedules=[finality_schedule],
    sensors=[landing_sensor],
    resources={
        "platform": PlatformResource(),
        "spark": DeltaSparkResource.from_settings(),
        "monitoring_thresholds": MonitoringResource(),
        "enrichment_service": enrichment_resource(),
        "pipes_subprocess_client": PipesSubprocessClient(),
    },
)

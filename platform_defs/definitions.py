"""The code location ``workspace.yaml`` loads: ``dagster dev -w workspace.yaml``."""

from __future__ import annotations

from dagster import Definitions

from platform_defs.assets import ingest_landing, landing_files, windowed_outputs
from platform_defs.resources import DeltaSparkResource, PlatformResource

defs = Definitions(
    assets=[landing_files, ingest_landing, windowed_outputs],
    resources={"platform": PlatformResource(), "spark": DeltaSparkResource()},
)

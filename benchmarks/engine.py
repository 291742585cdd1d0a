"""The Spark session a benchmark runs on: the engine the platform settings choose.

``PLATFORM_SPARK_MASTER`` and ``PLATFORM_SPARK_CONF`` (README, "Configuration") pick the
cluster exactly as for the jobs, so a benchmark measures the deployment it is pointed at;
without them it is ``local[2]``, the embedded default. The benchmark's own settings (shuffle
partitions, its extra Spark settings) apply on top.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.config.settings import PlatformSettings
from jobs.session import get_spark


def bench_spark(app_name: str, shuffle_partitions: int, master: str | None = None,
                extra: dict[str, str] | None = None) -> SparkSession:
    settings = PlatformSettings.from_env(check=False)
    chosen = master if master and settings.spark_master == "local[2]" else settings.spark_master
    print(f"engine: {chosen}", flush=True)
    return get_spark(chosen, shuffle_partitions, app_name,
                     extra={**settings.spark_settings(), **(extra or {})})

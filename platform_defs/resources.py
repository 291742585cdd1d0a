"""Dagster resources: where the platform's data lives, and the Delta-enabled SparkSession.

Both are configured the Dagster way (config fields, or environment variables through the
defaults), so nothing is hard-coded to one machine.
"""


from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field
from pyspark.sql import SparkSession

from jobs.settings import PlatformSettings, SettingsError
from jobs.spark import get_spark
from platform_defs.partitions import daily_partitions


class PlatformResource(ConfigurableResource):
    """Paths and ingest behaviour. Unset fields fall back to the ``PLATFORM_*`` environment
    variables, then to the embedded default under ``.platform/``."""

    home: str | None = Field(default=None, description="PLATFORM_HOME: root of local data")
    warehouse: str | None = Field(default=None, description="Delta tables folder")
    landing: str | None = Field(default=None, description="Landing folder for JSON-lines files")
    pipeline: str | None = Field(default=None, description="Pipeline description (YAML/JSON)")
    time_zone: str | None = Field(
        default=None, description="Time zone of daily partitions; must equal PLATFORM_TIME_ZONE, "
        "which the partitions definition is built from when the code location loads")

    def settings(self) -> PlatformSettings:
        """The jobs' settings. A ``time_zone`` that differs from the one the daily partitions
        were defined with would put a day's rows under another day's partition key: refused
        with the setting to change, before any data is touched."""
        loaded_zone = daily_partitions.timezone
        if self.time_zone and self.time_zone != loaded_zone:
            raise SettingsError(
                f"platform resource time_zone {self.time_zone!r} differs from "
                f"PLATFORM_TIME_ZONE {loaded_zone!r}, which the daily partitions were defined "
                "with when the code location loaded; set PLATFORM_TIME_ZONE instead")
        overrides = {
            "PLATFORM_HOME": self.home, "PLATFORM_WAREHOUSE": self.warehouse,
            "PLATFORM_LANDING": self.landing, "PLATFORM_PIPELINE": self.pipeline,
            "PLATFORM_TIME_ZONE": self.time_zone,
        }
        import os

        env = dict(os.environ)
        env.update({k: str(Path(v)) if k != "PLATFORM_TIME_ZONE" else v
                    for k, v in overrides.items() if v})
        return PlatformSettings.from_env(env)


class DeltaSparkResource(ConfigurableResource):
    """A local Delta-enabled SparkSession (``jobs.spark.get_spark``), shared within a process."""

    master: str = Field(default="local[2]", description="Spark master URL")
    shuffle_partitions: int = Field(default=4, description="spark.sql.shuffle.partitions")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings")

    def session(self) -> SparkSession:
        return get_spark(self.master, self.shuffle_partitions, extra=self.spark_conf)

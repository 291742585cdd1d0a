"""Dagster resources: the platform's settings, and the Delta-enabled SparkSession.

Both read the one settings model (``jobs.settings.PlatformSettings``, ``PLATFORM_*``
variables); a deployment overrides fields here, so nothing is hard-coded to one machine.
"""

from __future__ import annotations

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
    warehouse: str | None = Field(default=None, description="Delta tables folder or URI")
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
        return PlatformSettings.from_env(home=self.home, warehouse=self.warehouse,
                                         landing=self.landing, pipeline_path=self.pipeline,
                                         time_zone=self.time_zone)


class DeltaSparkResource(ConfigurableResource):
    """The Delta-enabled SparkSession (``jobs.spark.get_spark``), shared within a process, on
    the engine the settings choose (``PLATFORM_SPARK_MASTER``, ``PLATFORM_SPARK_CONF``)."""

    master: str | None = Field(default=None, description="Spark master URL (default: "
                                                          "PLATFORM_SPARK_MASTER, else local[2])")
    shuffle_partitions: int | None = Field(default=None,
                                           description="spark.sql.shuffle.partitions")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings")

    def session(self) -> SparkSession:
        settings = PlatformSettings.from_env()
        return get_spark(self.master or settings.spark_master,
                         self.shuffle_partitions or settings.shuffle_partitions,
                         extra={**settings.spark_settings(), **self.spark_conf})

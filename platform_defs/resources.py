"""Dagster resources: the platform's settings, and the Delta-enabled SparkSession
(dagster-pyspark's ``LazyPySparkResource``).

Both read the one settings model (``jobs.config.settings.PlatformSettings``, ``PLATFORM_*``
variables); a deployment overrides fields here, so nothing is hard-coded to one machine.
"""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource
from dagster_pyspark import LazyPySparkResource
from pydantic import Field
from pyspark.sql import SparkSession

from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline, platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.session import session_config, start_checked
from jobs.session.console import jvm_log
from platform_defs.partitions import daily_partitions


def load_settings() -> PlatformSettings:
    """The settings the definitions are built from (``PLATFORM_*``); a wrong one fails the
    code location's load with the message naming it."""
    return PlatformSettings.from_env(check=False)


class PlatformResource(ConfigurableResource):
    """Paths and ingest behaviour. Unset fields fall back to the ``PLATFORM_*`` environment
    variables, then to the embedded default under ``.platform/``."""

    home: str | None = Field(default=None, description="PLATFORM_HOME: root of local data")
    warehouse: str | None = Field(default=None, description="Delta tables folder or URI")
    landing: str | None = Field(default=None,
                                description="Landing folders, <landing>/<stream>/ each")
    pipelines: str | None = Field(default=None,
                                  description="Folder of pipeline descriptions "
                                              "(PLATFORM_PIPELINES)")
    streams: str | None = Field(default=None,
                                description="Folder of stream descriptions (PLATFORM_STREAMS)")
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
        settings = PlatformSettings.from_env(home=self.home, warehouse=self.warehouse,
                                             landing=self.landing, pipelines=self.pipelines,
                                             streams=self.streams, time_zone=self.time_zone)
        platform_of(settings)  # a wrong description fails here, naming its file
        return settings

    def stream(self, name: str) -> Stream:
        """The stream a definition was built for, as this run's settings describe it."""
        return platform_of(self.settings()).select_streams([name], "stream")[0]

    def pipeline(self, name: str) -> Pipeline:
        """The pipeline a definition was built for, as this run's settings describe it."""
        return platform_of(self.settings()).select_pipelines([name], "pipeline")[0]


class DeltaSparkResource(LazyPySparkResource):
    """dagster-pyspark's lazily started SparkSession, configured for Delta.

    ``spark_config`` is every setting of the session (master, Delta's jar and extensions,
    shuffle partitions, ``PLATFORM_SPARK_CONF``...), built from the one settings model by
    :meth:`from_settings` when the code location loads, and editable like any resource field
    (the launchpad, or another ``spark.master`` for a cluster): a deployment switches engine by
    configuration. The session starts at the first :meth:`session` call, so a run that never
    touches Spark never starts it; within a process it is Spark's one active session, which
    the next run (and the test suite's shared session) reuses."""

    spark_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Spark settings of the session (spark.master, Delta's jar and SQL "
                    "extensions, shuffle partitions, PLATFORM_SPARK_CONF)")
    jvm_log: str = Field("", description="Where the JVM and its Python workers write their "
                                         "output (<home>/logs/spark.log); empty: the console")

    @classmethod
    def from_settings(cls, settings: PlatformSettings | None = None,
                      **overrides: str) -> DeltaSparkResource:
        """The resource for ``settings`` (default: the ``PLATFORM_*`` environment), with
        ``overrides`` (Spark setting names with dots, or ``shuffle_partitions``)."""
        settings = settings or PlatformSettings.from_env(check=False)
        shuffle = overrides.pop("shuffle_partitions", None)
        config = session_config(settings, shuffle_partitions=int(shuffle) if shuffle else None)
        return cls(spark_config={**config, **overrides}, jvm_log=jvm_log(settings.home) or "")

    def session(self) -> SparkSession:
        """The session, started on first use; a failed start or a refused setting is one
        clear error (``jobs.session``)."""
        return start_checked(lambda: self.spark_session,
                             {k: str(v) for k, v in self.spark_config.items()},
                             log=self.jvm_log or None)

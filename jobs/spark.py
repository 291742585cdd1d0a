"""The SparkSession every job and test shares: Delta-enabled, quiet, on the configured engine.

The master and any Spark or Delta setting come from the platform settings
(``PLATFORM_SPARK_MASTER``, ``PLATFORM_SPARK_CONF``, ``PLATFORM_SPARK_DEFAULTS``,
``PLATFORM_SHUFFLE_PARTITIONS``); ``local[2]`` is the embedded default.

Delta's jars come from Maven Central through delta-spark's own mechanism; when that fails the
JVM dies before Python gets a port, with an error that does not say why, so we say it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

if TYPE_CHECKING:
    from jobs.settings import PlatformSettings

IVY_SETTINGS = str(Path(__file__).with_name("ivysettings.xml"))
"""Maven Central only (Spark's default chain also asks repos.spark-packages.org)."""

DELTA_CONFIGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.jars.ivySettings": IVY_SETTINGS,
}

LOCAL_CONFIGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.driver.memory": "4g",
}


class SparkStartError(RuntimeError):
    """Spark could not start; the message says what to check."""


def spark_for(settings: PlatformSettings, app_name: str = "eventtime-platform") -> SparkSession:
    """The session on the engine the settings choose."""
    return get_spark(settings.spark_master, settings.shuffle_partitions, app_name,
                     extra=settings.spark_settings())


def get_spark(master: str = "local[2]", shuffle_partitions: int = 4,
              app_name: str = "eventtime-platform", extra: dict[str, str] | None = None
              ) -> SparkSession:
    """Start (or reuse) the Delta-enabled session.

    ``PYSPARK_PYTHON`` is pinned to this interpreter: otherwise Python workers start the system
    ``python3``, which lacks pandas and this project.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from delta import configure_spark_with_delta_pip

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DELTA_CONFIGS, **LOCAL_CONFIGS,
                       "spark.sql.shuffle.partitions": str(shuffle_partitions),
                       **(extra or {})}.items():
        builder = builder.config(key, value)
    active = SparkSession.getActiveSession()
    if active is not None:  # getOrCreate sets the settings on it, and must check Delta's too
        _register_delta_settings(active)
    try:
        session = configure_spark_with_delta_pip(builder).getOrCreate()
    except Exception as error:  # the JVM's own message is about a port, not the cause
        if "INVALID_CONF_VALUE" in str(error):  # an existing session refused a setting
            raise SparkConfigError(f"a Spark setting is refused: "
                                   f"{str(error).splitlines()[0][:300]}") from None
        raise SparkStartError(
            "Spark did not start. Check that Java 17 or 21 is installed (`java -version`), and "
            "that Maven Central is reachable: the Delta jars "
            "(io.delta:delta-spark_<spark>_2.13) are downloaded into ~/.ivy2* on first use. "
            f"Original error: {error}"
        ) from error
    session.sparkContext.setLogLevel("ERROR")
    _check_settings(session, extra or {})
    return session


class SparkConfigError(ValueError):
    """A Spark or Delta setting has a value Spark refuses; the message names it."""


def _register_delta_settings(session: SparkSession) -> None:
    """Delta declares its settings (and their types) when its configuration object is first
    used; until then Spark takes any value for them. Touch it."""
    session._jvm.org.apache.spark.sql.delta.sources.DeltaSQLConf.DELTA_COLLECT_STATS()


def _check_settings(session: SparkSession, extra: dict[str, str]) -> None:
    """Spark validates the value of every setting it knows (Delta's included) when it is set
    at run time, but silently keeps a bad one given at start until the first job uses it:
    setting each again here makes a wrong value fail now, naming the setting, before any data
    is touched. Static settings (memory, say) cannot be set at run time and are skipped."""
    _register_delta_settings(session)
    for key, value in extra.items():
        try:
            session.conf.set(key, value)
        except Exception as error:
            message = str(error)
            if "static" in message.lower() or "CANNOT_MODIFY" in message:
                continue
            raise SparkConfigError(f"Spark setting {key}={value!r} is refused: "
                                   f"{message.splitlines()[0][:300]}") from None


# -- the same session through dagster-pyspark (platform_defs/resources.py) -----------------------


def delta_package() -> str:
    """The Maven coordinate of Delta's jar for the installed Spark, as delta-spark's
    ``configure_spark_with_delta_pip`` names it."""
    from importlib.metadata import version

    import pyspark

    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{version('delta_spark')}"


def session_config(settings: PlatformSettings, app_name: str = "eventtime-platform",
                   shuffle_partitions: int | None = None) -> dict[str, str]:
    """Every setting :func:`get_spark` gives its builder, as one flat dict: what a
    ``dagster_pyspark`` resource is configured with, so a Dagster run and ``python -m jobs``
    start the same session from the same settings model."""
    return {"spark.master": settings.spark_master, "spark.app.name": app_name,
            "spark.jars.packages": delta_package(), **DELTA_CONFIGS, **LOCAL_CONFIGS,
            "spark.sql.shuffle.partitions": str(shuffle_partitions
                                                or settings.shuffle_partitions),
            **settings.spark_settings()}


def start_checked(create: Callable[[], SparkSession], checked: dict[str, str]) -> SparkSession:
    """Start a session with ``create`` (dagster-pyspark's lazy session, say) the way
    :func:`get_spark` starts its own: workers on this interpreter, a failed start explained,
    Spark's log quiet, and every setting in ``checked`` validated before data is touched."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        _register_delta_settings(active)
    try:
        session = create()
    except Exception as error:
        if "INVALID_CONF_VALUE" in str(error):
            raise SparkConfigError(f"a Spark setting is refused: "
                                   f"{str(error).splitlines()[0][:300]}") from None
        raise SparkStartError(
            "Spark did not start. Check that Java 17 or 21 is installed (`java -version`), "
            "that the Spark master is reachable, and that Maven Central is reachable: the "
            f"Delta jars ({delta_package()}) are downloaded into ~/.ivy2* on first use. "
            f"Original error: {error}") from error
    session.sparkContext.setLogLevel("ERROR")
    _check_settings(session, checked)
    return session

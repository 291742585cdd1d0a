"""The SparkSession every job and test shares: Delta-enabled, quiet, on the configured engine.

The master and any Spark or Delta setting come from the platform settings
(``PLATFORM_SPARK_MASTER``, ``PLATFORM_SPARK_CONF``, ``PLATFORM_SPARK_DEFAULTS``,
``PLATFORM_SHUFFLE_PARTITIONS``); ``local[2]`` is the embedded default.

On a cluster (any master but ``local[...]``) the session ships the project's code to the
executors and checks that they can import it (jobs.session.shipping).

Delta's jars (and any ``spark.jars.packages`` the user adds) come from Maven Central on the
first start and from the files remembered then on later ones (jobs.session.jars); when the
first resolution fails the JVM dies before Python gets a port, with an error that does not say
why, so we say it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from jobs.session import classes, jars
from jobs.session.console import jvm_log, jvm_output_to
from jobs.session.shipping import check_executors, is_cluster, ship_project

if TYPE_CHECKING:
    from jobs.config.settings import PlatformSettings

DELTA_CONFIGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

LOCAL_CONFIGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    # a micro-batch's state commit writes the changed keys (a changelog file per state store),
    # not a RocksDB snapshot copied into the checkpoint; snapshots are made in the background
    # every few batches. Measured at 80,000 events/s: the state operator's commit time (summed
    # over its state stores) 527-544 -> 241-287 ms a micro-batch, the trigger 2.2 -> 1.8-2.0 s
    # (benchmarks/history.md). PLATFORM_SPARK_CONF can turn it off. Spark restores state
    # from the last snapshot plus the changelogs after it, so a restart sees the same state.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.driver.memory": "4g",
}


class SparkStartError(RuntimeError):
    """Spark could not start; the message says what to check."""


def spark_for(settings: PlatformSettings, app_name: str = "eventtime-platform") -> SparkSession:
    """The session on the engine the settings choose."""
    return get_spark(settings.spark_master, settings.shuffle_partitions, app_name,
                     extra=settings.spark_settings(), log=jvm_log(settings.home))


def get_spark(master: str = "local[2]", shuffle_partitions: int = 4,
              app_name: str = "eventtime-platform", extra: dict[str, str] | None = None,
              log: str | None = None) -> SparkSession:
    """Start (or reuse) the Delta-enabled session; a JVM started here writes its output to
    ``log`` (jobs.session.console) when one is given."""
    config = session_settings(master, shuffle_partitions, app_name, extra)
    builder = SparkSession.builder
    for key, value in config.items():
        builder = builder.config(key, value)
    return start_checked(builder.getOrCreate, config, log=log)


def session_settings(master: str, shuffle_partitions: int, app_name: str,
                     extra: dict[str, str] | None = None) -> dict[str, str]:
    """Every setting of the session, as one flat dict: the master, Delta's jars (the files
    remembered from an earlier start, else the packages to resolve) and SQL extensions, the
    local defaults, then the user's ``extra`` (``spark.jars.packages`` and ``spark.jars`` in
    it are added to Delta's, not replacing them), and the class archive
    (jobs.session.classes) before the user's own Java options."""
    extra = dict(extra or {})
    wanted = jars.packages(extra.pop("spark.jars.packages", ""))
    user_jars = [jar for jar in extra.pop("spark.jars", "").split(",") if jar]
    config = {"spark.master": master, "spark.app.name": app_name, **DELTA_CONFIGS,
              **LOCAL_CONFIGS, "spark.sql.shuffle.partitions": str(shuffle_partitions), **extra}
    archive = classes.usable_archive()
    for role in ("driver", "executor"):  # the class archive, if any (jobs.session.classes)
        name = f"spark.{role}.extraJavaOptions"
        java_options = classes.java_options(config.get(name, ""), archive)
        if java_options:
            config[name] = java_options
    remembered = jars.remembered_jars(wanted)
    if remembered is not None:  # resolved before: no Ivy at all
        config["spark.jars"] = ",".join([*remembered, *user_jars])
    else:
        config["spark.jars.packages"] = ",".join(wanted)
        config["spark.jars.ivySettings"] = str(jars.IVY_SETTINGS)
        if user_jars:
            config["spark.jars"] = ",".join(user_jars)
    return config


def session_config(settings: PlatformSettings, app_name: str = "eventtime-platform",
                   shuffle_partitions: int | None = None) -> dict[str, str]:
    """:func:`session_settings` from the settings model: what a ``dagster_pyspark`` resource
    is configured with, so a Dagster run and ``python -m jobs`` start the same session."""
    return session_settings(settings.spark_master,
                            shuffle_partitions or settings.shuffle_partitions, app_name,
                            settings.spark_settings())


_OWN_SETTINGS = ("spark.master", "spark.app.name", "spark.jars", "spark.jars.packages",
                 "spark.jars.ivySettings")
"""Settings :func:`start_checked` does not set again at run time (static ones, or ours)."""


def start_checked(create: Callable[[], SparkSession], config: dict[str, str],
                  log: str | None = None) -> SparkSession:
    """Start a session with ``create`` (a builder's ``getOrCreate``, or dagster-pyspark's lazy
    session) configured with ``config`` (:func:`session_settings`): workers on this
    interpreter, a failed start explained, Spark's log quiet, the jars Ivy resolved
    remembered, every setting validated before data is touched and, on a cluster, the
    project's code shipped to the executors and checked there.

    ``PYSPARK_PYTHON`` is pinned to this interpreter: otherwise Python workers start the system
    ``python3``, which lacks pandas and this project.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = config.get("spark.master", "local[2]")
    if master.startswith("local"):  # no "hostname resolves to a loopback address" warning
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    active = SparkSession.getActiveSession()
    if active is not None:  # getOrCreate sets the settings on it, and must check Delta's too
        _register_delta_settings(active)
    try:
        with jvm_output_to(log):
            session = create()
    except Exception as error:  # the JVM's own message is about a port, not the cause
        if "INVALID_CONF_VALUE" in str(error):  # an existing session refused a setting
            raise SparkConfigError(f"a Spark setting is refused: "
                                   f"{str(error).splitlines()[0][:300]}") from None
        raise SparkStartError(
            "Spark did not start. Check that Java 17 or 21 is installed (`java -version`), "
            "that the Spark master is reachable, and that Maven Central is reachable: the "
            f"Delta jars ({jars.delta_package()}) are downloaded into ~/.ivy2* on first "
            f"use{f'; Spark wrote its reasons to {log}' if log else ''}. Original error: "
            f"{error}") from error
    session.sparkContext.setLogLevel("ERROR")
    if active is None and "spark.jars.packages" in config:  # Ivy resolved them: remember
        user_jars = set(filter(None, config.get("spark.jars", "").split(",")))
        resolved = session.sparkContext.getConf().get("spark.jars", "")
        jars.remember_jars(config["spark.jars.packages"].split(","), ",".join(
            jar for jar in resolved.split(",") if jar and jar not in user_jars))
    _check_settings(session, {k: str(v) for k, v in config.items() if k not in _OWN_SETTINGS})
    if is_cluster(master) and id(session) not in _SHIPPED:
        user_files = [p for p in config.get("spark.submit.pyFiles", "").split(",") if p]
        ship_project(session, user_files)
        check_executors(session)
        _SHIPPED.add(id(session))
    return session


_SHIPPED: set[int] = set()
"""Sessions that already have the project's code (getOrCreate returns the same one)."""


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

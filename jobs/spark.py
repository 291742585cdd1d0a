"""The SparkSession every job and test shares: local, Delta-enabled, quiet.

Delta's jars come from Maven Central through delta-spark's own mechanism; when that fails the
JVM dies before Python gets a port, with an error that does not say why, so we say it.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

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
    "spark.driver.memory": "4g",
}


class SparkStartError(RuntimeError):
    """Spark could not start; the message says what to check."""


def get_spark(master: str = "local[2]", shuffle_partitions: int = 4,
              app_name: str = "eventtime-platform", extra: dict[str, str] | None = None
              ) -> SparkSession:
    """Start (or reuse) the local Delta-enabled session.

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
    try:
        session = configure_spark_with_delta_pip(builder).getOrCreate()
    except Exception as error:  # the JVM's own message is about a port, not the cause
        raise SparkStartError(
            "Spark did not start. Check that Java 17 or 21 is installed (`java -version`), and "
            "that Maven Central is reachable: the Delta jars "
            "(io.delta:delta-spark_<spark>_2.13) are downloaded into ~/.ivy2* on first use. "
            f"Original error: {error}"
        ) from error
    session.sparkContext.setLogLevel("ERROR")
    return session

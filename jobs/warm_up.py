"""The representative job a class archive of Spark's driver is dumped from
(jobs.session.classes): an ingest, a backfill of each pipeline and a live stream, in a driver
that writes the archive when it exits.

    python -m jobs.warm_up <archive file>
"""

from __future__ import annotations

import sys

from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.live.catch_up import run_live
from jobs.session import get_spark
from jobs.session.classes import DUMP_OPTION
from jobs.streams.landing.ingestor import ingest


def warm_up(dump_to: str) -> None:
    """What most platform steps do, in one driver that dumps its classes when it exits."""
    settings = PlatformSettings.from_env()
    platform = platform_of(settings)
    stream = next(iter(platform.streams.values()))
    generate(GeneratorConfig(events=2_000, keys=20, duration_ms=86_400_000), stream.landing)
    quiet = {"progress": lambda _: None}
    ingest(None, stream, **quiet)
    spark = get_spark(settings.spark_master, settings.shuffle_partitions, "jvm-classes",
                      extra={"spark.driver.extraJavaOptions": f"{DUMP_OPTION}={dump_to}"})
    for pipeline in platform.pipelines_of(stream.name):
        run_backfill(spark, pipeline, **quiet)
    run_live(spark, stream, **quiet)
    spark.stop()


if __name__ == "__main__":
    warm_up(sys.argv[1])

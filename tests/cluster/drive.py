"""The driver a cluster test runs in its own process (a SparkSession per process): each
stream's ingest, the landing stream's live run, then a backfill of each pipeline over the same
days, with each state of the output tables saved for the test to compare (a folder per
pipeline, and each stream's arrival log and quarantine).
Settings come from the ``PLATFORM_*`` environment, as for any job.

    python -m tests.cluster.drive <output folder>
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
from deltalake import DeltaTable

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.live import run_live
from jobs.session import spark_for
from jobs.session.shipping import ExecutorImportError, check_executors
from jobs.streams.ingestors import ingest

SAVED = (tables.ARRIVAL_LOG, tables.QUARANTINE, tables.WINDOW_RESULTS, tables.LATE_RECORDS,
         tables.LATE_DATA_METRICS)


def save_tables(settings: PlatformSettings, folder: Path, stream: str | None = None) -> None:
    """Each pipeline's tables (of ``stream``'s pipelines, or all) and its stream's, as
    Parquet files named after them, in a folder named after the pipeline."""
    for pipeline in platform_of(settings).pipelines.values():
        if stream is not None and pipeline.stream.name != stream:
            continue
        (folder / pipeline.name).mkdir(parents=True, exist_ok=True)
        for name in SAVED:
            frame: pd.DataFrame = DeltaTable(pipeline.table_path(name)).to_pandas()
            frame.to_parquet(folder / pipeline.name / f"{name}.parquet")


def save_stream_tables(settings: PlatformSettings, folder: Path) -> None:
    """Each stream's arrival log and quarantine, in a folder named after the stream."""
    for stream in platform_of(settings).streams.values():
        (folder / stream.name).mkdir(parents=True, exist_ok=True)
        for name in (tables.ARRIVAL_LOG, tables.QUARANTINE):
            DeltaTable(stream.table_path(name)).to_pandas().to_parquet(
                folder / stream.name / f"{name}.parquet")


def main(output: Path) -> None:
    started = time.monotonic()

    def step(name: str) -> None:  # the test prints these: where a slow cluster run went
        print(f"drive: {name} at {time.monotonic() - started:.1f} s", file=sys.stderr,
              flush=True)

    settings = PlatformSettings.from_env()
    spark = spark_for(settings, app_name="cluster-test")
    step("session started, code shipped and checked")
    try:  # a missing module is named, with the host, instead of a lost executor
        check_executors(spark, ("no_such_module_for_the_test",))
    except ExecutorImportError as error:
        (output / "import_error.txt").write_text(str(error))
    for stream in platform_of(settings).streams.values():
        ingest(spark, stream)
        step(f"{stream.name} ingested")
        if stream.spec.kind == "landing":  # the live runtime once: the same for any stream
            run_live(spark, stream)
            step(f"{stream.name}: live stream done")
            save_tables(settings, output / "live", stream.name)
    save_stream_tables(settings, output / "streams")
    for pipeline in platform_of(settings).pipelines.values():
        run_backfill(spark, pipeline)
        step(f"{pipeline.name}: backfill done")
    save_tables(settings, output / "backfill")
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

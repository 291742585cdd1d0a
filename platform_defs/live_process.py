"""The incremental run as a separate process, launched by Dagster Pipes (``live_pipes_job``).

A long-running or heavy live step should not share the Dagster run worker's memory and JVM: this
script starts its own SparkSession, streams its progress back as Pipes log lines while it runs,
and at the end reports what it wrote as one custom message, which the launching op turns into
asset materialisations (per day for the partitioned tables). Run it by hand without Dagster and
it simply prints its progress.
"""

from __future__ import annotations

import datetime as dt
import os
import sys

from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes


def _jsonable(value: object) -> object:
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def main() -> int:
    from jobs.settings import PlatformSettings
    from jobs.spark import get_spark
    from platform_defs.increment import run_increment

    with open_dagster_pipes() as pipes:
        under_dagster = PipesEnvVarParamsLoader().is_dagster_pipes_process()
        progress = pipes.log.info if under_dagster else print
        settings = PlatformSettings.from_env()
        spark = get_spark(app_name="eventtime-live")
        step = run_increment(spark, settings, progress=progress,
                             engine=os.environ.get("PLATFORM_LIVE_ENGINE", "auto"))
        report = step.ingest
        pipes.report_custom_message({
            "engine": step.engine, "first_day": step.first_day, "last_day": step.last_day,
            "ingest": {"batch_id": report.batch_id, "records": report.records,
                       "files": report.files, "quarantined": report.quarantined,
                       "watermark_ms": report.watermark_ms},
            "metrics": [{k: _jsonable(v) for k, v in row.items()} for row in step.metrics],
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The incremental run outside the Dagster process, through Dagster Pipes.

``live_pipes_job`` launches ``platform_defs/live_process.py`` with ``PipesSubprocessClient``:
the subprocess has its own interpreter, SparkSession and memory, its log lines stream into the
run's logs as it goes, and what it reports at the end becomes asset materialisations here, the
same ones the in-process ``live_job`` records.
"""

import sys
from pathlib import Path

from dagster import OpExecutionContext, PipesSubprocessClient, job, op

from jobs.ingest import IngestReport
from platform_defs.live_job import (
    IncrementConfig,
    day_materializations,
    ingest_materializations,
)
from platform_defs.resources import PlatformResource


@op(description="Runs platform_defs/live_process.py through Dagster Pipes and records what "
                "it wrote.")
def live_increment_pipes(context: OpExecutionContext, config: IncrementConfig,
                         platform: PlatformResource,
                         pipes_subprocess_client: PipesSubprocessClient) -> None:
    settings = platform.settings()
    env = {"PLATFORM_HOME": str(settings.home), "PLATFORM_WAREHOUSE": str(settings.warehouse),
           "PLATFORM_LANDING": str(settings.landing),
           "PLATFORM_PIPELINE": str(settings.pipeline_path),
           "PLATFORM_TIME_ZONE": settings.time_zone, "PLATFORM_LIVE_ENGINE": config.engine,
           "PYTHONUNBUFFERED": "1"}
    invocation = pipes_subprocess_client.run(
        command=[sys.executable, "-m", "platform_defs.live_process"], context=context, env=env,
        cwd=str(Path(__file__).parent.parent))
    for message in invocation.get_custom_messages():
        ingest = message["ingest"]
        report = IngestReport(batch_id=ingest["batch_id"], files=ingest["files"],
                              records=ingest["records"], quarantined=ingest["quarantined"],
                              watermark_ms=ingest["watermark_ms"])
        context.log.info(f"live process ({message['engine']}): days {message['first_day']} .. "
                         f"{message['last_day']}, {report.records} records ingested")
        for event in ingest_materializations(settings, report):
            context.log_event(event)
        for event in day_materializations(settings, message["metrics"]):
            context.log_event(event)


@job(description="The incremental run in a subprocess (Dagster Pipes): for long-running or "
                 "memory-heavy live steps.")
def live_pipes_job():
    live_increment_pipes()

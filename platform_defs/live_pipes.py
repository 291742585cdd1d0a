"""Live runs outside the Dagster process, through Dagster Pipes.

Both jobs launch ``jobs.pipes`` in its own interpreter, SparkSession and
memory; its log lines stream into the run's logs as it goes.

- ``live_pipes_job``: one increment of a stream (what the landing sensor's ``live_job`` does
  in process); what it reports at the end becomes the same asset materialisations
  ``live_job`` records.
- ``live_stream_job``: the long-running live job of a stream. Each micro-batch the process
  reports is recorded at once as an observation of each pipeline's ``late_data_metrics``
  (records, panes, late rows, on time, late within lateness, dropped, lateness percentiles,
  watermark lag, durations also in human units), so the asset's plots move while the job
  runs; when it stops (``max_batches``, ``duration_seconds``, or the run being terminated,
  which stops the stream cleanly with its checkpoint kept), the days it touched are recorded
  as materialisations and judged by the late-data checks.
"""

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from dagster import (
    AssetCheckEvaluation,
    AssetMaterialization,
    AssetObservation,
    Config,
    OpExecutionContext,
    PipesSubprocessClient,
    PipesTempFileContextInjector,
    job,
    op,
    open_pipes_session,
)
from pydantic import Field

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.streams.report import IngestReport
from platform_defs import monitoring
from platform_defs.live_job import (
    IncrementConfig,
    day_events,
    ingest_materializations,
    process_materializations,
    stream_of,
    switch_observations,
    version_of,
)
from platform_defs.pipes_messages import PipesMessagesLost, WholeLineTempFileMessageReader
from platform_defs.resources import PlatformResource
from platform_defs.translator import DEFAULT_TRANSLATOR

PROJECT = Path(__file__).parent.parent
Event = AssetMaterialization | AssetObservation | AssetCheckEvaluation


def _environment(settings: PlatformSettings) -> dict[str, str]:
    return {**settings.to_env(), "PYTHONUNBUFFERED": "1"}


def _ingest_report(message: dict) -> IngestReport:
    return IngestReport(batch_id=message["batch_id"], files=message["files"],
                        records=message["records"], quarantined=message["quarantined"],
                        watermark_ms=message["watermark_ms"],
                        first_batch_id=message.get("first_batch_id"))


@op(description="Runs jobs.pipes through Dagster Pipes and records what "
                "it wrote.", out={})
def live_increment_pipes(context: OpExecutionContext, config: IncrementConfig,
                         platform: PlatformResource,
                         monitoring_thresholds: monitoring.MonitoringResource,
                         pipes_subprocess_client: PipesSubprocessClient) -> Iterator[Event]:
    settings = platform.settings()
    stream = stream_of(settings, config.stream)
    invocation = pipes_subprocess_client.run(
        command=[sys.executable, "-m", "jobs.pipes", "--stream", stream.name],
        context=context, env={**_environment(settings), "PLATFORM_LIVE_ENGINE": config.engine},
        cwd=str(PROJECT))
    for message in invocation.get_custom_messages():
        report = _ingest_report(message["ingest"])
        context.log.info(f"live process {stream.name} ({message['engine']}): days "
                         f"{message['first_day']} .. {message['last_day']}, {report.records} "
                         "records ingested")
        yield from ingest_materializations(stream, report)
        for days in message["pipelines"].values():
            pipeline = version_of(settings, days["pipeline"], days["version"])
            if pipeline.spec.is_process:
                yield from process_materializations(pipeline, days["first_day"],
                                                    days["last_day"])
                continue
            yield from day_events(pipeline, days["metrics"], monitoring_thresholds,
                                  context.instance)
        for switched in message.get("switched", []):
            yield from switch_observations(settings, switched)


@job(description="The incremental run in a subprocess (Dagster Pipes): for long-running or "
                 "memory-heavy live steps.")
def live_pipes_job():
    live_increment_pipes()


class StreamConfig(Config):
    """Which stream, how long its live job runs and how often it works."""

    stream: str = Field(default="", description="The stream to run (empty: the only stream)")
    trigger: str = Field(default="10 seconds", description="Spark micro-batch interval")
    poll_seconds: float = Field(default=5.0,
                                description="How often new landing files are ingested and "
                                            "progress is reported")
    max_batches: int = Field(default=0, description="Stop after this many micro-batches "
                                                    "(0: run until the run is terminated)")
    duration_seconds: float = Field(default=0.0, description="Stop after this long (0: never)")
    metrics_interval_seconds: float = Field(
        default=5.0, description="How often the late-data metrics are written and observed")


class _StreamRecorder:
    """Turns the process's messages into Dagster events as they arrive (the op yields them,
    so each is stored, and shown, at once)."""

    def __init__(self, context: OpExecutionContext, settings: PlatformSettings, stream: Stream,
                 thresholds: monitoring.MonitoringResource) -> None:
        self.context = context
        self.settings = settings
        self.stream = stream
        self.thresholds = thresholds
        self.handled = 0
        self.batches = 0

    def handle(self, messages: Iterable[dict]) -> Iterator[Event]:
        messages = list(messages)
        for message in messages[self.handled:]:
            kind = message.get("kind")
            if kind == "batch":
                self.batches += 1
                known = platform_of(self.settings).pipelines.get(message["pipeline"])
                table = tables.OUTPUT if known is not None and known.spec.is_process \
                    else tables.LATE_DATA_METRICS
                yield AssetObservation(
                    asset_key=DEFAULT_TRANSLATOR.get_asset_key(message["pipeline"], table),
                    metadata=monitoring.batch_metadata(message),
                    description=f"live micro-batch {message['batch_id']}")
            elif kind == "ingest":
                yield from ingest_materializations(self.stream, _ingest_report(message))
            elif kind == "switch":
                yield from switch_observations(self.settings, {
                    k: v for k, v in message.items() if k not in ("kind", "stream")})
            elif kind == "stopped":
                for written in message["pipelines"].values():
                    pipeline = version_of(self.settings, written["pipeline"],
                                          written["version"])
                    if pipeline.spec.is_process:
                        yield from process_materializations(pipeline, written["first_day"],
                                                            written["last_day"])
                        continue
                    yield from day_events(pipeline, written["metrics"], self.thresholds,
                                          self.context.instance)
        self.handled = len(messages)


@op(description="Runs the long-running live stream in its own process (Dagster Pipes), "
                "observing late data per micro-batch while it runs.", out={})
def live_stream_pipes(context: OpExecutionContext, config: StreamConfig,
                      platform: PlatformResource,
                      monitoring_thresholds: monitoring.MonitoringResource) -> Iterator[Event]:
    settings = platform.settings()
    stream = stream_of(settings, config.stream)
    command = [sys.executable, "-m", "jobs.pipes", "--long-running",
               "--stream", stream.name, "--trigger", config.trigger,
               "--poll", str(config.poll_seconds),
               "--max-batches", str(config.max_batches),
               "--duration", str(config.duration_seconds),
               "--metrics-interval", str(config.metrics_interval_seconds)]
    recorder = _StreamRecorder(context, settings, stream, monitoring_thresholds)
    lost: PipesMessagesLost | None = None
    try:
        with open_pipes_session(context=context,
                                context_injector=PipesTempFileContextInjector(),
                                message_reader=WholeLineTempFileMessageReader()) as session:
            env = {**os.environ, **_environment(settings), **session.get_bootstrap_env_vars()}
            process = subprocess.Popen(command, env=env, cwd=str(PROJECT))
            try:
                while process.poll() is None:
                    yield from recorder.handle(session.get_custom_messages())
                    time.sleep(0.5)
            finally:
                if process.poll() is None:  # the run was terminated: stop the stream cleanly
                    process.terminate()
                    try:
                        process.wait(timeout=120)
                    except subprocess.TimeoutExpired:
                        process.kill()
    except PipesMessagesLost as failure:  # the messages read are recorded all the same
        lost = failure
    yield from recorder.handle(session.get_custom_messages())
    if process.returncode != 0:
        raise RuntimeError(f"the live stream process exited with {process.returncode}") \
            from lost
    if lost is not None:
        raise lost
    context.log.info(f"live stream: {recorder.batches} micro-batches observed")


@job(description="The long-running live stream in a subprocess (Dagster Pipes): Structured "
                 "Streaming with a processing-time trigger, ingesting new landing files as it "
                 "goes and reporting each micro-batch's late data as an observation.")
def live_stream_job():
    live_stream_pipes()

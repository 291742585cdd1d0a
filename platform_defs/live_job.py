"""The incremental ("live") run the landing sensor launches, one per stream
(``jobs.increment``): ingest the stream's new landing files, then update every pipeline
that reads it.

It is an op job rather than an asset job because the days it touches are only known after
ingest; it records what it wrote as asset materialisations (one per pipeline, table and day,
the metrics ones with that day's late-data numbers), so the asset pages show live and
backfilled partitions alike; what each records is the translator's
(``platform_defs.translator``), as the assets' own runs record it. A switch of the version
readers see is recorded as an observation of each windowed asset naming the old and new
versions.
"""

from collections.abc import Iterable, Iterator, Mapping
from datetime import date, timedelta

from dagster import (
    AssetCheckEvaluation,
    AssetMaterialization,
    AssetObservation,
    Config,
    DagsterInstance,
    OpExecutionContext,
    job,
    op,
)
from pydantic import Field

from jobs import tables
from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline, platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.increment import run_increment
from jobs.lifecycle import versions
from jobs.lifecycle.rollout import Switched
from jobs.store.table_stats import max_column_value
from jobs.streams.report import IngestReport
from jobs.views.late_detail import DayLateness, late_detail
from platform_defs import monitoring
from platform_defs.partitions import daily_partitions
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.translator import (
    DEFAULT_TRANSLATOR,
    PROCESS_TABLES,
    WINDOWED_TABLES,
    PlatformTranslator,
)


def ingest_materializations(stream: Stream, report: IngestReport,
                            translator: PlatformTranslator = DEFAULT_TRANSLATOR
                            ) -> Iterator[AssetMaterialization]:
    """The live job's ingest as the ingest asset records it
    (``PlatformTranslator.get_ingest_metadata``); nothing when it found nothing new."""
    if report.batch_ids is None:
        return
    for name, metadata in translator.get_ingest_metadata(stream, report).items():
        yield AssetMaterialization(asset_key=translator.get_asset_key(stream, name),
                                   metadata=metadata)


def day_materializations(pipeline: Pipeline, metrics: Iterable[dict],
                         detail: Mapping[str, DayLateness] | None = None,
                         translator: PlatformTranslator = DEFAULT_TRANSLATOR
                         ) -> Iterator[AssetMaterialization]:
    """One materialisation per windowed table and day, the metrics ones with its numbers (and
    its late records, when ``detail`` has them)."""
    watermark = max_column_value(pipeline.stream.arrival_log, "watermark_ms")
    first_partition = daily_partitions.start.date().isoformat()
    for row in metrics:
        day = str(row["window_end_date"])
        if day < first_partition:
            continue  # written, but before the first Dagster partition
        about_versions = translator.get_version_metadata(pipeline)
        for name in WINDOWED_TABLES:
            metadata = {**translator.get_path_metadata(pipeline, name), **about_versions}
            if name == tables.LATE_DATA_METRICS:
                metadata.update(monitoring.day_partition_metadata(
                    pipeline, day, row, (detail or {}).get(day), watermark, translator))
            yield AssetMaterialization(asset_key=translator.get_asset_key(pipeline, name),
                                       partition=day, metadata=metadata)


def process_materializations(pipeline: Pipeline, first_day: str | None, last_day: str | None,
                             translator: PlatformTranslator = DEFAULT_TRANSLATOR
                             ) -> Iterator[AssetMaterialization]:
    """A process pipeline's days a live run wrote: one materialisation per table and day."""
    if not first_day or not last_day:
        return
    start = max(date.fromisoformat(first_day), daily_partitions.start.date())
    about_versions = translator.get_version_metadata(pipeline)
    for offset in range((date.fromisoformat(last_day) - start).days + 1):
        day = (start + timedelta(days=offset)).isoformat()
        for name in PROCESS_TABLES:
            yield AssetMaterialization(
                asset_key=translator.get_asset_key(pipeline, name), partition=day,
                metadata={**translator.get_path_metadata(pipeline, name), **about_versions})


def day_events(pipeline: Pipeline, metrics: list[dict],
               thresholds: monitoring.MonitoringResource, instance: DagsterInstance,
               detail: Mapping[str, DayLateness] | None = None,
               translator: PlatformTranslator = DEFAULT_TRANSLATOR
               ) -> Iterator[AssetMaterialization | AssetCheckEvaluation]:
    """The days' materialisations, then each day's verdicts: the late-data checks judge live
    days as they judge backfilled ones. Yielded from an op, so each materialisation is stored
    before the verdicts that point at it are made. (An op cannot block its downstream the
    way the asset's blocking checks do; the run logs the failure.)"""
    yield from day_materializations(pipeline, metrics, detail, translator)
    yield from monitoring.check_evaluations(
        metrics, thresholds, translator.get_asset_key(pipeline, tables.LATE_DATA_METRICS),
        instance, translator)


def switch_observations(settings: PlatformSettings, switched: Mapping,
                        translator: PlatformTranslator = DEFAULT_TRANSLATOR
                        ) -> Iterator[AssetObservation]:
    """A switch (``Switched.as_metadata()``), as one observation of each windowed asset."""
    pipeline = platform_of(settings).pipelines.get(switched["pipeline"])
    for table in WINDOWED_TABLES:
        yield AssetObservation(
            asset_key=translator.get_asset_key(switched["pipeline"], table),
            metadata=translator.get_switch_metadata(switched, pipeline, table),
            description=f"readers switched to version {switched['to_version']}")


def switched_events(settings: PlatformSettings, done: list[Switched],
                    translator: PlatformTranslator = DEFAULT_TRANSLATOR
                    ) -> Iterator[AssetObservation]:
    for each in done:
        yield from switch_observations(settings, each.as_metadata(), translator)


def version_of(settings: PlatformSettings, name: str, version: str | None) -> Pipeline:
    """The pipeline version a live process reported (its file's when ``version`` is None)."""
    pipeline = platform_of(settings).pipelines[name]
    return pipeline if version is None else versions.version_pipeline(pipeline, version)


def stream_of(settings: PlatformSettings, name: str) -> Stream:
    """The stream a run names (empty: the only stream; several: the name is required)."""
    streams = platform_of(settings).streams
    if not name:
        if len(streams) != 1:
            raise SettingsError(f"config stream: give the stream to run (one of "
                                f"{', '.join(streams)})")
        return next(iter(streams.values()))
    return platform_of(settings).select_streams([name], "config stream")[0]


class IncrementConfig(Config):
    """Which stream, and which engine updates its pipelines' tables after ingest."""

    stream: str = Field(default="", description="The stream to ingest and update (empty: "
                                                "the only stream)")
    engine: str = Field(
        default=PlatformSettings.from_env(check=False).live_engine,
        description="live (jobs.live.run_live, Structured Streaming), backfill (recompute the "
                    "affected days) or auto (live when installed); PLATFORM_LIVE_ENGINE")


@op(description="Ingest a stream's new landing files, then update its pipelines' tables for "
                "the days they can change.", out={})
def live_increment(context: OpExecutionContext, config: IncrementConfig,
                   platform: PlatformResource, spark: DeltaSparkResource,
                   monitoring_thresholds: monitoring.MonitoringResource
                   ) -> Iterator[AssetMaterialization | AssetCheckEvaluation]:
    settings = platform.settings()
    stream = stream_of(settings, config.stream)
    session = spark.session()
    step = run_increment(session, stream, progress=context.log.info, engine=config.engine)
    yield from ingest_materializations(stream, step.ingest)
    for key, days in step.pipelines.items():
        pipeline = days.pipeline
        context.log.info(f"{key} ({step.engine}): days {days.first_day} .. {days.last_day}")
        if pipeline.spec.is_process:
            yield from process_materializations(pipeline, days.first_day, days.last_day)
            continue
        detail = (late_detail(session, pipeline, days.first_day, days.last_day)
                  if days.first_day and days.last_day else {})
        yield from day_events(pipeline, days.metrics, monitoring_thresholds,
                              context.instance, detail)
    if step.live_report is not None:
        yield from switched_events(settings, step.live_report.switched)


@job(description="Incremental run of a stream: ingest its new landing files and update the "
                 "tables of every pipeline that reads it, for the days they touch. Launched by "
                 "the landing sensor.")
def live_job():
    live_increment()

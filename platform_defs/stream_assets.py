"""A stream's assets: its landing files, and the arrival log and quarantine ingest appends to.

Each stream is the shared upstream of the pipelines that read it: one group per stream
(``events``), keys ``<stream>/landing_files``, ``<stream>/arrival_log``,
``<stream>/quarantine``. Ingest runs once per stream, whatever the number of pipelines.
"""


from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    Config,
    MaterializeResult,
    MetadataValue,
    asset,
    multi_asset,
)
from pydantic import Field

from jobs import tables
from jobs.config.streams import Stream
from jobs.generator import GeneratorConfig, generate
from jobs.streams.checks import check_landing
from jobs.streams.ingestors import ingest
from jobs.streams.report import IngestReport
from operators.time import parse_duration_ms, parse_timestamp_ms
from platform_defs.kafka_views import kafka_metadata
from platform_defs.late_data_views import watermark_text
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.table_specs import (
    DELTA_KINDS,
    OWNERS,
    spec_metadata,
    stream_key,
    table_path_metadata,
)

LANDING_FILES = "landing_files"
TOPICS = "topics"


class LandingConfig(Config):
    """The demo's event generator; production landing files come from collectors instead."""

    seed: int = Field(default=7)
    start: str = Field(default="2026-01-01T00:00:00Z")
    duration: str = Field(default="2d")
    events: int = Field(default=50_000)
    keys: int = Field(default=50)
    producers: int = Field(default=3)
    mean_delay_ms: float = Field(default=1_000.0,
                                 description="Every event is delayed by an exponential amount "
                                             "with this mean")
    late_fraction: float = Field(default=0.05,
                                 description="Share delayed by up to late_max_delay_ms more")
    late_max_delay_ms: int = Field(default=60_000)
    very_late_fraction: float = Field(default=0.01,
                                      description="Share delayed 10 min to 3 h: beyond any "
                                                  "sensible watermark")
    bad_fraction: float = Field(default=0.01, description="Share of bad lines of every kind")

    def generator_config(self) -> GeneratorConfig:
        return GeneratorConfig(
            seed=self.seed, start_ms=parse_timestamp_ms(self.start),
            duration_ms=parse_duration_ms(self.duration, setting="duration"),
            events=self.events, keys=self.keys, producers=self.producers,
            mean_delay_ms=self.mean_delay_ms, late_fraction=self.late_fraction,
            late_max_delay_ms=self.late_max_delay_ms,
            very_late_fraction=self.very_late_fraction, bad_fraction=self.bad_fraction)


def ingest_metadata(stream: Stream, report: IngestReport) -> dict[str, dict[str, Any]]:
    """Per table (the arrival log, the quarantine), the metadata of one ingest, whichever
    runs it (the asset, the live job): the ``batch_*`` counts are of every batch it ran (a
    backlog beyond the stream's batch size takes several), ``first_batch_id`` to
    ``batch_id`` (-1: none)."""
    first, last = report.batch_ids or (-1, -1)
    return {
        tables.ARRIVAL_LOG: {
            **table_path_metadata(stream.arrival_log),
            "first_batch_id": first, "batch_id": last,
            "batch_records": report.records, "batch_files": report.files,
            "watermark_ms": report.watermark_ms,
            "watermark": watermark_text(report.watermark_ms), **kafka_metadata(stream)},
        tables.QUARANTINE: {
            **table_path_metadata(stream.quarantine),
            "batch_quarantined": report.quarantined,
            "reasons": MetadataValue.json(report.reasons)},
    }


def ingest_results(stream: Stream, report: IngestReport) -> Iterator[MaterializeResult]:
    """The ingest asset's materialisations (:func:`ingest_metadata`)."""
    for name, metadata in ingest_metadata(stream, report).items():
        yield MaterializeResult(asset_key=stream_key(stream, name), metadata=metadata)


def topics_spec(stream: Stream, owners: list[str] = OWNERS) -> AssetSpec:
    """A Kafka stream's topics: written by its producers, not by Dagster (an external asset
    its ingest depends on)."""
    described = f" ({stream.spec.description})" if stream.spec.description else ""
    return AssetSpec(stream_key(stream, TOPICS), group_name=stream.name, owners=owners,
                     kinds={"kafka"}, description=f"Kafka {stream.origin}{described}: "
                     "written by producers; the landing sensor starts an ingest when their "
                     "latest offsets are ahead of what the arrival log holds.")


def stream_assets(stream: Stream, owners: list[str] = OWNERS
                  ) -> list[AssetsDefinition | AssetSpec]:
    """The landing files (or the Kafka topics) and the ingest of one stream, in a group
    named after it."""
    name = stream.name
    described = f" ({stream.spec.description})" if stream.spec.description else ""
    if stream.spec.kind == "kafka":
        topics = topics_spec(stream, owners)
        return [topics, _ingest_assets(stream, topics.key, owners)]
    landing = stream_key(stream, LANDING_FILES)

    @asset(
        key=landing, group_name=name, owners=owners, kinds={"python", "json"},
        description=f"JSON-lines files of stream {name}{described} below "
                    "<landing>/<producer>/, as collectors write them. Materialising it runs "
                    "the seeded demo generator; in production the landing sensor notices new "
                    "files instead.",
    )
    def landing_files(config: LandingConfig, platform: PlatformResource) -> MaterializeResult:
        current = platform.stream(name)
        counts = generate(config.generator_config(), current.landing_dir)
        return MaterializeResult(metadata={
            "path": MetadataValue.path(str(current.landing)),
            "files": counts["files"], "lines": counts["lines"],
            "bad_lines": sum(v for k, v in counts.items() if k.startswith("bad_")),
        })

    return [landing_files, _ingest_assets(stream, landing, owners)]


def _ingest_assets(stream: Stream, upstream: AssetKey, owners: list[str]) -> AssetsDefinition:
    name = stream.name

    @multi_asset(
        name=f"{name}_ingest",
        specs=[
            AssetSpec(stream_key(stream, tables.ARRIVAL_LOG), group_name=name, owners=owners,
                      kinds=DELTA_KINDS, deps=[upstream],
                      metadata=spec_metadata(tables.ARRIVAL_LOG, stream.arrival_log),
                      description=f"Bronze of stream {name}: every good record with its "
                                  "ingest_time, arrival_seq and the watermark in force at its "
                                  "arrival. Append only; every pipeline reading the stream is "
                                  "a pure function of it."),
            AssetSpec(stream_key(stream, tables.QUARANTINE), group_name=name, owners=owners,
                      kinds=DELTA_KINDS, deps=[upstream],
                      metadata=spec_metadata(tables.QUARANTINE, stream.quarantine),
                      description=f"Bad lines of stream {name} with the reason they never "
                                  "reached an operator."),
        ],
    )
    def ingest_landing(context: AssetExecutionContext, platform: PlatformResource,
                       spark: DeltaSparkResource):
        """Append the landing files (or Kafka records) not yet ingested, in as many batches
        as the stream's batch size takes (a no-op when there are none); a landing folder
        that does not exist, or a broker that does not answer, fails the run with the
        command line's message."""
        current = platform.stream(name)
        check_landing(current)
        report = ingest(spark.session(), current, progress=context.log.info)
        yield from ingest_results(current, report)

    return ingest_landing

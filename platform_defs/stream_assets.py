"""A stream's assets: its landing files, and the arrival log and quarantine ingest appends to.

Each stream is the shared upstream of the pipelines that read it: one group per stream
(``events``), keys ``<stream>/landing_files``, ``<stream>/arrival_log``,
``<stream>/quarantine``. Ingest runs once per stream, whatever the number of pipelines. What
each asset and materialisation shows is the translator's (``platform_defs.translator``).
"""


from collections.abc import Iterator

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
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.translator import (
    DEFAULT_TRANSLATOR,
    LANDING_FILES,
    TOPICS,
    PlatformTranslator,
)


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


def ingest_results(stream: Stream, report: IngestReport,
                   translator: PlatformTranslator = DEFAULT_TRANSLATOR
                   ) -> Iterator[MaterializeResult]:
    """The ingest asset's materialisations (``PlatformTranslator.get_ingest_metadata``)."""
    for name, metadata in translator.get_ingest_metadata(stream, report).items():
        yield MaterializeResult(asset_key=translator.get_asset_key(stream, name),
                                metadata=metadata)


def topics_spec(stream: Stream, translator: PlatformTranslator = DEFAULT_TRANSLATOR
                ) -> AssetSpec:
    """A Kafka stream's topics: written by its producers, not by Dagster (an external asset
    its ingest depends on)."""
    return translator.get_asset_spec(stream, TOPICS)


def stream_assets(stream: Stream, translator: PlatformTranslator = DEFAULT_TRANSLATOR
                  ) -> list[AssetsDefinition | AssetSpec]:
    """The landing files (or the Kafka topics) and the ingest of one stream, in a group
    named after it."""
    name = stream.name
    if stream.spec.kind == "kafka":
        topics = topics_spec(stream, translator)
        return [topics, _ingest_assets(stream, topics.key, translator)]
    landing = translator.get_asset_key(stream, LANDING_FILES)

    @asset(
        key=landing, group_name=translator.get_group_name(stream, LANDING_FILES),
        owners=translator.get_owners(stream, LANDING_FILES),
        kinds=translator.get_kinds(stream, LANDING_FILES),
        metadata=translator.get_metadata(stream, LANDING_FILES),
        code_version=translator.get_code_version(stream, LANDING_FILES),
        description=translator.get_description(stream, LANDING_FILES),
    )
    def landing_files(config: LandingConfig, platform: PlatformResource) -> MaterializeResult:
        current = platform.stream(name)
        counts = generate(config.generator_config(), current.landing_dir)
        return MaterializeResult(metadata={
            "path": MetadataValue.path(str(current.landing)),
            "files": counts["files"], "lines": counts["lines"],
            "bad_lines": sum(v for k, v in counts.items() if k.startswith("bad_")),
        })

    return [landing_files, _ingest_assets(stream, landing, translator)]


def _ingest_assets(stream: Stream, upstream: AssetKey, translator: PlatformTranslator
                   ) -> AssetsDefinition:
    name = stream.name

    @multi_asset(
        name=f"{name}_ingest",
        specs=[translator.get_asset_spec(stream, table, deps=[upstream])
               for table in (tables.ARRIVAL_LOG, tables.QUARANTINE)],
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
        yield from ingest_results(current, report, translator)

    return ingest_landing

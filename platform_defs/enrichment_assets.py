"""Enrichment tables as assets: recorded responses, enriched events and dead letters.

One Spark job (``jobs.enrichment.run_enrichment``) writes all three from a stream's arrival log,
so they are one multi-asset per stream (keys ``<stream>/enrichment_*``). The service URL is
resource config (``PLATFORM_ENRICHMENT_URL`` by default); the bearer token comes from the
environment through Dagster's ``EnvVar`` and is handed to Spark's Python workers in memory only,
never logged and never put in metadata.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    AutomationCondition,
    Config,
    ConfigurableResource,
    MaterializeResult,
    multi_asset,
)
from pydantic import Field
from pyspark.sql import SparkSession

from jobs import tables
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.enrichment import DEAD_LETTERS, ENRICHED, RESPONSES, run_enrichment
from operators.async_io import AsyncEnrichConfig, EnrichMode
from operators.retry import RetryPolicy
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.translator import DEFAULT_TRANSLATOR, ENRICHMENT_TABLES, PlatformTranslator
from services.enrichment_client import TRANSIENT_ERRORS
from services.enrichment_service import DEFAULT_TOKEN_ENV


class EnrichmentServiceResource(ConfigurableResource):
    """Where the enrichment service is and how to call it."""

    service_url: str = Field(
        default=PlatformSettings.from_env(check=False).enrichment_url,
        description="Base URL of the user-catalogue service (PLATFORM_ENRICHMENT_URL; "
                    "`python -m services.enrichment_service` listens on 8765)")
    token: str | None = Field(
        default=None, description="Bearer token; set it with EnvVar, never as a literal")
    capacity: int = Field(default=16, description="Calls in flight per Spark task")
    timeout_ms: int = Field(default=2_000, description="Timeout of each attempt")
    max_attempts: int = Field(default=3, description="Attempts per record, the first included")
    retry_delay_ms: int = Field(default=50, description="Fixed delay, or the first backoff delay")
    backoff: str = Field(default="exponential",
                         description="'exponential' (doubling, capped) or 'fixed' delays")
    max_retry_delay_ms: int = Field(default=10_000, description="Cap of the exponential backoff")
    output: str = Field(
        default="ordered", description="'ordered' (input order) or 'unordered' (completion "
        "order between watermark ticks, never across one)")

    def enrich_config(self, mode: str) -> AsyncEnrichConfig:
        """The operator's configuration; a bad value raises one error naming the field."""
        if self.backoff not in ("exponential", "fixed"):
            raise ValueError(f"enrichment_service.backoff must be 'exponential' or 'fixed', "
                             f"got {self.backoff!r}")
        try:
            if self.backoff == "fixed":
                retry = RetryPolicy.fixed(self.max_attempts, self.retry_delay_ms,
                                          retry_on=TRANSIENT_ERRORS)
            else:
                retry = RetryPolicy.exponential(self.max_attempts, self.retry_delay_ms,
                                                max_delay_ms=self.max_retry_delay_ms,
                                                retry_on=TRANSIENT_ERRORS)
            return AsyncEnrichConfig(capacity=self.capacity, timeout_ms=self.timeout_ms,
                                     retry=retry, output=self.output, mode=EnrichMode(mode))
        except ValueError as error:
            raise ValueError(f"enrichment_service: {error}") from None


class EnrichmentRunConfig(Config):
    """``live`` calls the service (reusing recordings), ``replay`` serves recordings only
    (backfills that must reproduce the live run), ``refresh`` calls again and re-records."""

    mode: str = Field(default="live", description="live, replay or refresh")


@contextmanager
def worker_token(spark: SparkSession, token: str | None) -> Iterator[None]:
    """Make the token visible to Python workers (as ``ENRICHMENT_SERVICE_TOKEN``) for one job.

    Workers take their environment from the SparkContext, not from ``os.environ`` after the
    JVM started, so the token goes there, and is removed again afterwards.
    """
    environment = spark.sparkContext.environment
    previous = environment.get(DEFAULT_TOKEN_ENV)
    if token:
        environment[DEFAULT_TOKEN_ENV] = token
    try:
        yield
    finally:
        if previous is None:
            environment.pop(DEFAULT_TOKEN_ENV, None)
        else:
            environment[DEFAULT_TOKEN_ENV] = previous


ENRICH_NEW_ARRIVALS = AutomationCondition.eager()
"""Enrich what the arrival log received: run once the log was updated (by the landing
sensor's run, say), unless a run is already under way. Evaluated by Dagster's
``default_automation_condition_sensor``, which starts stopped: turn it on under Automation.
(The windowed tables' rules, a day's new records and its finality by watermark, are not
conditions on their parents' updates: the landing sensor and the finality schedule keep them.)"""


def enrichment_assets(stream: Stream, translator: PlatformTranslator = DEFAULT_TRANSLATOR
                      ) -> AssetsDefinition:
    """The enrichment of one stream's arrival log: keys ``<stream>/enrichment_*``."""
    name = stream.name
    log = translator.get_asset_key(stream, tables.ARRIVAL_LOG)

    @multi_asset(name=f"{name}_enrichment", specs=[
        translator.get_asset_spec(stream, table, deps=[log],
                                  automation_condition=ENRICH_NEW_ARRIVALS)
        for table in ENRICHMENT_TABLES])
    def enrichment(context: AssetExecutionContext, config: EnrichmentRunConfig,
                   platform: PlatformResource, spark: DeltaSparkResource,
                   enrichment_service: EnrichmentServiceResource):
        """Enrich the stream's whole arrival log (recorded answers are reused, so a re-run
        makes no calls)."""
        current = platform.stream(name)
        service = enrichment_service
        run_config = service.enrich_config(config.mode)
        session = spark.session()
        with worker_token(session, service.token):
            report = run_enrichment(session, current, service.service_url, run_config,
                                    progress=context.log.info)
        calls = {key: report.counters.get(key, 0) for key in
                 ("calls", "retries", "timeouts", "errors", "rejected_results", "replayed",
                  "missing_recordings", "max_in_flight")}
        yield MaterializeResult(asset_key=translator.get_asset_key(stream, RESPONSES), metadata={
            **translator.get_path_metadata(current, RESPONSES),
            "calls_made": report.calls_made, "mode": config.mode, **calls})
        yield MaterializeResult(asset_key=translator.get_asset_key(stream, ENRICHED), metadata={
            **translator.get_path_metadata(current, ENRICHED), "enriched": report.enriched,
            "first_seq": report.first_seq, "last_seq": report.last_seq})
        yield MaterializeResult(asset_key=translator.get_asset_key(stream, DEAD_LETTERS),
                                metadata={**translator.get_path_metadata(current, DEAD_LETTERS),
                                          "dead_letters": report.dead_letters})

    return enrichment

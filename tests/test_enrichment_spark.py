"""Enrichment on Spark against the real service: exactly-once tables, replay with it stopped."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.enrichment import (
    DEAD_LETTERS,
    ENRICHED,
    RESPONSES,
    run_enrichment,
    run_enrichment_live,
)
from jobs.generator import GeneratorConfig, generate
from jobs.streams.landing.ingestor import ingest
from operators.async_io import AsyncEnrichConfig, EnrichMode
from operators.retry import RetryPolicy
from services.enrichment_client import TRANSIENT_ERRORS
from services.enrichment_service import running_service
from tests.enrichment.enrichment_helpers import fetch_stats

pytestmark = pytest.mark.spark

QUIET = {"progress": lambda _: None}


def _events(env: dict[str, str] | None = None) -> Stream:
    return platform_of(PlatformSettings.from_env(env)).streams["events"]


def _table(spark, stream, name) -> pd.DataFrame:
    frame = spark.read.format("delta").load(stream.table_path(name)).toPandas()
    return frame.sort_values("arrival_seq").reset_index(drop=True)


def test_live_repeat_and_replay_give_the_same_rows_once(spark, platform_env):
    stream = _events()
    generate(GeneratorConfig(events=600, keys=50, duration_ms=3_600_000, bad_fraction=0),
             stream.landing)
    report = ingest(spark, stream, **QUIET)
    retry = RetryPolicy.fixed(3, 5, retry_on=TRANSIENT_ERRORS)
    live = AsyncEnrichConfig(capacity=8, timeout_ms=2_000, retry=retry)
    # the catalogue knows user-0000..user-0039: the generator's user-0040.. are dead letters
    with running_service(users=40, latency_ms=5, error_rate=0.2, seed=3) as service:
        first = run_enrichment(spark, stream, service.base_url, live, **QUIET)
        stats = fetch_stats(service.base_url)
        assert 0 < stats["max_in_flight"] <= 2 * live.capacity  # two partitions, per task
        enriched, dead = _table(spark, stream, ENRICHED), _table(spark, stream, DEAD_LETTERS)
        assert len(enriched) + len(dead) == report.records
        known = dead.key.str[5:].astype(int) < 40
        assert (enriched.key.str[5:].astype(int) < 40).all()  # unknown users never enrich
        assert (~known).sum() > 0
        not_found = dead.error_type.str.endswith("NotFoundError")
        server = dead.error_type.str.endswith("ServerError")
        assert (not_found | server).all()
        assert not (not_found & known).any()  # only unknown users get a 404
        assert (dead[server].attempts == 3).all()  # 5xx: retried until attempts run out
        assert (dead[not_found].attempts <= 3).all()  # a 404 ends the retries at once

        # a repeated run (as after a failure) reuses the recordings: no calls, same rows once
        calls_before = fetch_stats(service.base_url)["requests"]
        run_enrichment(spark, stream, service.base_url, live, **QUIET)
        assert fetch_stats(service.base_url)["requests"] == calls_before
        pd.testing.assert_frame_equal(enriched, _table(spark, stream, ENRICHED))
        pd.testing.assert_frame_equal(dead, _table(spark, stream, DEAD_LETTERS))
        base_url = service.base_url
    assert first.enriched == len(enriched)

    # the service is gone: a replay backfill still reproduces the live tables exactly
    replay = AsyncEnrichConfig(capacity=8, timeout_ms=200, retry=retry, mode=EnrichMode.REPLAY)
    run_enrichment(spark, stream, base_url, replay, **QUIET)
    pd.testing.assert_frame_equal(enriched, _table(spark, stream, ENRICHED))
    pd.testing.assert_frame_equal(dead, _table(spark, stream, DEAD_LETTERS))
    assert len(_table(spark, stream, RESPONSES)) == report.records


def test_refresh_calls_again_and_records_the_new_answers(spark, platform_env):
    stream = _events()
    generate(GeneratorConfig(events=200, keys=10, duration_ms=3_600_000, bad_fraction=0),
             stream.landing)
    ingest(spark, stream, **QUIET)
    config = AsyncEnrichConfig(capacity=4, timeout_ms=2_000)
    with running_service(catalogue_version=1) as service:
        run_enrichment(spark, stream, service.base_url, config, **QUIET)
    old = _table(spark, stream, ENRICHED)
    with running_service(catalogue_version=2) as service:
        run_enrichment(spark, stream, service.base_url,
                       AsyncEnrichConfig(capacity=4, timeout_ms=2_000, mode=EnrichMode.REFRESH),
                       **QUIET)
        assert fetch_stats(service.base_url)["requests"] == len(old)
    new = _table(spark, stream, ENRICHED)
    assert len(new) == len(old)
    assert (new.response_json != old.response_json).any()
    recorded = _table(spark, stream, RESPONSES)
    assert recorded.response_json.tolist() == new.response_json.tolist()


def test_a_service_down_then_answering_garbage_then_back(spark, platform_env):
    """The service down: the job finishes with every record a dead letter (nothing lost, the
    connection error named); up but answering garbage for some calls: retried, never
    enriched with garbage; a refresh once it is healthy enriches every record."""
    stream = _events()
    generate(GeneratorConfig(events=150, keys=10, duration_ms=3_600_000, bad_fraction=0),
             stream.landing)
    report = ingest(spark, stream, **QUIET)
    retry = RetryPolicy.fixed(2, 1, retry_on=TRANSIENT_ERRORS)
    with running_service() as gone:
        url = gone.base_url
    down = run_enrichment(spark, stream, url,
                          AsyncEnrichConfig(capacity=4, timeout_ms=2_000, retry=retry), **QUIET)
    dead = _table(spark, stream, DEAD_LETTERS)
    assert (down.enriched, down.dead_letters, len(dead)) == (0, report.records, report.records)
    assert dead.error_type.str.contains("Connect").all() and (dead.attempts == 2).all()

    refresh = AsyncEnrichConfig(capacity=4, timeout_ms=2_000, retry=retry,
                                mode=EnrichMode.REFRESH)
    with running_service(garbage_rate=0.3, seed=5) as flaky:
        run_enrichment(spark, stream, flaky.base_url, refresh, **QUIET)
        assert fetch_stats(flaky.base_url)["garbage_responses"] > 0
    enriched, dead = _table(spark, stream, ENRICHED), _table(spark, stream, DEAD_LETTERS)
    assert len(enriched) + len(dead) == report.records
    assert enriched.response_json.str.startswith("{").all()
    assert dead.error_type.str.endswith("MalformedResponseError").all()

    with running_service() as healthy:
        run_enrichment(spark, stream, healthy.base_url, refresh, **QUIET)
    assert len(_table(spark, stream, ENRICHED)) == report.records
    assert _table(spark, stream, DEAD_LETTERS).empty


def test_streamed_enrichment_with_a_crash_equals_the_batch_run(spark, platform_env, tmp_path):
    """A micro-batch repeated after a crash calls again but writes its rows once."""
    stream = _events()
    for index in range(3):
        generate(GeneratorConfig(events=150, keys=50, duration_ms=3_600_000, bad_fraction=0,
                                 seed=index, start_ms=1_767_225_600_000 + index * 3_600_000),
                 stream.landing)
        ingest(spark, stream, **QUIET)
    batch_home = _events({"PLATFORM_HOME": str(tmp_path / "batch")})
    shutil.copytree(stream.table_path("arrival_log"), batch_home.table_path("arrival_log"))
    config = AsyncEnrichConfig(capacity=8, timeout_ms=2_000)
    checkpoint = str(tmp_path / "checkpoint")

    def crash_after_batch_1(message: str) -> None:
        if message.startswith("enrichment: batch 1:"):
            raise RuntimeError("simulated crash after the writes of batch 1")

    with running_service(users=40) as service:
        with pytest.raises(Exception, match="simulated crash"):
            run_enrichment_live(spark, stream, service.base_url, config, checkpoint=checkpoint,
                                max_files_per_trigger=1, progress=crash_after_batch_1)
        run_enrichment_live(spark, stream, service.base_url, config, checkpoint=checkpoint,
                            max_files_per_trigger=1, **QUIET)
        run_enrichment(spark, batch_home, service.base_url, config, **QUIET)
    for name in (ENRICHED, DEAD_LETTERS):
        pd.testing.assert_frame_equal(_table(spark, batch_home, name),
                                      _table(spark, stream, name), check_exact=True)
    assert len(_table(spark, stream, ENRICHED)) > 0 and len(_table(spark, stream,
                                                                    DEAD_LETTERS)) > 0


def test_a_crash_between_the_output_writes_splits_no_record(spark, platform_env, monkeypatch):
    """The service fails at random, so calling again gives other answers. A batch that crashes
    after appending its enriched rows but before its dead letters must, when repeated, write
    the dead letters of the *same* outcomes: every record in exactly one of the two tables,
    and the recorded responses telling the same story (a replay reproduces both)."""
    import jobs.enrichment as enrichment

    stream = _events()
    for index in range(3):
        generate(GeneratorConfig(events=150, keys=50, duration_ms=3_600_000, bad_fraction=0,
                                 seed=10 + index,
                                 start_ms=1_767_225_600_000 + index * 3_600_000),
                 stream.landing)
        ingest(spark, stream, **QUIET)
    real_append = enrichment.append_idempotent
    crashes: list[int] = []

    def crash_after_the_enriched_append(frame, path, **options):
        real_append(frame, path, **options)
        if path.endswith(ENRICHED) and options["version"] == 1 and not crashes:
            crashes.append(1)
            raise RuntimeError("simulated crash between the enriched and dead-letter writes")

    monkeypatch.setattr(enrichment, "append_idempotent", crash_after_the_enriched_append)
    retry = RetryPolicy.fixed(2, 5, retry_on=TRANSIENT_ERRORS)
    config = AsyncEnrichConfig(capacity=8, timeout_ms=2_000, retry=retry)
    checkpoint = stream.checkpoints + "/enrichment-test"
    with running_service(users=40, error_rate=0.3, seed=5) as service:
        with pytest.raises(Exception, match="simulated crash"):
            run_enrichment_live(spark, stream, service.base_url, config,
                                checkpoint=checkpoint, max_files_per_trigger=1, **QUIET)
        batches = run_enrichment_live(spark, stream, service.base_url, config,
                                      checkpoint=checkpoint, max_files_per_trigger=1, **QUIET)
    assert crashes == [1]
    assert batches[0]["batch_id"] == 1 and batches[0]["calls"] == 0, \
        "the repeated batch answers from its recordings"
    assert sum(b["errors"] for b in batches) > 0, "the service did fail at random"
    enriched, dead = _table(spark, stream, ENRICHED), _table(spark, stream, DEAD_LETTERS)
    log = spark.read.format("delta").load(stream.table_path("arrival_log")).count()
    seqs = pd.concat([enriched.arrival_seq, dead.arrival_seq])
    assert seqs.is_unique and len(seqs) == log
    assert (dead.error_type.str.endswith("ServerError")).any()

    replay = AsyncEnrichConfig(capacity=8, timeout_ms=200, retry=retry, mode=EnrichMode.REPLAY)
    run_enrichment(spark, stream, "http://127.0.0.1:9", replay, **QUIET)  # nothing listens
    pd.testing.assert_frame_equal(enriched, _table(spark, stream, ENRICHED))
    pd.testing.assert_frame_equal(dead, _table(spark, stream, DEAD_LETTERS))

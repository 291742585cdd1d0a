"""Record, replay (service stopped) and refresh: the backfill reproduces the live run."""

from __future__ import annotations

import json

from operators.async_io import (
    AsyncEnrichConfig,
    EnrichMode,
    OutputMode,
    enrich_batch,
    iter_enrich,
)
from operators.async_results import Recording, recordings_by_seq
from operators.retry import RetryPolicy
from services.enrichment_client import TRANSIENT_ERRORS, user_lookup
from services.enrichment_service import running_service
from tests.enrichment.enrichment_helpers import fetch_stats, make_records, user_keys

POLICY = RetryPolicy.fixed(2, 5, retry_on=TRANSIENT_ERRORS)


def _live_run(output: OutputMode, version: int = 1) -> tuple[list, list, str]:
    """A live run with successes and both kinds of dead letter (404, exhausted 503s)."""
    keys = [*user_keys(40), "user-9999", "user-0005"]
    records = make_records(keys, tick_every=6)
    with running_service(
        users=1_000,
        latency_ms=1,
        jitter_ms=10,
        fail_first={"user-0007": 99},
        catalogue_version=version,
    ) as svc:
        config = AsyncEnrichConfig(capacity=8, output=output, retry=POLICY)
        live = enrich_batch(records, user_lookup(svc.base_url), config)
        url = svc.base_url
    return records, live, url


def test_replay_with_the_service_stopped_reproduces_the_live_run() -> None:
    records, live, stopped_url = _live_run(OutputMode.ORDERED)
    assert {o.error_type for o in live.dead_letters} == {
        "services.enrichment_client.NotFoundError",
        "services.enrichment_client.ServerError",
    }
    # Recordings travel as JSON rows (as they would through a Delta table).
    stored = [json.loads(r.to_json()) for r in live.recordings]
    assert len(stored) == len(records)
    replay = enrich_batch(
        records,
        user_lookup(stopped_url),  # nothing listens there any more: a call would fail
        AsyncEnrichConfig(capacity=8, retry=POLICY, mode=EnrichMode.REPLAY),
        recorded=stored,
    )
    assert replay.outcomes == live.outcomes
    assert all(o.source == "recording" for o in replay.outcomes)
    assert replay.metrics.calls == 0 and replay.metrics.replayed == len(records)
    assert replay.recordings == []


def test_unordered_replay_gives_the_same_results_per_tick_segment() -> None:
    records, live, stopped_url = _live_run(OutputMode.UNORDERED)
    config = AsyncEnrichConfig(
        capacity=8, output=OutputMode.UNORDERED, retry=POLICY, mode=EnrichMode.REPLAY
    )
    replay = enrich_batch(records, user_lookup(stopped_url), config, recorded=live.recordings)

    def by_segment(outcomes: list) -> dict[int, list]:
        segments: dict[int, list] = {}
        for o in outcomes:
            segments.setdefault(o.watermark_ms, []).append(o)
        return {w: sorted(os, key=lambda o: o.arrival_seq) for w, os in segments.items()}

    assert by_segment(replay.outcomes) == by_segment(live.outcomes)
    replay_watermarks = [o.watermark_ms for o in replay.outcomes]
    assert replay_watermarks == sorted(o.watermark_ms for o in live.outcomes)


def test_replay_without_a_recording_is_a_dead_letter_with_the_reason() -> None:
    records = make_records(user_keys(3))
    recorded = [Recording(records[0]["arrival_seq"], "ok", '{"tier":"pro"}', None, None, 1)]
    config = AsyncEnrichConfig(mode=EnrichMode.REPLAY)
    result = enrich_batch(records, user_lookup("http://127.0.0.1:9"), config, recorded=recorded)
    assert result.outcomes[0].ok and result.outcomes[0].response == {"tier": "pro"}
    missing = result.outcomes[1]
    assert missing.is_dead_letter and missing.error_type == "MissingRecording"
    assert f"arrival_seq={records[1]['arrival_seq']}" in missing.error_message
    assert missing.attempts == 0 and missing.record == records[1]
    assert result.metrics.missing_recordings == 2 and result.metrics.calls == 0


def test_refresh_calls_again_and_live_reuses_recordings() -> None:
    records, live, _ = _live_run(OutputMode.ORDERED, version=1)
    ok_seqs = {o.arrival_seq for o in live.results}
    with running_service(users=1_000, catalogue_version=2) as svc:
        refresh = enrich_batch(
            records,
            user_lookup(svc.base_url),
            AsyncEnrichConfig(capacity=8, retry=POLICY, mode=EnrichMode.REFRESH),
            recorded=live.recordings,
        )
        assert fetch_stats(svc.base_url)["requests"] == len(records)
        # A repeated live batch reuses what was recorded: no calls, same outputs.
        repeated = enrich_batch(
            records,
            user_lookup(svc.base_url),
            AsyncEnrichConfig(capacity=8, retry=POLICY),
            recorded=live.recordings,
        )
        assert fetch_stats(svc.base_url)["requests"] == len(records)
    assert repeated.outcomes == live.outcomes
    assert refresh.metrics.calls == len(records) and refresh.metrics.replayed == 0
    refreshed = {o.arrival_seq: o for o in refresh.outcomes}
    assert all(refreshed[s].response["catalogue_version"] == 2 for s in ok_seqs)
    assert [refreshed[s].response["tier"] for s in sorted(ok_seqs)] != [
        o.response["tier"] for o in live.results
    ]
    # user-0007 no longer fails: the refresh's recording supersedes the dead letter's.
    flaky = next(o.arrival_seq for o in live.outcomes if o.record["key"] == "user-0007")
    assert live.outcomes[[o.arrival_seq for o in live.outcomes].index(flaky)].is_dead_letter
    assert recordings_by_seq([*live.recordings, *refresh.recordings])[flaky].status == "ok"
    assert len(refresh.recordings) == len(records)


def test_iter_enrich_streams_the_same_outcomes_as_the_batch() -> None:
    records = make_records(user_keys(25), tick_every=4)
    with running_service(latency_ms=1, jitter_ms=5) as svc:
        config = AsyncEnrichConfig(capacity=5)
        batch = enrich_batch(records, user_lookup(svc.base_url), config)
        streamed = list(iter_enrich(iter(records), user_lookup(svc.base_url), config))
    assert streamed == batch.outcomes


def test_recording_rows_round_trip() -> None:
    recording = Recording(7, "dead_letter", None, "TimeoutError", "call timed out", 3)
    assert Recording.from_json(recording.to_json()) == recording
    assert Recording.from_row(recording.to_row()) == recording
    # As pandas hands rows over: NULL strings arrive as NaN.
    ok_row = {
        "arrival_seq": 8,
        "status": "ok",
        "response_json": '{"a":1}',
        "error_type": float("nan"),
        "error_message": float("nan"),
        "attempts": 1,
    }
    assert Recording.from_row(ok_row) == Recording(8, "ok", '{"a":1}', None, None, 1)


def test_outcome_rows_carry_the_recorded_json() -> None:
    records = make_records(["user-0001"])
    with running_service() as svc:
        result = enrich_batch(records, user_lookup(svc.base_url), AsyncEnrichConfig())
    row = result.outcomes[0].to_row()
    assert row["response_json"] == result.recordings[0].response_json
    assert json.loads(row["response_json"])["key"] == "user-0001"
    assert (row["arrival_seq"], row["status"], row["attempts"]) == (
        records[0]["arrival_seq"],
        "ok",
        1,
    )


def test_closing_the_stream_early_stops_calling() -> None:
    records = make_records(user_keys(200))
    with running_service(latency_ms=20) as svc:
        stream = iter_enrich(records, user_lookup(svc.base_url), AsyncEnrichConfig(capacity=10))
        first = [next(stream) for _ in range(3)]
        stream.close()
        requests = fetch_stats(svc.base_url)["requests"]
    assert [o.arrival_seq for o in first] == [r["arrival_seq"] for r in records[:3]]
    assert requests <= 10 + 3  # what was admitted before the close, nothing after

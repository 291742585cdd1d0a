"""Timeouts, retries, backoff and dead letters, counted on the server."""

from __future__ import annotations

import time

from operators.async_io import AsyncEnrichConfig, enrich_batch
from operators.retry import RetryPolicy
from services.catalogue import user_profile
from services.enrichment_client import TRANSIENT_ERRORS, user_lookup
from services.enrichment_service import running_service
from tests.enrichment.enrichment_helpers import fetch_stats, make_records, user_keys


def test_timeouts_are_retried_then_dead_lettered() -> None:
    records = make_records(user_keys(4))
    policy = RetryPolicy.fixed(3, 10, retry_on=TRANSIENT_ERRORS)
    with running_service(slow_rate=1.0, slow_ms=1_500) as svc:
        config = AsyncEnrichConfig(capacity=4, timeout_ms=100, retry=policy)
        result = enrich_batch(records, user_lookup(svc.base_url), config)
        stats = fetch_stats(svc.base_url)
    assert stats["by_key"] == {key: 3 for key in user_keys(4)}
    assert len(result.dead_letters) == 4
    for outcome in result.dead_letters:
        assert outcome.error_type == "TimeoutError"
        assert outcome.error_message == "call timed out after 100 ms"
        assert outcome.attempts == 3
        assert outcome.response is None and outcome.record["key"] in user_keys(4)
    m = result.metrics
    assert (m.calls, m.retries, m.timeouts, m.dead_letters) == (12, 8, 12, 4)


def test_transient_failures_are_retried_until_success() -> None:
    records = make_records(user_keys(3))
    policy = RetryPolicy.fixed(4, 5, retry_on=TRANSIENT_ERRORS)
    with running_service(fail_first={"user-0001": 2, "user-0002": 3}) as svc:
        config = AsyncEnrichConfig(capacity=3, retry=policy)
        result = enrich_batch(records, user_lookup(svc.base_url), config)
        stats = fetch_stats(svc.base_url)
    assert stats["by_key"] == {"user-0000": 1, "user-0001": 3, "user-0002": 4}
    assert [o.attempts for o in result.outcomes] == [1, 3, 4]
    assert all(o.ok for o in result.outcomes)
    assert (result.metrics.calls, result.metrics.retries, result.metrics.errors) == (8, 5, 5)


def test_server_errors_exhaust_retries_into_a_dead_letter_without_stopping() -> None:
    keys = ["user-0001", "user-0002", "user-0003"]
    policy = RetryPolicy.fixed(3, 5, retry_on=TRANSIENT_ERRORS)
    with running_service(fail_first={"user-0002": 99}) as svc:
        config = AsyncEnrichConfig(capacity=2, retry=policy)
        result = enrich_batch(make_records(keys), user_lookup(svc.base_url), config)
        stats = fetch_stats(svc.base_url)
    assert [o.status for o in result.outcomes] == ["ok", "dead_letter", "ok"]
    dead = result.outcomes[1]
    assert dead.error_type == "services.enrichment_client.ServerError"
    assert "HTTP 503" in dead.error_message and "user-0002" in dead.error_message
    assert dead.attempts == 3 and dead.record["key"] == "user-0002"
    assert stats["by_key"]["user-0002"] == 3


def test_unknown_key_is_not_retried_unless_configured() -> None:
    records = make_records(["user-0001", "user-9999"])
    with running_service(users=100) as svc:
        no_404_retry = RetryPolicy.fixed(3, 5, retry_on=TRANSIENT_ERRORS)
        result = enrich_batch(
            records, user_lookup(svc.base_url), AsyncEnrichConfig(retry=no_404_retry)
        )
        assert fetch_stats(svc.base_url)["by_key"]["user-9999"] == 1
        retry_all = RetryPolicy.fixed(3, 5, retry_on=(Exception,))
        retried = enrich_batch(
            records, user_lookup(svc.base_url), AsyncEnrichConfig(retry=retry_all)
        )
        assert fetch_stats(svc.base_url)["by_key"]["user-9999"] == 1 + 3
    assert result.outcomes[0].ok
    dead = result.outcomes[1]
    assert dead.error_type == "services.enrichment_client.NotFoundError"
    assert dead.attempts == 1 and "unknown user" in dead.error_message
    assert retried.outcomes[1].attempts == 3


def test_retry_on_result_predicate() -> None:
    # A result the caller considers "not ready" is retried like a failure.
    records = make_records(["user-0001"])
    policy = RetryPolicy.fixed(2, 5, retry_on_result=lambda profile: profile["tier"] != "x")
    with running_service() as svc:
        result = enrich_batch(records, user_lookup(svc.base_url), AsyncEnrichConfig(retry=policy))
        assert fetch_stats(svc.base_url)["requests"] == 2
    dead = result.outcomes[0]
    assert dead.error_type == "RejectedResult" and dead.attempts == 2
    assert result.metrics.rejected_results == 2


def test_fixed_backoff_waits_at_least_the_delay() -> None:
    policy = RetryPolicy.fixed(4, 150, retry_on=TRANSIENT_ERRORS)
    with running_service(fail_first={"user-0001": 3}) as svc:
        started = time.perf_counter()
        result = enrich_batch(
            make_records(["user-0001"]), user_lookup(svc.base_url), AsyncEnrichConfig(retry=policy)
        )
        elapsed_ms = (time.perf_counter() - started) * 1000
    assert result.outcomes[0].ok and result.outcomes[0].attempts == 4
    assert elapsed_ms >= 3 * 150


def test_exponential_backoff_grows_and_is_capped() -> None:
    # Delays 60, 120, 200 (capped from 240): at least 380 ms, and more than a fixed 60 ms would.
    policy = RetryPolicy.exponential(
        4, 60, multiplier=2.0, max_delay_ms=200, retry_on=TRANSIENT_ERRORS
    )
    with running_service(error_rate=1.0) as svc:
        started = time.perf_counter()
        result = enrich_batch(
            make_records(["user-0001"]), user_lookup(svc.base_url), AsyncEnrichConfig(retry=policy)
        )
        elapsed_ms = (time.perf_counter() - started) * 1000
        assert fetch_stats(svc.base_url)["requests"] == 4
    assert result.outcomes[0].is_dead_letter and result.outcomes[0].attempts == 4
    assert elapsed_ms >= 60 + 120 + 200


def test_garbage_answers_are_never_passed_on_as_profiles() -> None:
    """200 with a cut-off body, proxy HTML, a JSON list or a number: retried as transient;
    what stays garbage after the attempts is a dead letter naming it, and nothing is lost."""
    keys = user_keys(40)
    policy = RetryPolicy.fixed(3, 1, retry_on=TRANSIENT_ERRORS)
    with running_service(garbage_rate=0.5, seed=4) as svc:
        config = AsyncEnrichConfig(capacity=8, retry=policy)
        result = enrich_batch(make_records(keys), user_lookup(svc.base_url), config)
        stats = fetch_stats(svc.base_url)
    assert stats["garbage_responses"] > 0
    assert len(result.outcomes) == len(keys)
    ok = [o for o in result.outcomes if o.ok]
    assert ok and all(o.response == user_profile(o.record["key"], seed=4) for o in ok)
    dead = result.dead_letters
    assert dead, "with half the answers garbage, some key gets it three times in a row"
    for outcome in dead:
        assert outcome.error_type == "services.enrichment_client.MalformedResponseError"
        assert "not a JSON object" in outcome.error_message and outcome.attempts == 3
    assert stats["requests"] == sum(o.attempts for o in result.outcomes)


def test_a_service_that_is_down_dead_letters_every_record_and_the_batch_ends() -> None:
    """Connection refused is transient: each record is tried as configured, then dead
    lettered with the connection error; the batch finishes instead of hanging or failing."""
    with running_service() as svc:
        url = svc.base_url  # a port that was just listening, now closed
    keys = user_keys(6)
    policy = RetryPolicy.fixed(2, 1, retry_on=TRANSIENT_ERRORS)
    result = enrich_batch(make_records(keys), user_lookup(url),
                          AsyncEnrichConfig(capacity=3, timeout_ms=2_000, retry=policy))
    assert [o.record["key"] for o in result.dead_letters] == keys
    assert all(o.attempts == 2 and "Connect" in o.error_type for o in result.dead_letters)
    assert (result.metrics.calls, result.metrics.errors, result.metrics.dead_letters) == (12, 12, 6)

"""The retry policy is a pure function of the attempt number and the failure."""

from __future__ import annotations

import pytest

from operators.retry import RetryPolicy


def test_fixed_delay_is_constant() -> None:
    policy = RetryPolicy.fixed(4, 250)
    assert [policy.delay_before_retry_ms(n) for n in (1, 2, 3)] == [250, 250, 250]


def test_exponential_backoff_grows_by_multiplier_and_is_capped() -> None:
    policy = RetryPolicy.exponential(6, 100, multiplier=3.0, max_delay_ms=1_000)
    assert [policy.delay_before_retry_ms(n) for n in (1, 2, 3, 4, 5)] == [
        100,
        300,
        900,
        1_000,
        1_000,
    ]


def test_retry_on_exception_types_and_result_predicate() -> None:
    policy = RetryPolicy(retry_on=(TimeoutError,), retry_on_result=lambda r: r == "later")
    assert policy.retries_exception(TimeoutError())
    assert not policy.retries_exception(KeyError("x"))
    assert policy.retries_result("later")
    assert not policy.retries_result({"ok": 1})
    assert not RetryPolicy().retries_result("later")


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"backoff": "linear"}, {"delay_ms": -1}, {"multiplier": 0.5}],
)
def test_invalid_policies_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)

"""Retry policies for async enrichment: when to try a call again, and how long to wait first.

Kept apart from the operator so the decision "retry or give up" is a pure function of the
attempt number and the failure: it can be unit-tested without an event loop and documented once.
The shapes follow Flink's ``AsyncRetryStrategies`` (fixed delay, exponential backoff with a cap,
retry on exceptions and/or on a result predicate). There is deliberately no random jitter: the
same failures give the same waits, which keeps test timings predictable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Backoff",
    "RetryPolicy",
]


Backoff = Literal["fixed", "exponential"]


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a record gets and how long to wait between them.

    ``max_attempts`` counts every call, the first included (1 means "never retry").
    ``delay_ms`` is the fixed delay, or the first delay of an exponential backoff, which then
    grows by ``multiplier`` per retry and never exceeds ``max_delay_ms``.
    A failed attempt is retried when its exception is an instance of one of ``retry_on``
    (timeouts raise ``TimeoutError``), or when it returned a result for which
    ``retry_on_result`` is true (e.g. a "try later" payload).
    """

    max_attempts: int = 3
    backoff: Backoff = "fixed"
    delay_ms: int = 100
    multiplier: float = 2.0
    max_delay_ms: int = 10_000
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    retry_on_result: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff not in ("fixed", "exponential"):
            raise ValueError(f"backoff must be 'fixed' or 'exponential', got {self.backoff!r}")
        if self.delay_ms < 0 or self.max_delay_ms < 0:
            raise ValueError("delays must be >= 0 ms")
        if self.multiplier < 1.0:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")

    @classmethod
    def no_retry(cls) -> RetryPolicy:
        """One attempt only: the first failure is final."""
        return cls(max_attempts=1, delay_ms=0)

    @classmethod
    def fixed(
        cls,
        max_attempts: int,
        delay_ms: int,
        *,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        retry_on_result: Callable[[Any], bool] | None = None,
    ) -> RetryPolicy:
        """Wait the same ``delay_ms`` before every retry (Flink's ``FixedDelayRetryStrategy``)."""
        return cls(
            max_attempts=max_attempts,
            backoff="fixed",
            delay_ms=delay_ms,
            retry_on=retry_on,
            retry_on_result=retry_on_result,
        )

    @classmethod
    def exponential(
        cls,
        max_attempts: int,
        initial_delay_ms: int,
        *,
        multiplier: float = 2.0,
        max_delay_ms: int = 10_000,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        retry_on_result: Callable[[Any], bool] | None = None,
    ) -> RetryPolicy:
        """Wait ``initial * multiplier**(n-1)`` capped at ``max_delay_ms`` before retry ``n``."""
        return cls(
            max_attempts=max_attempts,
            backoff="exponential",
            delay_ms=initial_delay_ms,
            multiplier=multiplier,
            max_delay_ms=max_delay_ms,
            retry_on=retry_on,
            retry_on_result=retry_on_result,
        )

    def delay_before_retry_ms(self, failed_attempts: int) -> float:
        """The wait after ``failed_attempts`` failures (1 after the first call failed)."""
        if failed_attempts < 1:
            raise ValueError("failed_attempts starts at 1")
        if self.backoff == "fixed":
            return float(self.delay_ms)
        return float(
            min(self.delay_ms * self.multiplier ** (failed_attempts - 1), self.max_delay_ms)
        )

    def retries_exception(self, error: BaseException) -> bool:
        """Whether this failure is worth another attempt (attempts left are checked elsewhere)."""
        return isinstance(error, self.retry_on)

    def retries_result(self, result: Any) -> bool:
        """Whether a successful call's result still asks for another attempt."""
        return self.retry_on_result is not None and bool(self.retry_on_result(result))

"""Where ``bench_live.py --find-max`` offers its next rate, and what it calls an engine's
ceiling: the highest offered rate the engine kept up with.

Doubling the rate from the first one finds a rate an engine keeps up with and one where it
falls behind, a factor of two apart. On 2 cores both engines kept up at 640,000 events/s and
fell behind at 1,280,000, so doubling alone cannot say whether the platform keeps up
wherever plain Spark does. The search then halves that gap ``refine`` times, each time at
the middle rate, as a bisection does. What an engine processed while behind is kept beside
it (``most_processed``): it says how fast a backlog drains, and it varies far more between
runs than the rate an engine keeps up with (plain Spark's, from 464,000 to 1.05 million
events/s at 1,280,000 offered, as its micro-batches grow to millions of records).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CeilingSearch:
    """One engine's search. ``record`` each run's outcome at the rate ``next_rate`` gave."""

    start: int
    refine: int = 2
    step: int = 10_000
    """Rates are multiples of this (a bisection's middle is rounded to it)."""
    limit: int = 2_000_000
    """No rate above this is offered: the producer itself cannot land much more on 2 cores."""
    kept: int | None = None
    """The highest offered rate the engine kept up with."""
    behind: int | None = None
    """The lowest offered rate the engine fell behind at."""
    most_processed: float = 0.0
    refined: int = 0

    def next_rate(self) -> int | None:
        """The rate to offer next, or None when the search is done."""
        if self.behind is None:
            rate = self.start if self.kept is None else self.kept * 2
            return rate if rate <= self.limit else None
        if self.refined >= self.refine:
            return None
        low = self.kept or 0
        middle = round((low + self.behind) / 2 / self.step) * self.step
        return middle if low < middle < self.behind else None

    def record(self, rate: int, kept_up: bool, processed: float) -> None:
        """A run at ``rate``: whether the engine kept up (over its attempts) and the most
        it processed in any of them. Every rate offered lies above ``kept`` and below
        ``behind``, so it replaces one of them."""
        if self.behind is not None:
            self.refined += 1
        self.most_processed = max(self.most_processed, processed)
        if kept_up:
            self.kept = rate
        else:
            self.behind = rate

    @property
    def ceiling(self) -> int:
        """The highest rate kept up with (0 if none): the ceiling ``--find-max`` prints."""
        return self.kept or 0

    def bounds(self) -> str:
        """Where the ceiling lies, for the printed line."""
        if self.behind is None:
            return f"kept up at every rate to {self.ceiling:,} (a floor)"
        return f"kept up at {self.ceiling:,}, behind at {self.behind:,}"

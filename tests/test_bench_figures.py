"""The live benchmark's figures from its samples: what RESULTS.md quotes must be right when an
engine falls far behind, as when it keeps up."""

from __future__ import annotations

import pytest

from benchmarks.live_common import Run

LANDED = [(float(t), 80_000 * t) for t in range(61)]
"""80,000 records/s landed for a minute."""


def test_an_engine_behind_with_few_long_batches_shows_its_backlog_growing():
    """Commits of 450,000 records ten seconds apart (45,000 records/s): the backlog grows by
    about 35,000 records/s."""
    run = Run("behind")
    run.steady(LANDED, [(10.0 * k, 450_000 * k) for k in range(7)], 0.0, 60.0)
    assert run.backlog_growth == pytest.approx(35_000, rel=0.15)
    assert not run.kept_up(80_000)


def test_one_commit_in_the_measured_period_still_shows_the_growth():
    """An engine so far behind that one commit falls in the measured period (the last 70 % of
    it): the backlog is sampled every second, not only at commits (it printed +0 once)."""
    run = Run("far behind")
    run.steady(LANDED, [(0.0, 0), (40.0, 1_800_000)], 0.0, 60.0)
    assert run.backlog_growth > 10_000  # a fit over one step: rough, but not +0
    assert not run.kept_up(80_000)


def test_an_engine_that_keeps_up_shows_no_growth():
    run = Run("up")
    run.steady(LANDED, [(t + 0.5, 80_000 * int(t)) for t, _ in LANDED], 0.0, 60.0)
    assert abs(run.backlog_growth) < 1_000
    assert run.steady_rate == pytest.approx(80_000, rel=0.05)
    assert run.kept_up(80_000)


def test_an_engine_whose_backlog_shrinks_kept_up_whatever_the_producer_landed():
    """The producer landed 74,000 records/s, not the 80,000 offered, and the engine took all
    of it, committing every two seconds: it kept up."""
    landed = [(float(t), 74_000 * t) for t in range(61)]
    run = Run("up, slow producer")
    run.steady(landed, [(2.0 * k + 0.5, 148_000 * k) for k in range(31)], 0.0, 60.0)
    assert run.steady_rate < 0.95 * 80_000
    assert run.kept_up(80_000)

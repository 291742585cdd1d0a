"""``bench_live.py --find-max``'s search: the ceiling it prints is a rate the engine kept up
with, the rate above it one where it fell behind, and the refinement narrows the gap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.ceiling_search import CeilingSearch


def search_against(true_ceiling: int, start: int, refine: int) -> tuple[CeilingSearch, list]:
    """The search run against an engine that keeps up exactly up to ``true_ceiling``."""
    search, offered = CeilingSearch(start, refine), []
    while (rate := search.next_rate()) is not None:
        offered.append(rate)
        search.record(rate, rate <= true_ceiling, min(rate, true_ceiling))
        assert len(offered) < 50, offered
    return search, offered


@given(true_ceiling=st.integers(0, 2_500_000), start=st.integers(1, 40).map(lambda k: k * 10_000),
       refine=st.integers(0, 4))
def test_the_ceiling_is_kept_up_with_and_the_gap_above_it_narrows(true_ceiling, start, refine):
    search, offered = search_against(true_ceiling, start, refine)
    assert search.ceiling <= true_ceiling
    assert search.ceiling in (0, *offered)
    if search.behind is None:  # kept up at every rate the limit allowed
        assert search.ceiling * 2 > search.limit
        return
    assert search.behind > true_ceiling and search.behind in offered
    first_behind = next(r for r in offered if r > true_ceiling)
    kept_before = max((r for r in offered[:offered.index(first_behind)] if r <= true_ceiling),
                      default=0)
    assert search.behind - search.ceiling <= (first_behind - kept_before) / 2 ** refine + 10_000
    assert search.most_processed == max(min(r, true_ceiling) for r in offered)


def test_both_engines_kept_up_at_640000_and_fell_behind_at_1280000():
    """The case that made doubling alone unable to tell the engines apart (2026-11-30): two
    halvings offer 960,000 and then 800,000 or 1,120,000."""
    search, offered = search_against(900_000, 320_000, 2)
    assert offered == [320_000, 640_000, 1_280_000, 960_000, 800_000]
    assert search.ceiling == 800_000 and search.behind == 960_000
    assert search.bounds() == "kept up at 800,000, behind at 960,000"


def test_without_refinement_it_is_the_doubling_alone():
    search, offered = search_against(900_000, 320_000, 0)
    assert offered == [320_000, 640_000, 1_280_000]
    assert search.ceiling == 640_000


def test_an_engine_behind_at_the_first_rate_is_searched_below_it():
    search, offered = search_against(100_000, 320_000, 2)
    assert offered == [320_000, 160_000, 80_000]
    assert search.ceiling == 80_000 and search.behind == 160_000


def test_an_engine_never_behind_is_reported_as_a_floor():
    search, offered = search_against(10_000_000, 500_000, 2)
    assert offered == [500_000, 1_000_000, 2_000_000]
    assert search.bounds() == "kept up at every rate to 2,000,000 (a floor)"


def test_the_search_stops_when_the_gap_is_one_step():
    search, offered = search_against(10_000, 10_000, 4)
    assert offered == [10_000, 20_000]
    assert search.bounds() == "kept up at 10,000, behind at 20,000"

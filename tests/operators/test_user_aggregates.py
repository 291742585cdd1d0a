"""User aggregate functions named in a pipeline (``fn: module:Class``): refused with the
setting named when unusable; computed exactly like the built-ins they can be checked against,
snapshot and restore included (the live runtime keeps accumulators as JSON)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.aggregates import Max, Min, NamedAggregates
from operators.pipeline import PipelineConfigError, parse_pipeline
from operators.window_operator import WindowDriver, WindowOperator
from tests.depth import examples
from tests.operators.test_window_properties import KEYS, assigners, lateness_values, streams
from tests.user_aggregates import Spread

BASE = {"watermark": {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s"},
        "window": {"type": "tumbling", "size": "1m"}}


def _spec(fn: str, **extra):
    return parse_pipeline({**BASE, "aggregates": [{"name": "spread", "fn": fn, **extra}]})


def test_a_user_aggregate_runs_per_key_never_vectorised():
    spec = _spec("tests.user_aggregates:Spread", field="value")
    assert spec.aggregates[0].is_user_defined and not spec.is_standard_window


@pytest.mark.parametrize(("fn", "says"), [
    ("no_such_package.stats:Spread", "cannot import"),
    ("tests.user_aggregates:Missing", "has no 'Missing'"),
    ("tests.user_aggregates:NoResultType", "result_type must be one of"),
    ("json:dumps", "lacks the aggregate method"),
])
def test_an_unusable_user_aggregate_is_named(fn, says):
    with pytest.raises(PipelineConfigError, match=r"aggregates\[0\]\.fn: .*" + says):
        _spec(fn)


@settings(max_examples=examples(75), deadline=None)
@given(streams(), assigners, lateness_values, st.integers(0, 40))
def test_spread_equals_max_minus_min_across_a_json_snapshot(records, assigner, lateness, cut):
    """The user function beside the built-ins it can be checked against, in one operator;
    every key snapshotted to JSON and restored at ``cut``, as the live runtime does."""
    def make() -> WindowOperator:
        return WindowOperator(assigner, aggregate=NamedAggregates(
            [("spread", Spread("v")), ("low", Min("v")), ("high", Max("v"))]),
            allowed_lateness=lateness)

    driver = WindowDriver(make())
    for seq, (key, t, v, watermark) in enumerate(records):
        if seq == cut:
            snaps = {k: json.loads(json.dumps(driver.snapshot_key(k, evict=True), default=str))
                     for k in KEYS}
            driver = WindowDriver(make())
            for k, snap in snaps.items():
                if snap is not None:
                    driver.restore_key(k, snap)
        driver.process(key, t, {"v": v}, arrival_seq=seq, watermark=watermark, ingest_time=seq)
    panes, _ = driver.take_output()
    for pane in panes:
        values = pane.values
        assert values["spread"] == float(values["high"]) - float(values["low"])

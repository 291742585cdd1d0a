"""A user's process function as a pipeline, without Spark: the description's checks, the
per-key runner's rows however a runtime slices a key's history (snapshots and firings between
the slices, as the live engine does), against small obviously correct references of the two
examples, and the errors a user meets. The Spark runtimes (backfill == live == replay) are in
tests/test_process_spark.py."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.pipeline import PipelineConfigError, parse_pipeline
from operators.process_pipeline import ProcessFunctionError, ProcessRunner, Record, run_keys
from operators.time import MIN_WATERMARK
from tests.depth import examples

REPO = Path(__file__).resolve().parents[1]
DAY_MS = 86_400_000
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _spec(name: str):
    import yaml

    return parse_pipeline(yaml.safe_load((REPO / "pipelines" / f"{name}.yaml").read_text()))


def _process(**changes) -> dict:
    base = {"source": "events", "process": "examples.process.spend_spike:SpendSpike",
            "output": {"user": "string", "at_ms": "long"}, "day_column": "at_ms"}
    return {k: v for k, v in {**base, **changes}.items() if v is not None}


@pytest.mark.parametrize(("description", "message"), [
    (_process(window={"type": "tumbling", "size": "1m"}),
     "process: a pipeline is windows and aggregates or a process function, not both"),
    (_process(output=None), "output is required for a process pipeline"),
    (_process(day_column="user"), "day_column 'user' must be a long column of output"),
    (_process(day_column=None), "day_column is required for a process pipeline"),
    (_process(process="operators.process_function:ValueState"),
     "process: operators.process_function:ValueState is not a KeyedProcessFunction subclass"),
    (_process(process="no_such_module:X"), "process: cannot import 'no_such_module'"),
    (_process(output={"user": "text", "at_ms": "long"}),
     "output.user: type must be one of long, double, string, boolean; got 'text'"),
    (_process(output={"key": "string", "at_ms": "long"}),
     "output: column 'key' is the platform's"),
    (_process(aggregates=[{"name": "n", "fn": "count"}]),
     "aggregates belongs to a windowed pipeline"),
    (_process(effective_from="2026-01-02"),
     "effective_from belongs to a windowed pipeline: a process function numbers its rows"),
    ({"source": "events", "window": {"type": "tumbling", "size": "1m"},
      "output": {"a": "long"}}, "output belongs to a process pipeline"),
])
def test_a_process_description_is_checked_naming_the_setting(description, message):
    with pytest.raises(PipelineConfigError) as error:
        parse_pipeline(description)
    assert message in str(error.value)


# -- the examples against references -------------------------------------------------------------

@st.composite
def logs(draw) -> list[tuple[str, Record]]:
    """An arrival log of a few keys over three days: event times out of order, some far
    behind, the watermark recorded with each record (max event time before it - 5 s)."""
    count = draw(st.integers(1, 60))
    keys = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=count, max_size=count))
    times = draw(st.lists(st.integers(0, 3 * DAY_MS), min_size=count, max_size=count))
    values = draw(st.lists(st.sampled_from([0.5, 1.5, 30.0, 70.0, 100.25]), min_size=count,
                           max_size=count))
    jumps = draw(st.lists(st.integers(0, 8 * 3_600_000), min_size=count, max_size=count))
    log, seen, now = [], MIN_WATERMARK, START
    for seq, (key, offset, value, jump) in enumerate(zip(keys, times, values, jumps,
                                                         strict=True)):
        now += jump
        event = min(START + offset, now)
        watermark = MIN_WATERMARK if seen == MIN_WATERMARK else seen - 5_000 - 1
        log.append((key, Record(seq, event, watermark, now, {"key": key, "value": value})))
        seen = max(seen, event)
    return log


def _histories(log):
    histories: dict[str, list[Record]] = {}
    for key, record in log:
        histories.setdefault(key, []).append(record)
    return histories


def _sliced(spec, histories, last_watermark, cuts: list[int]) -> list:
    """As the live engine runs a key: its history in slices, the key snapshotted (through
    JSON, as the state store keeps it) and restored between slices, and fired in between at
    the watermark the slice reached."""
    runner = ProcessRunner(spec, "sliced")
    emitted = []
    for key in sorted(histories):
        history, snapshot, start = histories[key], None, 0
        for cut in [*sorted({min(c, len(history)) for c in cuts}), len(history)]:
            part = history[start:cut]
            start = max(start, cut)
            runner.restore(key, snapshot)
            emitted += runner.process(key, part)
            if part:
                emitted += runner.fire(key, part[-1].watermark_ms)
            snapshot = json.loads(json.dumps(runner.snapshot(key)))
        runner.restore(key, snapshot)
        emitted += runner.fire(key, last_watermark)
        runner.snapshot(key)
    return sorted((e.key, e.emission, json.dumps(e.row, sort_keys=True)) for e in emitted)


def _rows(emitted) -> list:
    return sorted((e.key, e.emission, json.dumps(e.row, sort_keys=True)) for e in emitted)


def daily_totals_reference(log, last_watermark: int) -> dict:
    """Per (key, day): the total and count of the records that arrived before the watermark
    passed that day's last millisecond, for days the final watermark closed."""
    totals: dict[tuple[str, str], list] = {}
    for key, record in log:
        day = dt.datetime.fromtimestamp(record.event_time_ms / 1000, tz=dt.UTC).date()
        end = int(dt.datetime.combine(day + dt.timedelta(days=1), dt.time(),
                                      tzinfo=dt.UTC).timestamp() * 1000) - 1
        if end <= record.watermark_ms:
            continue  # its day was emitted before it arrived
        entry = totals.setdefault((key, day.isoformat(), end), [0.0, 0])
        entry[0] += record.fields["value"]
        entry[1] += 1
    return {(key, day): (round(total, 9), count)
            for (key, day, end), (total, count) in totals.items() if end <= last_watermark}


def spend_spike_reference(log, small=2.0, large=60.0, within=1_800_000) -> list:
    """Walk each key's records in arrival order: a large amount alerts when the key's last
    small amount is at most ``within`` before it and its clearing timer has not fired (the
    watermark of no record of the key in between reached small time + within)."""
    alerts = []
    flag: dict[str, tuple[int, float]] = {}
    for key, record in log:
        held = flag.get(key)
        if held is not None and held[0] + within <= record.watermark_ms:
            held = flag.pop(key)  # its timer fired before this record
            held = None
        amount = record.fields["value"]
        if held is not None and amount > large:
            if record.event_time_ms - held[0] <= within:
                alerts.append((key, held[0], record.event_time_ms, held[1], amount))
            flag.pop(key)
        if amount < small:
            flag[key] = (record.event_time_ms, amount)
    return sorted(alerts)


@settings(max_examples=examples(60), deadline=None)
@given(log=logs(), cuts=st.lists(st.integers(0, 30), max_size=4))
def test_the_examples_give_their_references_rows_however_a_key_is_sliced(log, cuts):
    last = max(r.watermark_ms for _, r in log)
    histories = _histories(log)
    totals = _spec("daily_totals")
    whole = run_keys(totals, histories, last, "daily_totals")
    assert _rows(whole) == _sliced(totals, histories, last, cuts)
    assert {(e.row["user"], e.row["day"]): (e.row["total"], e.row["events"])
            for e in whole} == daily_totals_reference(log, last)
    spike = _spec("spend_spike")
    whole = run_keys(spike, histories, last, "spend_spike")
    assert _rows(whole) == _sliced(spike, histories, last, cuts)
    assert sorted((e.row["user"], e.row["small_at_ms"], e.row["large_at_ms"],
                   e.row["small_amount"], e.row["large_amount"]) for e in whole) == \
        spend_spike_reference(log)
    assert [e.emission for e in whole if e.key == "a"] == \
        list(range(sum(e.key == "a" for e in whole)))


def test_state_ttl_clears_a_silent_keys_state_once_the_watermark_passes_it():
    spec = parse_pipeline(_process(process="examples.process.daily_totals:DailyTotals",
                                   output={"user": "string", "day": "string",
                                           "total": "double", "events": "long",
                                           "day_end_ms": "long"},
                                   day_column="day_end_ms", state_ttl="1h"))
    runner = ProcessRunner(spec, "ttl")
    runner.restore("a", None)
    runner.process("a", [Record(0, START, MIN_WATERMARK, START, {"value": 5.0})])
    snapshot = runner.snapshot("a")
    assert ProcessRunner.deadline(snapshot, spec.state_ttl_ms) == START + 3_600_000
    runner.restore("a", snapshot)
    assert runner.fire("a", START + 3_600_000) == []
    # the state expired before midnight: the day's timer finds nothing to emit
    assert runner.fire("a", START + DAY_MS) == []


# -- what a user meets ---------------------------------------------------------------------------

class _Emits:
    """A function whose output rows are given by the test."""

    rows: list = []


def _runner_with(tmp_path, monkeypatch, body: str, output: dict) -> ProcessRunner:
    (tmp_path / "user_fn.py").write_text(
        "from operators.process_function import KeyedProcessFunction\n"
        "class Fn(KeyedProcessFunction):\n"
        "    def process_element(self, element, ctx, out):\n"
        f"        {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    sys.modules.pop("user_fn", None)
    importlib.invalidate_caches()
    spec = parse_pipeline(_process(process="user_fn:Fn", output=output,
                                   day_column=next(iter(k for k, v in output.items()
                                                        if v == "long"))))
    runner = ProcessRunner(spec, "mine")
    runner.restore("k", None)
    return runner


@pytest.mark.parametrize(("body", "message"), [
    ("out.append({'at_ms': 1})", "column 'user' is missing"),
    ("out.append({'user': 'x', 'at_ms': 'soon'})", "column 'at_ms' must be long, got str"),
    ("out.append({'user': 'x', 'at_ms': 1, 'extra': 2})", "column 'extra' is not in output"),
    ("out.append({'user': 'x', 'at_ms': None})", "column 'at_ms' (day_column"),
    ("out.append(['x', 1])", "is a list, not a mapping of the output columns"),
])
def test_rows_that_do_not_fit_are_refused_naming_them(
        tmp_path, monkeypatch, body, message):
    runner = _runner_with(tmp_path, monkeypatch, body, {"user": "string", "at_ms": "long"})
    with pytest.raises(ProcessFunctionError) as error:
        runner.process("k", [Record(7, START, MIN_WATERMARK, START, {})])
    assert message in str(error.value)
    assert "mine: key 'k' at record arrival_seq 7" in str(error.value)


def test_an_exception_in_the_users_code_names_the_key_record_and_traceback(tmp_path,
                                                                        monkeypatch):
    runner = _runner_with(tmp_path, monkeypatch, "raise KeyError('amount')",
                          {"user": "string", "at_ms": "long"})
    with pytest.raises(ProcessFunctionError) as error:
        runner.process("k", [Record(3, START, MIN_WATERMARK, START, {})])
    text = str(error.value)
    assert "the process function's process_element failed for key 'k' at record " \
           "arrival_seq 3" in text
    assert "user_fn.py" in text and "KeyError: 'amount'" in text


def test_a_late_record_reaches_the_function_which_knows_it(tmp_path, monkeypatch):
    runner = _runner_with(tmp_path, monkeypatch,
                          "out.append({'late': ctx.is_late, 'at_ms': ctx.arrival_seq})",
                          {"late": "boolean", "at_ms": "long"})
    emitted = runner.process("k", [Record(0, START, MIN_WATERMARK, START, {}),
                                   Record(1, START - 1, START, START, {})])
    assert [e.row for e in emitted] == [{"late": False, "at_ms": 0},
                                        {"late": True, "at_ms": 1}]

"""Process pipelines on Spark: the two examples (per-key daily totals, a spike alert) over a
generated arrival log with late records, computed by a backfill, by the live stream in
micro-batches of one log file (both examples in one cohort, one read of each batch), and by
the per-key runner the replay command uses: the same output and late rows, row for row. A
user's exception stops the live stream with the key and the record, nothing of that
micro-batch committed; after the fix the stream goes on from its checkpoint."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from jobs import tables
from jobs.backfill import run_backfill
from jobs.live import run_live
from jobs.process.rows import records
from jobs.process.tables import OUTPUT
from operators.process_pipeline import ProcessFunctionError, run_keys
from tests.faults.helpers import QUIET, copy_log, make_source, pipelines_of

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = {name: (REPO / "pipelines" / f"{name}.yaml").read_text()
            for name in ("daily_totals", "spend_spike")}
SPIKES = EXAMPLES["spend_spike"].replace("{small: 2, large: 60, within: 30m}",
                                         "{small: 8, large: 40, within: 30m}")
"""Thresholds that the generated values cross often."""
if "small: 8" not in SPIKES:
    raise AssertionError("the example's parameters changed: update SPIKES")
TIMEOUTS = """
source: events
process: tests.process_functions:Timeouts
parameters: {idle_ms: 600000, event_ms: 300000}
output: {domain: string, at_ms: long, count: long, fired: long}
day_column: at_ms
"""
"""Inactivity timeouts on the ingest clock beside event-time timers (their order shows)."""


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory):
    return make_source(spark, tmp_path_factory.mktemp("process") / "source")


def _table(spark, pipeline, name: str) -> pd.DataFrame:
    frame = spark.read.format("delta").load(pipeline.table_path(name)).toPandas()
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def test_backfill_live_and_replay_give_the_same_rows(spark, source, tmp_path):
    pipelines = {"daily_totals": EXAMPLES["daily_totals"], "spend_spike": SPIKES,
                 "timeouts": TIMEOUTS}
    backfilled = pipelines_of(copy_log(source, tmp_path / "backfill", pipelines))
    for pipeline in backfilled.values():
        run_backfill(spark, pipeline, **QUIET)
    live_env = copy_log(source, tmp_path / "live", pipelines)
    live = pipelines_of(live_env)
    report = run_live(spark, live["spend_spike"].stream, max_files_per_trigger=1, **QUIET)
    assert len({b["batch_id"] for b in report.batches}) >= 4  # one per log file, at least
    log = spark.read.format("delta").load(live["spend_spike"].stream.arrival_log).toPandas()
    last = int(log.watermark_ms.max())
    histories = {key: records(frame.sort_values("arrival_seq"))
                 for key, frame in log.groupby("key")}
    for name in pipelines:
        output = _table(spark, backfilled[name], OUTPUT)
        assert len(output) > 0, name
        pd.testing.assert_frame_equal(output, _table(spark, live[name], OUTPUT),
                                      check_exact=True, obj=f"{name} output")
        late = _table(spark, backfilled[name], tables.LATE_RECORDS)
        assert len(late) > 0, name
        pd.testing.assert_frame_equal(late, _table(spark, live[name], tables.LATE_RECORDS),
                                      check_exact=True, obj=f"{name} late records")
        replayed = run_keys(backfilled[name].spec, histories, last, name)
        assert sorted((e.key, e.emission) for e in replayed) == \
            sorted(zip(output.key, output.emission, strict=True))
        by_identity = {(e.key, e.emission): e.row for e in replayed}
        for row in output.to_dict("records"):
            expected = by_identity[(row["key"], row["emission"])]
            assert {k: row[k] for k in expected} == expected
    timeouts = _table(spark, live["timeouts"], OUTPUT)
    assert set(timeouts.domain) == {"event", "processing"}
    totals = _table(spark, live["daily_totals"], OUTPUT)
    assert (totals.user == totals.key).all() and (totals.events > 0).all()


def test_a_users_exception_stops_the_stream_and_the_fix_goes_on_from_there(spark, source,
                                                                         tmp_path):
    """The function raises on one record: the run fails naming the key, the record and the
    traceback, and that micro-batch writes nothing; once fixed (here the bug's switch is a
    file; the version is the same: the description declares a label, which stands for the
    code) the stream goes on from its checkpoint and ends with the backfill's rows."""
    marker = tmp_path / "bug"
    log_env = copy_log(source, tmp_path / "probe", {})
    stream = pipelines_of(log_env)["per_minute"].stream
    rows = spark.read.format("delta").load(stream.arrival_log).orderBy("arrival_seq").collect()
    target = rows[len(rows) // 2]
    description = ("source: events\nprocess: tests.process_functions:FailsWhile\n"
                   f"parameters: {{marker: '{marker}', at_seq: {target.arrival_seq}}}\n"
                   "version: '1'\noutput: {seq: long, at_ms: long}\nday_column: at_ms\n")
    env = copy_log(source, tmp_path / "home", {"mine": description})
    pipeline = pipelines_of(env)["mine"]
    marker.write_text("the bug")
    with pytest.raises(ProcessFunctionError) as failure:
        run_live(spark, pipeline.stream, max_files_per_trigger=1, **QUIET)
    text = str(failure.value)
    assert "\tat org.apache" not in text  # the user's traceback, not the JVM's
    assert f"key {target.key!r} at record arrival_seq {target.arrival_seq}" in text
    assert "ValueError: a bug in the user's code" in text
    written = _table(spark, pipeline, OUTPUT)
    assert len(written) and (written.seq < target.arrival_seq).all()  # not its micro-batch
    marker.unlink()  # the fix
    run_live(spark, pipeline.stream, max_files_per_trigger=1, **QUIET)
    clean = pipelines_of(copy_log(source, tmp_path / "clean", {"mine": description}))["mine"]
    run_backfill(spark, clean, **QUIET)
    pd.testing.assert_frame_equal(_table(spark, clean, OUTPUT), _table(spark, pipeline, OUTPUT),
                                  check_exact=True)

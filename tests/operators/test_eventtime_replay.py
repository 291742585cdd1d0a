"""The replay command: example files, recorded watermarks, and clear errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from operators.replay_cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MINUTE = 60_000
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def replay(tmp_path: Path, pipeline: Path, events: Path) -> tuple[int, list, list]:
    panes, late = tmp_path / "panes.jsonl", tmp_path / "late.jsonl"
    code = main(["--pipeline", str(pipeline), "--events", str(events), "--panes", str(panes),
                 "--late", str(late), "--quiet"])
    if code:
        return code, [], []
    return code, read_jsonl(panes), read_jsonl(late)


def test_example_files(tmp_path: Path) -> None:
    code, panes, late = replay(tmp_path, EXAMPLES / "pipeline.yaml", EXAMPLES / "events.jsonl")
    assert code == 0
    latest = {}
    for pane in panes:
        latest[(pane["key"], pane["window_start"])] = pane
    # Worked out in docs/replay.md: the first minute of sensor-a gets 10s(1), 50s(2) and the
    # late-within-lateness 55s(5); 30s(6) arrives after the watermark passed 1:29.999 (end of
    # the window + 30 s allowed lateness) and is late.
    a = latest[("sensor-a", T0)]
    assert (a["values"], a["is_last"], a["window_end"]) == ({"events": 3, "value_sum": 8},
                                                            True, T0 + MINUTE)
    b = latest[("sensor-b", T0)]
    assert (b["values"], b["is_last"]) == ({"events": 2, "value_sum": 30}, True)
    assert set(latest) == {("sensor-a", T0), ("sensor-b", T0)}  # the 2nd minute is still open
    assert [p["pane_index"] for p in panes if p["key"] == "sensor-a"] == [0, 1, 2]
    assert [p["timing"] for p in panes if p["key"] == "sensor-a"] == ["ON_TIME", "LATE", "LATE"]
    assert late == [{"key": "sensor-a", "event_time": T0 + 30_000, "arrival_seq": 8,
                     "watermark_ms": T0 + 105_000 - 5_000 - 1, "window_start": T0,
                     "window_end": T0 + MINUTE}]


def test_a_platform_pipeline_replays_with_its_streams_watermark(tmp_path: Path, capsys) -> None:
    """The project's per-minute pipeline reads the stream ``events`` and has no watermark of
    its own: with ``--stream`` the stream's strategy computes the watermarks, and the panes
    are the example's (the same window, lateness and aggregates, the same strategy but for
    the stream's idle timeout, which no partition of this log reaches)."""
    pipeline, stream = ROOT / "pipelines" / "per_minute.yaml", ROOT / "streams" / "events.yaml"
    events = EXAMPLES / "events.jsonl"
    out = tmp_path / "platform.jsonl"
    assert main(["--pipeline", str(pipeline), "--stream", str(stream), "--events", str(events),
                 "--panes", str(out), "--quiet"]) == 0
    _, example, _ = replay(tmp_path, EXAMPLES / "pipeline.yaml", events)
    assert read_jsonl(out) == example and example
    # without the stream the records carry no watermark and the pipeline has no strategy
    assert main(["--pipeline", str(pipeline), "--events", str(events), "--quiet"]) == 1
    assert "or --stream with the description of stream 'events'" in capsys.readouterr().err


def test_recorded_watermarks_replay_exactly(tmp_path: Path) -> None:
    """Exporting the computed watermarks into the log and replaying gives the same output;
    and recorded watermarks win over the strategy."""
    code, panes, late = replay(tmp_path, EXAMPLES / "pipeline.yaml", EXAMPLES / "events.jsonl")
    from operators.pipeline import load_pipeline
    from operators.replay import read_arrival_log, watermarks_for

    spec = load_pipeline(EXAMPLES / "pipeline.yaml")
    records = read_arrival_log(EXAMPLES / "events.jsonl", spec)
    marks = watermarks_for(records, spec)
    lines = []
    for record, mark in zip(records, marks, strict=True):
        lines.append(json.dumps({**record.payload, "watermark_ms": mark}))
    exported = tmp_path / "exported.jsonl"
    exported.write_text("\n".join(lines) + "\n")
    code2, panes2, late2 = replay(tmp_path, EXAMPLES / "pipeline.yaml", exported)
    assert (code2, panes2, late2) == (code, panes, late)

    # a log whose recorded watermark never moves fires nothing
    frozen = tmp_path / "frozen.jsonl"
    frozen.write_text("\n".join(json.dumps({**r.payload, "watermark_ms": None})
                                for r in records) + "\n")
    code3, panes3, late3 = replay(tmp_path, EXAMPLES / "pipeline.yaml", frozen)
    assert (code3, panes3, late3) == (0, [], [])


def test_small_log_with_ms_times_and_defaults(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.json"
    pipeline.write_text(json.dumps({
        "watermark": {"strategy": "monotonous"},
        "window": {"type": "tumbling", "size": 10},
        "aggregates": [{"name": "n", "fn": "count"}, {"name": "hi", "fn": "max", "field": "x"}],
    }))
    events = tmp_path / "e.jsonl"
    events.write_text("\n".join([
        '{"key": "k", "event_time": 1, "x": 5}',
        "",
        '{"key": "k", "event_time": 4, "x": 2.5}',
        '{"key": "k", "event_time": 10, "x": null}',   # watermark 3: nothing fires
        '{"key": "k", "event_time": 3, "x": 1}',       # watermark 9: [0,10) fires, then late
    ]) + "\n")
    code, panes, late = replay(tmp_path, pipeline, events)
    assert code == 0
    assert panes == [{"key": "k", "window_start": 0, "window_end": 10, "pane_index": 0,
                      "timing": "ON_TIME", "is_last": True, "values": {"n": 2, "hi": 5},
                      "fired_by": {"watermark": 9}}]
    assert '"hi":5.000000000' in (tmp_path / "panes.jsonl").read_text()  # as the table shows
    # arrival_seq defaults to the 0-based line number (the blank line counts)
    assert late == [{"key": "k", "event_time": 3, "arrival_seq": 4, "watermark_ms": 9,
                     "window_start": 0, "window_end": 10}]


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"event_time": 5}', "missing required field 'key'"),
    ('{"key": 7, "event_time": 5}', "'key' must be a string"),
    ('{"key": "k"}', "missing required field 'event_time'"),
    ('{"key": "k", "event_time": "yesterday"}', "bad 'event_time'"),
    ('{"key": "k", "event_time": 5, "value": "a lot"}', "field 'value' must be a number"),
    ('{"key": "k", "event_time": 5, "ingest_time": true}', "bad 'ingest_time'"),
    ('{"key": "k", "event_time": 5, "arrival_seq": 0}', "'arrival_seq' 0 is not greater"),
    ('{"key": "k", "event_time": 5, "watermark_ms": "x"}', "bad 'watermark_ms'"),
    ('{"key": "k", "event_time": 5, "watermark_ms": [1]}', "'watermark_ms' must be an integer"),
    ('{"key": "k", "event_time": 10.7}', "bad 'event_time': 10.7 is not a whole number"),
    ('{"key": "k", "event_time": 5, "ingest_time": 3.5}', "bad 'ingest_time': 3.5 is not"),
    ('{"watermark": 1.5}', "bad 'watermark': 1.5 is not a whole number"),
    ('{"watermark": 100, "key": "k"}', "a watermark line has only 'watermark'"),
])
def test_bad_input_line_gives_file_and_line(tmp_path: Path, capsys, line: str,
                                            message: str) -> None:
    events = tmp_path / "bad.jsonl"
    events.write_text('{"key": "k", "event_time": 1, "value": 1}\n\n' + line + "\n")
    code, _, _ = replay(tmp_path, EXAMPLES / "pipeline.yaml", events)
    err = capsys.readouterr().err
    assert code == 1
    assert f"{events}:3:" in err and message in err
    assert "Traceback" not in err


def test_bad_pipeline_and_missing_file(tmp_path: Path, capsys) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("window: {type: tumbling}\nwatermark: {strategy: monotonous}\n")
    code, _, _ = replay(tmp_path, pipeline, EXAMPLES / "events.jsonl")
    assert code == 1 and "window.size is required" in capsys.readouterr().err
    pipeline.write_text("window: {type: session, gap: 5}\nwatermark: {strategy: monotonous}\n"
                        "trigger: {type: delta, threshold: 1, field: value}\n")
    code, _, _ = replay(tmp_path, pipeline, EXAMPLES / "events.jsonl")
    err = capsys.readouterr().err
    assert code == 1 and "cannot be used with merging" in err and "Traceback" not in err
    code, _, _ = replay(tmp_path, EXAMPLES / "pipeline.yaml", tmp_path / "nope.jsonl")
    assert code == 1 and "cannot read events file" in capsys.readouterr().err


def test_runs_as_a_module(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "operators.replay_cli", "--pipeline",
         str(EXAMPLES / "pipeline.yaml"), "--events", str(EXAMPLES / "events.jsonl"),
         "--panes", str(tmp_path / "p.jsonl")],
        capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    assert "9 records, 6 panes, 1 late records" in result.stderr
    assert len(read_jsonl(tmp_path / "p.jsonl")) == 6


def test_dynamic_session_gap_from_a_field(tmp_path: Path, capsys) -> None:
    pipeline = tmp_path / "s.yaml"
    pipeline.write_text("watermark: {strategy: monotonous}\n"
                        "window: {type: session, gap_field: gap_ms}\n"
                        "aggregates: [{name: n, fn: count}]\n")
    events = tmp_path / "e.jsonl"
    events.write_text('{"key": "k", "event_time": 0, "gap_ms": 10,'
                      ' "ingest_time": "1970-01-01T00:00:00.005Z"}\n'
                      '{"key": "k", "event_time": 8, "gap_ms": 1}\n'
                      '{"key": "k", "event_time": 40, "gap_ms": 1}\n')
    code, panes, late = replay(tmp_path, pipeline, events)
    # [0,10) and [8,9) merge; watermark before the third record is 8 - 1 = 7 (< 9): nothing
    # fires yet; the window is [0,10) with two events, still open
    assert (code, panes, late) == (0, [], [])
    events.write_text(events.read_text() + '{"key": "k", "event_time": 41, "gap_ms": 1}\n')
    code, panes, _ = replay(tmp_path, pipeline, events)
    assert [(p["window_start"], p["window_end"], p["values"]) for p in panes] == [
        (0, 10, {"n": 2})]
    # the same log with the first record on another source partition: that partition's
    # watermark (-1) holds the combined one, so nothing fires
    lines = events.read_text().splitlines()
    lines[0] = lines[0].replace('"key"', '"partition": "p1", "key"')
    events.write_text("\n".join(lines) + "\n")
    assert replay(tmp_path, pipeline, events) == (0, [], [])
    events.write_text('{"key": "k", "event_time": 0}\n')
    code, _, _ = replay(tmp_path, pipeline, events)
    assert code == 1 and "session gap field 'gap_ms'" in capsys.readouterr().err


def test_issue_16_a_window_first_fired_by_a_late_record_is_late(tmp_path: Path) -> None:
    """Tumbling 5 s, allowed lateness 3 s, no out-of-orderness: k@6000 then k@1000. The second
    record opens [0, 5000) after the watermark (5999) passed its end, within lateness: its pane
    is LATE, not ON_TIME (Beam's testPaneInfoSkipToNonSpeculativeAndFinish)."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("watermark: {strategy: bounded_out_of_orderness, "
                        "max_out_of_orderness: 0}\n"
                        "window: {type: tumbling, size: 5s}\nallowed_lateness: 3s\n"
                        "aggregates: [{name: n, fn: count}, {name: s, fn: sum, field: value}]\n")
    events = tmp_path / "e.jsonl"
    events.write_text('{"key": "k", "event_time": 6000, "value": 1}\n'
                      '{"key": "k", "event_time": 1000, "value": 2}\n')
    code, panes, late = replay(tmp_path, pipeline, events)
    assert code == 0 and late == []
    assert [(p["window_start"], p["pane_index"], p["timing"], p["is_last"], p["values"])
            for p in panes] == [(0, 0, "LATE", False, {"n": 1, "s": 2})]


TUMBLING_10 = ("window: {type: tumbling, size: 10}\nallowed_lateness: 5\n"
               "aggregates: [{name: n, fn: count}, {name: s, fn: sum, field: value}]\n")


def write(tmp_path: Path, pipeline: str, *lines: str) -> tuple[Path, Path]:
    (tmp_path / "p.yaml").write_text(pipeline)
    (tmp_path / "e.jsonl").write_text("".join(line + "\n" for line in lines))
    return tmp_path / "p.yaml", tmp_path / "e.jsonl"


def replay_args(tmp_path: Path, *extra: str) -> tuple[int, list, list]:
    panes, late = tmp_path / "panes.jsonl", tmp_path / "late.jsonl"
    code = main(["--pipeline", str(tmp_path / "p.yaml"), "--events", str(tmp_path / "e.jsonl"),
                 "--panes", str(panes), "--late", str(late), *extra])
    return code, read_jsonl(panes) if code == 0 else [], read_jsonl(late) if code == 0 else []


def brief(panes: list) -> list[tuple]:
    return [(p["window_start"], p["pane_index"], p["timing"], p["is_last"], p["values"]["n"],
             p["fired_by"]) for p in panes]


def test_watermark_lines_fire_due_timers_between_records(tmp_path: Path, capsys) -> None:
    """Flink's processWatermark / a Beam test's watermark step, with no watermark section:
    every record carries its watermark, watermark lines move it in between."""
    write(tmp_path, TUMBLING_10,
          '{"key": "k", "event_time": 1, "value": 1, "watermark_ms": null}',
          '{"watermark": 9}',                                           # [0,10) fires on time
          '{"key": "k", "event_time": 2, "value": 2, "watermark_ms": 9}',  # late, within 5
          '{"watermark": "1970-01-01T00:00:00.014Z"}')                   # cleanup: closing pane
    code, panes, late = replay_args(tmp_path)
    assert code == 0 and late == []
    assert brief(panes) == [(0, 0, "ON_TIME", False, 1, {"watermark": 9}),
                            (0, 1, "LATE", False, 2, {"arrival_seq": 2}),
                            (0, 2, "LATE", True, 2, {"watermark": 14})]
    assert "2 records, 2 watermark lines, 3 panes" in capsys.readouterr().err


def test_without_a_watermark_section_every_record_needs_watermark_ms(tmp_path: Path,
                                                                     capsys) -> None:
    write(tmp_path, TUMBLING_10, '{"key": "k", "event_time": 1, "value": 1, "watermark_ms": 0}',
          '{"key": "k", "event_time": 2, "value": 1}')
    code, _, _ = replay_args(tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and f"{tmp_path / 'e.jsonl'}:2: no 'watermark_ms'" in err


def test_final_watermark_fires_what_the_end_of_input_makes_due(tmp_path: Path, capsys) -> None:
    write(tmp_path, "watermark: {strategy: monotonous}\n" + TUMBLING_10,
          '{"key": "k", "event_time": 1, "value": 1}',
          '{"key": "k", "event_time": 12, "value": 1}')
    code, panes, _ = replay_args(tmp_path)
    err = capsys.readouterr().err
    assert (code, panes) == (0, [])  # the watermark ends at 0: nothing fired
    assert "2 window(s) of 1 key(s) are still open" in err and "--final-watermark" in err
    code, panes, _ = replay_args(tmp_path, "--final-watermark", "9")
    assert brief(panes) == [(0, 0, "ON_TIME", False, 1, {"watermark": 9})]
    assert "still open" not in capsys.readouterr().err
    code, panes, _ = replay_args(tmp_path, "--final-watermark", "max")
    assert brief(panes) == [(0, 0, "ON_TIME", False, 1, {"watermark": 9}),
                            (0, 1, "LATE", True, 1, {"watermark": 14}),
                            (10, 0, "ON_TIME", False, 1, {"watermark": 19}),
                            (10, 1, "LATE", True, 1, {"watermark": 24})]
    with pytest.raises(SystemExit) as exit_info:
        replay_args(tmp_path, "--final-watermark", "soon")
    assert exit_info.value.code == 2


def test_iso_watermarks_late_rows_per_record_and_exact_decimals(tmp_path: Path) -> None:
    write(tmp_path, "window: {type: sliding, size: 10, slide: 5}\n"
          "aggregates: [{name: n, fn: count}, {name: s, fn: sum, field: value}]\n",
          '{"key": "k", "event_time": 6, "value": 0.1, "watermark_ms": null}',
          '{"key": "k", "event_time": 7, "value": 0.2, "watermark_ms": "1970-01-01T00:00:00Z"}',
          '{"key": "k", "event_time": 8, "value": 1, "watermark_ms": 20}')
    code, panes, late = replay_args(tmp_path, "--late-by", "record")
    assert code == 0
    text = (tmp_path / "panes.jsonl").read_text()
    assert '"s":0.300000000' in text  # exact: 0.1 + 0.2, not 0.30000000000000004
    assert [(p["window_start"], p["values"]["n"]) for p in panes] == [(0, 2), (5, 2)]
    assert late == [{"key": "k", "event_time": 8, "arrival_seq": 2, "watermark_ms": 20,
                     "missed_windows": [[5, 15], [0, 10]]}]


def test_panes_go_to_standard_output_without_panes_file(tmp_path: Path, capsys) -> None:
    write(tmp_path, TUMBLING_10, '{"key": "k", "event_time": 1, "value": 1, '
          '"watermark_ms": null}', '{"watermark": 9}')
    assert main(["--pipeline", str(tmp_path / "p.yaml"), "--events", str(tmp_path / "e.jsonl"),
                 "--quiet", "--final-watermark", "max"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["fired_by"] for line in out] == [{"watermark": 9},
                                                             {"watermark": 14}]

"""Every transcript under tests/operators/transcripts/ (operators.transcript runs them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from operators.transcript import load_transcript, run_transcript

TRANSCRIPTS = Path(__file__).parent / "transcripts"
FILES = sorted(TRANSCRIPTS.rglob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(TRANSCRIPTS)) for p in FILES])
def test_transcript(path: Path) -> None:
    divergence = run_transcript(load_transcript(path))
    assert divergence is None, f"{path.relative_to(TRANSCRIPTS)}: {divergence}"


def _cli(path: Path, capsys) -> tuple[int, str]:
    from operators.replay_cli import main

    code = main(["--transcript", str(path)])
    return code, capsys.readouterr().err


BASE = """name: small
pipeline:
  window: {type: tumbling, size: 10}
steps:
  - input: [1, 2]
  - watermark: 9
"""


@pytest.mark.parametrize(("expect", "message"), [
    ("  - expect: {panes: [{window: [0, 10], timing: ON_TIME, values: {n: 2, s: 3}}]}\n", None),
    ("  - expect: {panes: [{window: [0, 10], timing: LATE}]}\n",
     'step 3 (line 7): pane 0 differs\n  expected: {"window": [0, 10], "timing": "LATE"}\n'
     '  got:      {"key": "k", "window": [0, 10], "index": 0, "timing": "ON_TIME"'),
    ("  - expect: {panes: []}\n", "step 3 (line 7): unexpected pane 0: "),
    ("  - expect: {panes: [{values: {n: 2, s: 3}}, {values: {n: 2}}]}\n",
     'expected pane 1 {"values": {"n": 2}}, but no more panes came out (got 1)'),
    ("  - expect: {panes: [{values: {n: 2, s: 3}}], late: [{t: 1, window: [0, 10]}]}\n",
     "expected late row 0"),
    ("", "after the last step: unexpected pane 0"),
])
def test_replay_runs_a_transcript_and_prints_the_first_divergence(tmp_path: Path, capsys,
                                                                  expect: str,
                                                                  message: str | None) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(BASE + expect)
    code, err = _cli(path, capsys)
    if message is None:
        assert code == 0 and "ok (small, 3 steps)" in err
    else:
        assert code == 1 and "diverges at" in err and message in err, err


@pytest.mark.parametrize(("text", "message"), [
    ("name: x\npipeline: {window: {type: tumbling, size: 10}}\nsteps:\n  - jump: 5\n",
     "step 1: unknown step 'jump'"),
    ("name: x\npipeline: {window: {type: tumbling}}\nsteps: []\n",
     "pipeline: window.size is required for a tumbling window"),
    ("name: x\npipeline: {watermark: {strategy: monotonous}, window: {type: global}}\n"
     "steps: []\n", "pipeline.watermark: a transcript moves the watermark with its steps"),
    ("name: x\nsteps: [\n", "not valid YAML"),
    ("name: x\npipeline: {window: {type: global}}\nsteps:\n  - input: [{value: 1}]\n",
     "an input is an event time or a mapping with t"),
])
def test_malformed_transcripts_say_where(tmp_path: Path, capsys, text: str, message: str
                                         ) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    code, err = _cli(path, capsys)
    assert code == 1 and message in err and "Traceback" not in err, err

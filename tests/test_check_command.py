"""``python -m jobs check``: the platform's own check of pipeline descriptions, the one every
entry point runs, for files a user is writing. The library's standalone check
(``python -m operators.pipeline``) checks the format only, and says so (#72: it said "ok" for
files the platform refuses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.__main__ import main
from operators.pipeline import main as format_check

REPO = Path(__file__).resolve().parents[1]
REFUSED = {
    "unknown_source": ("source: nosuch\nwindow: {type: tumbling, size: 1m}\n"
                       "aggregates: [{name: n, fn: count}]\n", "no stream 'nosuch'"),
    "own_watermark": ("source: events\nwindow: {type: tumbling, size: 1m}\n"
                      "watermark: {strategy: monotonous}\naggregates: [{name: n, fn: count}]\n",
                      "belongs to the stream"),
    "global_window": ("source: events\nwindow: {type: global}\ntrigger: {type: count, count: 3}"
                      "\naggregates: [{name: n, fn: count}]\n", "window.type 'global'"),
    "processing_time": ("source: events\nwindow: {type: tumbling, size: 1m}\n"
                        "trigger: {type: processing_time}\naggregates: [{name: n, fn: count}]\n",
                        "processing-time triggers"),
}


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PLATFORM_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_file_the_platform_refuses_is_refused_by_the_check_and_named(name, home, capsys):
    text, said = REFUSED[name]
    file = home / f"{name}.yaml"
    file.write_text(text, encoding="utf-8")
    assert main(["check", str(file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"configuration error: {file}: ") and said in err[0]
    assert format_check([str(file)]) == 0  # the format is fine: only the platform refuses it
    assert "python -m jobs check" in capsys.readouterr().err


def test_the_projects_pipelines_pass_both_checks_one_line_each(home, capsys):
    files = sorted(str(f) for f in (REPO / "pipelines").glob("*.yaml"))
    assert main(["check", *files]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"{file}: ok (reads stream events)" for file in files]
    assert main(["check"]) == 0  # no files: the configured folders, as every command reads them
    assert len(capsys.readouterr().out.strip().splitlines()) == len(files)
    assert format_check(files) == 0


def test_one_bad_file_among_good_ones_fails_the_check_and_names_only_it(home, capsys):
    bad = home / "bad.yaml"
    bad.write_text(REFUSED["unknown_source"][0], encoding="utf-8")
    good = str(REPO / "pipelines" / "per_minute.yaml")
    assert main(["check", good, str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out.strip() == f"{good}: ok (reads stream events)"
    assert str(bad) in captured.err and good not in captured.err

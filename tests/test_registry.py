"""The pipelines and streams folders as the platform reads them (jobs.config.registry): a file is a
pipeline, named after the file; each pipeline's tables live in a folder of its own, each
stream's in its; a version changes with what the rows depend on and nothing else. The refusals
a user meets are driven through the command line in tests/faults/test_misuse.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.config.errors import SettingsError
from jobs.config.registry import platform_of, version_of
from tests.platform_home import PER_MINUTE, SESSIONS, settings_for, write_pipelines


def test_every_file_is_a_pipeline_named_after_it_with_tables_of_its_own(tmp_path: Path):
    settings = settings_for(tmp_path / "home", {"counts": PER_MINUTE, "sessions": SESSIONS})
    platform = platform_of(settings)
    assert list(platform.pipelines) == ["counts", "sessions"]
    assert list(platform.streams) == ["events"]
    warehouse = Path(settings.warehouse)
    counts, sessions = platform.pipelines["counts"], platform.pipelines["sessions"]
    assert counts.stream is sessions.stream is platform.streams["events"]  # ingested once
    assert counts.table_path("window_results") == str(
        warehouse / "pipelines" / "counts" / "versions" / counts.version / "window_results")
    assert counts.table_path("arrival_log") == sessions.table_path("arrival_log") == str(
        warehouse / "streams" / "events" / "arrival_log")
    assert counts.tables() == ["window_results", "late_records", "late_data_metrics",
                               "late_data_metrics_batches"]
    assert "window_assignments" in sessions.tables()  # the operator library's per key
    assert platform.by_stream(platform.pipelines.values()) == {
        platform.streams["events"]: [counts, sessions]}
    with pytest.raises(ValueError, match="not a pipeline's table"):
        counts.table_path("../sessions/window_results")


def test_a_version_follows_what_the_rows_depend_on(tmp_path: Path):
    def version(text: str) -> str:
        home = tmp_path / f"home-{len(list(tmp_path.iterdir()))}"
        return platform_of(settings_for(home, {"p": text})).pipelines["p"].version

    base = version(PER_MINUTE)
    assert version(PER_MINUTE) == base
    assert version(PER_MINUTE.replace("allowed_lateness: 30s", "allowed_lateness: 31s")) != base
    assert version(PER_MINUTE.replace("Events and value per user and minute",
                                      "Per user, per minute")) == base  # words only
    assert version_of(platform_of(settings_for(tmp_path / "x", {"p": PER_MINUTE}))
                      .pipelines["p"].spec) == base


def test_a_new_file_is_a_new_pipeline_and_nothing_else_changes(tmp_path: Path):
    folder = write_pipelines(tmp_path / "pipelines", {"counts": PER_MINUTE})
    env = {"PLATFORM_HOME": str(tmp_path / "home"), "PLATFORM_PIPELINES": str(folder)}
    from jobs.config.settings import PlatformSettings

    before = platform_of(PlatformSettings.from_env(env))
    (folder / "sessions.yaml").write_text(SESSIONS, encoding="utf-8")
    after = platform_of(PlatformSettings.from_env(env))
    assert list(after.pipelines) == ["counts", "sessions"]
    assert after.pipelines["counts"].version == before.pipelines["counts"].version
    with pytest.raises(SettingsError, match=r"--pipeline nope: no such pipeline .* there are: "
                                            "counts, sessions"):
        after.select_pipelines(["nope"])
    assert [p.name for p in after.select_pipelines(["sessions", "sessions"])] == ["sessions"]

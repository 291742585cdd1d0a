"""``dg``, Dagster's project command line, works on this project as a user runs it: the
definitions check, the listing (every asset, check, job, schedule and sensor of
``workspace.yaml``'s code location) and ``dg dev`` serving them in the webserver."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.cli

REPO = Path(__file__).resolve().parents[2]
DG = Path(sys.executable).with_name("dg")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLATFORM_", "DAGSTER_"))}
    env.update(PLATFORM_HOME=str(tmp_path / "home"), DAGSTER_HOME=str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    (tmp_path / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return env


def test_dg_checks_and_lists_the_definitions(tmp_path):
    env = _env(tmp_path)
    check = subprocess.run([str(DG), "check", "defs"], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]
    assert "All definitions loaded successfully" in check.stdout + check.stderr
    listed = subprocess.run([str(DG), "list", "defs", "--json"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-3000:]
    defs = json.loads(listed.stdout)
    assets = {a["asset_key"] for a in defs["assets"]}
    assert {"events/landing_files", "events/arrival_log", "events/quarantine"} <= assets
    for pipeline in ("per_minute", "sessions", "sliding_5m"):  # every file of the folder
        assert {f"{pipeline}/window_results", f"{pipeline}/late_records",
                f"{pipeline}/late_data_metrics"} <= assets
    groups = {a["group_name"] for a in defs["assets"]}
    assert {"events", "per_minute", "sessions", "sliding_5m"} <= groups
    checks = {c["key"] for c in defs["asset_checks"]}
    assert any("per_minute/late_data_metrics" in key and "rate" in key for key in checks), \
        checks
    assert "landing_sensor" in {s["name"] for s in defs["sensors"]}
    assert defs["schedules"] and defs["jobs"]
    components = subprocess.run([str(DG), "list", "components", "--json"], cwd=REPO, env=env,
                                capture_output=True, text=True, timeout=300)
    assert components.returncode == 0, components.stderr[-3000:]
    assert "platform_defs.components.EventTimePipelines" in components.stdout


def test_dg_scaffold_defs_creates_a_pipeline_file_checked_like_every_pipeline(tmp_path):
    """``dg scaffold defs ... EventTimePipeline <name>`` writes the pipelines folder's new
    file (in PLATFORM_PIPELINES), which the next load lists as a group of its own; a name or
    option the registry refuses writes nothing."""
    env = _env(tmp_path)
    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "per_minute.yaml").write_text((REPO / "pipelines" / "per_minute.yaml")
                                            .read_text())
    env["PLATFORM_PIPELINES"] = str(folder)
    scaffold = [str(DG), "scaffold", "defs", "platform_defs.components.EventTimePipeline"]
    made = subprocess.run([*scaffold, "per_hour", "--window", "tumbling", "--size", "1h",
                           "--allowed-lateness", "5m"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    created = folder / "per_hour.yaml"
    assert "source: events" in created.read_text() and "size: 1h" in created.read_text()
    assert not (REPO / "platform_defs" / "defs" / "per_hour").exists()  # no defs.yaml folder
    refused = subprocess.run([*scaffold, "per_day", "--window", "sliding", "--size", "1d",
                              "--slide", "2d"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=300)
    assert refused.returncode != 0
    assert "window.slide" in refused.stdout + refused.stderr
    assert not (folder / "per_day.yaml").exists()
    assert not (REPO / "platform_defs" / "defs" / "per_day").exists()
    guessed = subprocess.run([*scaffold, "per_visit", "--window", "session", "--size", "1h"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert guessed.returncode != 0  # a session has a gap, not a size: refused, not dropped
    assert "--size: a session window has no size" in guessed.stdout + guessed.stderr
    assert not (folder / "per_visit.yaml").exists()
    listed = subprocess.run([str(DG), "list", "defs", "--json"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "per_hour/window_results" in {a["asset_key"] for a in json.loads(listed.stdout)[
        "assets"]}


def test_dg_dev_serves_the_project(tmp_path):
    env = _env(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "dg-dev.log").open("w")
    process = subprocess.Popen([str(DG), "dev", "--port", str(port)], cwd=REPO, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        query = json.dumps({"query": "{ assetNodes { assetKey { path } } }"}).encode()
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (tmp_path / "dg-dev.log").read_text()[-3000:]
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/graphql", data=query,
                    headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=10) as answer:
                    nodes = json.load(answer)["data"]["assetNodes"]
                if nodes:
                    break
            except (OSError, KeyError, TypeError):
                pass
            assert time.monotonic() < deadline, (tmp_path / "dg-dev.log").read_text()[-3000:]
            time.sleep(1)
        assert ["per_minute", "late_data_metrics"] in [node["assetKey"]["path"] for node in nodes]
    finally:
        os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C: dg dev stops its code servers
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()

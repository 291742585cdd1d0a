"""End to end in a real browser: the Dagster UI over the project's workspace materialises the
late-data metrics and shows their per-day metadata and checks.

Chromium is Debian's (``apt-get install chromium``, which CI does); Playwright drives it
through its Python API and never downloads a browser. Without Chromium the test skips, except
under ``.ci/run`` (``PLATFORM_REQUIRE_BROWSER=1``), where it fails.
"""

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

from jobs.generator import GeneratorConfig, generate
from tests.dagster.conftest import Home, materialize_assets

pytestmark = [pytest.mark.browser, pytest.mark.spark]

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
DAY = "2026-01-01"
INSTANCE_YAML = """\
telemetry:
  enabled: false
# launch runs at once: the webserver alone has no daemon to dequeue them
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(url: str, timeout_s: float, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the webserver exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


@pytest.fixture
def webserver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark):
    """Landing files ingested (in process, into the UI's instance), then the webserver."""
    from dagster import DagsterInstance

    home_path = tmp_path / "platform"
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text(INSTANCE_YAML)
    for name in ("PLATFORM_WAREHOUSE", "PLATFORM_LANDING", "PLATFORM_PIPELINE",
                 "PLATFORM_INGEST_CLOCK", "PLATFORM_TIME_ZONE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLATFORM_HOME", str(home_path))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    generate(GeneratorConfig(events=2000, keys=20, producers=2), home_path / "landing")
    instance = DagsterInstance.get()
    assert materialize_assets(Home(home_path, instance), ["arrival_log", "quarantine"]).success

    port = _free_port()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "DAGSTER_DISABLE_TELEMETRY": "1"}
    command = [str(Path(sys.executable).with_name("dagster-webserver")), "-w",
               str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)]
    log = (tmp_path / "webserver.log").open("w")
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        _wait_for(f"http://127.0.0.1:{port}/server_info", 120, process)
        _mark_community_popup_seen(f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the webserver and its code server
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def _mark_community_popup_seen(base_url: str) -> None:
    """The UI's one-time "join the community" dialog would cover the page on loopback."""
    request = urllib.request.Request(
        f"{base_url}/graphql", data=json.dumps({"query": "mutation { setNuxSeen }"}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


@pytest.fixture
def chromium() -> Path:
    """Checked before the webserver fixture starts Spark and Dagster, so a local skip is quick."""
    if not CHROMIUM.exists():
        if os.environ.get("PLATFORM_REQUIRE_BROWSER"):  # set by .ci/run: CI must run this test
            pytest.fail("Chromium is not installed (apt-get install -y chromium)")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    return CHROMIUM


def test_materialise_from_the_asset_graph_and_read_metrics_and_checks(chromium, webserver,
                                                                      tmp_path):
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(chromium),
            args=CHROMIUM_ARGS, headless=True, viewport={"width": 1600, "height": 1000})
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)

            # the asset graph, filtered to the late-data metrics
            page.goto(f"{webserver}/asset-groups")
            page.locator(".CodeMirror").first.wait_for()
            page.locator(".CodeMirror").first.click()
            page.keyboard.type('key:"late_data_metrics"')
            page.keyboard.press("Enter")
            page.get_by_text("late_data_metrics", exact=True).first.wait_for()

            # materialise one day (the multi-asset brings its siblings along)
            page.locator("button", has_text="Materialize").first.click()
            page.get_by_role("button", name="Confirm").click()  # "additional assets" notice
            page.get_by_text("Show all partitions").click()
            partitions = page.get_by_role("dialog").locator("input").first
            partitions.fill(DAY)
            partitions.press("Enter")
            page.get_by_role("button", name="Launch 1 run").click()

            # wait for the run to succeed, as the asset page reports it
            page.get_by_role("dialog").wait_for(state="detached")
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                page.goto(f"{webserver}/assets/late_data_metrics?partition={DAY}")
                page.get_by_text("Latest materialization").first.wait_for()
                if page.get_by_text("range_summary").count():  # materialisation metadata only
                    break
                page.wait_for_timeout(3_000)
            else:
                raise AssertionError("no materialisation of the day within 180 s")
            body = page.inner_text("body")
            for name in ("dropped_late", "late_within_lateness", "quarantined", "late_rate",
                         "lateness_p99_ms", "watermark_lag_p50_ms"):
                assert name in body, f"{name} not shown in the asset's metadata"

            # the run the button launched succeeded (the UI's own storage says so)
            from dagster import DagsterInstance, DagsterRunStatus

            # (the materialisation shows before the run has run its checks and ended)
            instance = DagsterInstance.get()
            deadline = time.monotonic() + 120
            while True:
                runs = instance.get_runs()
                launched = [r for r in runs if r.tags.get("dagster/partition") == DAY]
                if launched and launched[0].is_finished or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert launched and launched[0].status == DagsterRunStatus.SUCCESS, \
                [(r.run_id, r.status) for r in runs]

            page.goto(f"{webserver}/assets/late_data_metrics?view=checks")
            for check in ("late_rate", "quarantine_rate", "watermark_lag"):
                page.get_by_text(check, exact=True).first.wait_for()
            checks = page.inner_text("body")
            assert "Passed" in checks or "Succeeded" in checks or "Warning" in checks
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            print(f"screenshot: {tmp_path / 'failure.png'}")
            raise
        finally:
            browser.close()

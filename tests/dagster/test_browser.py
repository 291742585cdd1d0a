"""End to end in a real browser: the Dagster UI over the project's workspace materialises the
late-data metrics and shows what an operator looks at: the per-partition plot of the dropped
rate with points, each day's own check verdict, and the sample of a day's late records.
Screenshots of these views go to ``.platform/screenshots/`` (git-ignored; the README names it).

Chromium is Debian's (``apt-get install chromium``, which CI does); Playwright drives it
through its Python API and never downloads a browser. Without Chromium the test skips, except
under ``.ci/run`` (``PLATFORM_REQUIRE_BROWSER=1``), where it fails.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from jobs.generator import GeneratorConfig, generate
from platform_defs.demo import recent_start
from platform_defs.instance import ensure_instance_config
from tests.dagster.conftest import PIPELINE, STREAM, Home, key, materialize_assets, windowed

pytestmark = [pytest.mark.browser, pytest.mark.spark]

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SCREENSHOTS = REPO / ".platform" / "screenshots"
START = recent_start("UTC", 2)
"""Two whole days before today: the UI plots the most recent partitions."""
FIRST_DAY, DAY = (START[:10], str(date.fromisoformat(START[:10]) + timedelta(days=1)))
RUN_COORDINATOR = """\
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
    """Landing files for the last two days ingested and the first day's windowed tables
    computed (in process, into the UI's instance), then the webserver over the instance the
    demo writes (no telemetry, no community dialog)."""
    from dagster import DagsterInstance

    home_path = tmp_path / "platform"
    dagster_home = tmp_path / "dagster_home"
    config = ensure_instance_config(dagster_home)
    config.write_text(config.read_text() + RUN_COORDINATOR)
    for name in ("PLATFORM_WAREHOUSE", "PLATFORM_LANDING", "PLATFORM_PIPELINES",
                 "PLATFORM_STREAMS", "PLATFORM_INGEST_CLOCK", "PLATFORM_TIME_ZONE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLATFORM_HOME", str(home_path))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    generate(GeneratorConfig(events=2000, keys=20, producers=2,
                             start_ms=int(datetime.fromisoformat(START).timestamp() * 1000)),
             home_path / "landing" / STREAM)
    home = Home(home_path, DagsterInstance.get())
    assert materialize_assets(home, [key(STREAM, "arrival_log"),
                                     key(STREAM, "quarantine")]).success
    assert materialize_assets(home, windowed(), partition=FIRST_DAY).success

    port = _free_port()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    command = [str(Path(sys.executable).with_name("dagster-webserver")), "-w",
               str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)]
    log = (tmp_path / "webserver.log").open("w")
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        _wait_for(f"http://127.0.0.1:{port}/server_info", 120, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the webserver and its code server
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


@pytest.fixture
def chromium() -> Path:
    """Checked before the webserver fixture starts Spark and Dagster, so a local skip is quick."""
    if not CHROMIUM.exists():
        if os.environ.get("PLATFORM_REQUIRE_BROWSER"):  # set by .ci/run: CI must run this test
            pytest.fail("Chromium is not installed (apt-get install -y chromium)")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    return CHROMIUM


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_materialise_from_the_ui_then_read_plots_verdicts_and_late_records(chromium,
                                                                             webserver,
                                                                             tmp_path):
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(chromium),
            args=CHROMIUM_ARGS, headless=True, viewport={"width": 1600, "height": 1000})
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)

            # the catalog: the stream and every pipeline of the folder, a group each
            page.goto(f"{webserver}/assets")
            for group in ("events", "per_minute", "sessions", "sliding_5m"):
                page.get_by_text(group, exact=True).first.wait_for()
            _shot(page, "0-streams-and-pipelines")

            # the asset graph, filtered to one pipeline's late-data metrics; the instance the
            # demo writes shows no "join the community" dialog over it
            page.goto(f"{webserver}/asset-groups")
            page.locator(".CodeMirror").first.wait_for()
            assert page.get_by_role("dialog").count() == 0
            page.locator(".CodeMirror").first.click()
            page.keyboard.type(f'key:"{PIPELINE}/late_data_metrics"')
            page.keyboard.press("Enter")
            page.get_by_text("late_data_metrics", exact=True).first.wait_for()

            # materialise the second day (the multi-asset brings its siblings along)
            page.locator("button", has_text="Materialize").first.click()
            page.get_by_role("button", name="Confirm").click()  # "additional assets" notice
            page.get_by_text("Show all partitions").click()
            partitions = page.get_by_role("dialog").locator("input").first
            partitions.fill(DAY)
            partitions.press("Enter")
            page.get_by_role("button", name="Launch 1 run").click()
            page.get_by_role("dialog").wait_for(state="detached")

            # the run the button launched succeeded (the UI's own storage says so)
            from dagster import DagsterInstance, DagsterRunStatus

            instance = DagsterInstance.get()
            deadline = time.monotonic() + 300
            while True:
                runs = instance.get_runs()
                launched = [r for r in runs if r.tags.get("dagster/partition") == DAY]
                if launched and launched[0].is_finished or time.monotonic() > deadline:
                    break
                time.sleep(2)
            assert launched and launched[0].status == DagsterRunStatus.SUCCESS, \
                [(r.run_id, r.status) for r in runs]

            # the day's metadata: numbers, durations in human units, the late-records sample
            page.goto(f"{webserver}/assets/{PIPELINE}/late_data_metrics?view=partitions"
                      f"&partition={DAY}")
            page.get_by_text("late_records_sample", exact=True).first.wait_for()
            body = page.inner_text("body")
            for name in ("dropped_late_rate", "late_within_lateness_rate", "lateness_p99_ms",
                         "lateness_p99", "watermark_lag_max_ms", "lateness_histogram",
                         "finality"):
                assert name in body, f"{name} not shown in the day's metadata"
            assert not re.search(r"(?<![\w])late_rate", body)  # named for what it counts
            _shot(page, "1-day-metadata")
            row = page.locator("tr", has_text="late_records_sample").first
            row.get_by_text("[Show Markdown]").click()
            dialog = page.get_by_role("dialog")
            dialog.locator("table").first.wait_for()
            sample = dialog.inner_text()
            assert "user-" in sample and "window" in sample and (
                "dropped" in sample or "late within lateness" in sample)
            _shot(page, "2-late-records-sample")
            page.keyboard.press("Escape")

            # the per-partition plot of the dropped rate has a point for each day
            page.goto(f"{webserver}/assets/{PIPELINE}/late_data_metrics")
            page.get_by_role("button", name="Plots").first.click()
            heading = page.get_by_text("dropped_late_rate", exact=True).first
            heading.wait_for()
            assert page.get_by_text("Asset plots are automatically generated").count() == 0
            page.get_by_text("When graphing values by partition").first.wait_for()
            plots = page.locator("canvas")
            assert plots.count() >= 10  # one per numeric metadata entry
            heading.scroll_into_view_if_needed()
            _shot(page, "3-partition-plots")

            # each day its own verdict: the partitioned check lists both days as passed
            page.goto(f"{webserver}/assets/{PIPELINE}/late_data_metrics?view=checks"
                      "&checkDetail=dropped_late_rate")
            page.get_by_role("tab", name="Execution history").wait_for()  # the check's tabs
            page.get_by_role("tab", name="Partitions").last.click()  # the check's own
            page.get_by_text(re.compile(r"Passed \(2\)")).first.wait_for()  # both days
            page.get_by_text(DAY, exact=True).filter(visible=True).first.click()
            page.get_by_text("within the warn threshold").first.wait_for()
            detail = page.inner_text("body")
            assert "Target materialization" in detail and "warn_threshold" in detail
            _shot(page, "4-check-verdict-per-day")
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            print(f"screenshot: {tmp_path / 'failure.png'}")
            raise
        finally:
            browser.close()

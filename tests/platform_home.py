"""Platform homes for tests: a folder of pipelines of the test's choosing, and the one stream.

Every test home reads the project's ``streams/`` folder (one stream, ``events``, the demo's
watermark strategy) unless it says otherwise; its pipelines are the files a test writes with
:func:`settings_for` (or the project's ``pipelines/`` folder when it gives none).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from jobs import tables
from jobs.config.registry import Pipeline, platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream

REPO = Path(__file__).resolve().parents[1]
PER_MINUTE = (REPO / "pipelines" / "per_minute.yaml").read_text(encoding="utf-8")
"""The demo's per-minute pipeline: tumbling windows, the vectorised runtimes."""
SESSIONS = """
source: events
window: {type: session, gap: 4m}
allowed_lateness: 1m
aggregates:
  - {name: events, fn: count}
  - {name: value_sum, fn: sum, field: value}
  - {name: value_max, fn: max, field: value}
"""
"""Session windows with allowed lateness: the operator library per key in both runtimes."""


def write_pipelines(folder: Path, pipelines: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pipelines.items():
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
    return folder


def platform_env(home: Path, pipelines: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a home at ``home`` with these pipelines (name -> description; None:
    the project's pipelines folder), their folder beside the home."""
    env = {"PLATFORM_HOME": str(home)}
    if pipelines is not None:
        folder = write_pipelines(home.parent / f"{home.name}-pipelines", pipelines)
        env["PLATFORM_PIPELINES"] = str(folder)
    return env


def settings_for(home: Path, pipelines: dict[str, str] | None = None) -> PlatformSettings:
    """The settings of a platform home with its descriptions read and checked, as every
    entry point reads them before it starts (a wrong description raises here)."""
    settings = PlatformSettings.from_env(platform_env(home, pipelines))
    platform_of(settings)
    return settings


def only_pipeline(settings: PlatformSettings) -> Pipeline:
    (pipeline,) = platform_of(settings).pipelines.values()
    return pipeline


def events(settings: PlatformSettings) -> Stream:
    return platform_of(settings).streams["events"]


def copy_of_log(source: PlatformSettings, home: Path,
                pipelines: dict[str, str]) -> PlatformSettings:
    """A fresh platform home with these pipelines, holding the very same arrival log and
    quarantine as ``source``'s (what "the same log, computed another way" tests start from)."""
    settings = settings_for(home, pipelines)
    for name in (tables.ARRIVAL_LOG, tables.QUARANTINE):
        shutil.copytree(events(source).table_path(name), events(settings).table_path(name))
    return settings

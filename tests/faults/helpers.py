"""Shared pieces of the fault tests: a generated arrival log, copies of it, table snapshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from jobs import tables
from jobs.config.registry import Pipeline, platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.streams.landing.ingestor import ingest
from tests.platform_home import PER_MINUTE, events, platform_env, settings_for

KILLS = int(os.environ.get("FAULT_KILLS", "2"))
QUIET = {"progress": lambda _: None}
SESSIONS = """
source: events
window: {type: session, gap: 4m}
allowed_lateness: 1m
aggregates: [{name: events, fn: count}, {name: value_sum, fn: sum, field: value}]
"""
ONE = {"per_minute": PER_MINUTE}


def make_source(spark, home: Path) -> PlatformSettings:
    """Four ingest batches over two days, late, very late and bad records included."""
    settings = settings_for(home, ONE)
    for index in range(4):
        generate(GeneratorConfig(events=400, duration_ms=6 * 3_600_000, keys=12, producers=2,
                                 seed=200 + index, very_late_fraction=0.02,
                                 start_ms=1_767_225_600_000 + 12 * 3_600_000
                                 + index * 3 * 3_600_000), events(settings).landing)
        ingest(spark, events(settings), **QUIET)
    return settings


def copy_log(source: PlatformSettings, home: Path,
             pipelines: dict[str, str] | None = None) -> dict:
    """A new platform home holding the same arrival log and quarantine, with these pipelines
    (default: the per-minute one); its environment."""
    env = platform_env(home, pipelines or ONE)
    settings = PlatformSettings.from_env(env)
    for name in (tables.ARRIVAL_LOG, tables.QUARANTINE):
        shutil.copytree(events(source).table_path(name), events(settings).table_path(name))
    # the ingest log too: a later ingest into the copy goes on from the copied batches
    shutil.copytree(Path(events(source).folder) / "_ingest",
                    Path(events(settings).folder) / "_ingest")
    events(settings).landing_dir.mkdir(parents=True, exist_ok=True)  # `jobs live` needs it
    return env


def pipelines_of(env: dict) -> dict[str, Pipeline]:
    return platform_of(PlatformSettings.from_env(env)).pipelines

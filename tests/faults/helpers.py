"""Shared pieces of the fault tests: a generated arrival log, copies of it, table snapshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from jobs import tables
from jobs.generator import GeneratorConfig, generate
from jobs.ingest import ingest
from jobs.settings import PlatformSettings

KILLS = int(os.environ.get("FAULT_KILLS", "2"))
QUIET = {"progress": lambda _: None}
SESSIONS = """
watermark: {strategy: bounded_out_of_orderness, max_out_of_orderness: 5s, idle_timeout: 1m}
window: {type: session, gap: 4m}
allowed_lateness: 1m
aggregates: [{name: events, fn: count}, {name: value_sum, fn: sum, field: value}]
"""


def make_source(spark, home: Path) -> PlatformSettings:
    """Four ingest batches over two days, late, very late and bad records included."""
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home)})
    for index in range(4):
        generate(GeneratorConfig(events=400, duration_ms=6 * 3_600_000, keys=12, producers=2,
                                 seed=200 + index, very_late_fraction=0.02,
                                 start_ms=1_767_225_600_000 + 12 * 3_600_000
                                 + index * 3 * 3_600_000), settings.landing)
        ingest(spark, settings, **QUIET)
    return settings


def copy_log(source: PlatformSettings, home: Path, pipeline: str | None = None) -> dict:
    """A new platform home holding the same arrival log and quarantine; its environment."""
    env = {"PLATFORM_HOME": str(home)}
    if pipeline is not None:
        path = home.parent / f"{home.name}-pipeline.yaml"
        path.write_text(pipeline, encoding="utf-8")
        env["PLATFORM_PIPELINE"] = str(path)
    settings = PlatformSettings.from_env(env)
    for name in (tables.ARRIVAL_LOG, tables.QUARANTINE):
        shutil.copytree(source.table_path(name), settings.table_path(name))
    settings.landing_dir.mkdir(parents=True, exist_ok=True)  # `jobs live` refuses a missing one
    return env

"""SIGKILL during a rollout: a changed pipeline's new version computed from the log by
``python -m jobs rollout`` and switched to, killed at random points. Readers must always see
one whole version, equal to a clean backfill of it, and the next run finishes the rollout.
(A file of its own beside tests/faults/test_kills.py, so the two workers share the kill tests.)
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from jobs.backfill import run_backfill
from jobs.lifecycle import versions
from jobs.live import run_rollout
from tests.faults.helpers import KILLS, QUIET, copy_log, pipelines_of
from tests.faults.test_kills import _kill_when, _start
from tests.output_tables import assert_same, output_tables
from tests.platform_home import PER_MINUTE

pytestmark = pytest.mark.spark
AFTER_A_BATCH = [("live events: batch ", 1), ("live events: batch ", 2), ("live events: batch ", 3)]
SWITCHED = ("readers switched", 1)


def test_a_rollout_killed_anywhere_leaves_readers_on_a_whole_version_and_finishes(
        spark, source, tmp_path):
    """A changed pipeline rolled out by ``python -m jobs rollout`` (its new version computed
    from the log in micro-batches of one file, then the switch), SIGKILLed at random points:
    after each kill readers see the old version or the new one, and the tables of the one
    they see equal a clean backfill of it; the tables of the other version are a clean
    backfill's too where they are complete. Running the command again finishes the rollout."""
    changed = PER_MINUTE.replace("allowed_lateness: 30s", "allowed_lateness: 45s")
    clean_env = copy_log(source, tmp_path / "clean-new", {"per_minute": changed})
    run_backfill(spark, pipelines_of(clean_env)["per_minute"], **QUIET)
    clean = {"new": output_tables(spark, pipelines_of(clean_env)["per_minute"])}
    env = copy_log(source, tmp_path / "rolled", {"per_minute": PER_MINUTE})
    old = pipelines_of(env)["per_minute"]
    run_backfill(spark, old, **QUIET)  # the serving version: a clean backfill of the old one
    clean["old"] = output_tables(spark, old)
    (Path(env["PLATFORM_PIPELINES"]) / "per_minute.yaml").write_text(changed)
    new = pipelines_of(env)["per_minute"]
    log = tmp_path / "rollout.log"
    rng = random.Random(int(os.environ.get("FAULT_SEED", "5")))
    kills, seen = [], []
    for _ in range(KILLS):  # then the rest in this process
        # a kill when readers switched comes after one that landed: as the first, it could
        # miss a rollout that ends right after the switch, and the test would kill nothing
        marker, count = rng.choice(AFTER_A_BATCH + ([] if not kills else [SWITCHED]))
        delay = rng.uniform(0, 1.5)
        process = _start(["rollout", "per_minute", "--no-ingest",
                          "--max-files-per-trigger", "1"], env, log)
        if _kill_when(process, log, marker, count, delay):
            kills.append((marker.strip(), count, round(delay, 1)))
        current = versions.serving(new).version
        seen.append(current)
        assert current in (old.version, new.version)
        label = "new" if current == new.version else "old"
        assert_same(clean[label], output_tables(spark, versions.serving_pipeline(new)))
        if current == new.version:
            break
    print(f"{len(kills)} kills of the rollout (after, times, seconds): {kills}; readers saw "
          f"{seen}")
    run_rollout(spark, new, **QUIET)  # what the kills left, finished (in this process)
    assert versions.serving(new).version == new.version
    assert_same(clean["new"], output_tables(spark, new))
    assert_same(clean["old"], output_tables(spark, old))
    assert kills, "at least one kill landed"

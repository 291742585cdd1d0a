"""A pipeline's versions (jobs.lifecycle.versions) and the cohorts of the live job
(jobs.live.cohorts), without Spark: what readers see through any sequence of edits,
computations, switches and retention, against a small model; and which queries a stream's live
job runs for which versions.

The runtimes' side (a rollout computed live and by the ``rollout`` command, equal to clean
backfills, with kills) is in tests/test_rollout.py and tests/faults/test_kills.py."""

from __future__ import annotations

import datetime as dt
import re
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jobs import tables
from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline, platform_of
from jobs.config.settings import PlatformSettings
from jobs.lifecycle import effective_from, versions
from jobs.live import cohorts
from jobs.store import storage
from tests.depth import examples
from tests.platform_home import PER_MINUTE, SESSIONS, platform_env

DAY_MS = 86_400_000
VARIANTS = [PER_MINUTE.replace("allowed_lateness: 30s", f"allowed_lateness: {s}s")
            for s in (30, 40, 50)]
"""Three versions of one pipeline (their allowed lateness differs)."""


def _pipeline(home: Path, text: str, name: str = "counts", **env: str) -> Pipeline:
    environment = {**platform_env(home, {name: text}), **env}
    return platform_of(PlatformSettings.from_env(environment)).pipelines[name]


def _computed(pipeline: Pipeline) -> None:
    """Stand-in for a run that wrote the version's results table (no Spark here)."""
    import pyarrow as pa

    from jobs.store import fast_writes

    fast_writes.append(pipeline.table_path(tables.WINDOW_RESULTS),
                       pa.table({"key": ["a", "b"]}))


def test_the_first_version_serves_when_a_backfill_computes_it_and_after_catching_up_live(
        tmp_path):
    backfilled = _pipeline(tmp_path / "a", PER_MINUTE)
    assert versions.serving(backfilled) is None
    assert versions.reconcile(backfilled).state == versions.SERVING
    assert versions.serving(backfilled).version == backfilled.version
    live = _pipeline(tmp_path / "b", PER_MINUTE)
    decided = versions.reconcile(live, first_serves_at_once=False)
    assert decided.state == versions.PENDING
    assert "readers see it once it has caught up" in decided.said(live)
    assert versions.serving(live) is None and versions.pending(live)
    assert versions.live_versions(live) == [live]


def test_a_changed_description_is_pending_and_the_serving_version_runs_as_recorded(tmp_path):
    first = _pipeline(tmp_path / "home", VARIANTS[0])
    versions.reconcile(first)
    _computed(first)
    changed = _pipeline(tmp_path / "home", VARIANTS[1])
    assert changed.version != first.version
    decided = versions.reconcile(changed)
    assert decided.state == versions.PENDING
    assert decided.said(changed) == (f"counts: version {changed.version} is pending (readers "
                                     f"see {first.version} until it has caught up with the "
                                     "arrival log)")
    serving = versions.serving_pipeline(changed)
    assert serving.version == first.version and serving.recorded
    assert serving.spec.allowed_lateness_ms == 30_000  # as recorded, not as the file says
    assert [p.version for p in versions.live_versions(changed)] == [first.version,
                                                                    changed.version]
    assert serving.table_path(tables.WINDOW_RESULTS) != changed.table_path(tables.WINDOW_RESULTS)


def test_restoring_a_retired_version_switches_back_at_once_while_its_tables_are_kept(
        tmp_path):
    first = _pipeline(tmp_path / "home", VARIANTS[0])
    versions.reconcile(first)
    _computed(first)
    second = _pipeline(tmp_path / "home", VARIANTS[1])
    versions.reconcile(second)
    versions.switch(second, second.version, "caught up")
    restored = _pipeline(tmp_path / "home", VARIANTS[0])
    decided = versions.reconcile(restored)
    assert (decided.state, decided.switched_from) == (versions.SERVING, second.version)
    assert "serves again" in decided.said(restored)
    assert versions.serving(restored).version == first.version
    # once retention deleted a retired version's tables, restoring it is a rollout again
    third = _pipeline(tmp_path / "home", VARIANTS[1])
    versions.switch(third, third.version, "test")  # second serves, first retired
    assert versions.prune(third, now_ms=versions.serving(third).since_ms + 8 * DAY_MS) == [
        first.version]
    assert versions.reconcile(_pipeline(tmp_path / "home", VARIANTS[0])).state == \
        versions.PENDING


def _rows(days: list[str], events: list[int], **more: list) -> pa.Table:
    columns = {"key": [f"k{i}" for i in range(len(days))],
               "window_end_date": pa.array([dt.date.fromisoformat(d) for d in days],
                                           pa.date32()),
               "events": pa.array(events, pa.int64()), **more}
    return pa.table(columns)


def _log_watermark(pipeline: Pipeline, seq: int, watermark_ms: int) -> None:
    from jobs.store import fast_writes

    fast_writes.append(pipeline.stream.arrival_log,
                       pa.table({"arrival_seq": [seq], "watermark_ms": [watermark_ms]}))


def test_effective_from_waits_until_the_replaced_days_are_final_then_carries_their_rows(
        tmp_path):
    """A version ``effective_from: 2026-01-02`` replacing one with 30 s of allowed lateness:
    it serves once the watermark reaches the end of 2026-01-01 plus 30 s, not a millisecond
    before, and its table then holds the replaced version's rows before that day (a column
    the old version did not have is null there) and its own from that day on."""
    from jobs.lifecycle import rollout
    from jobs.store import fast_writes

    home = tmp_path / "home"
    old = _pipeline(home, VARIANTS[0])
    versions.reconcile(old)
    results = tables.WINDOW_RESULTS
    fast_writes.append(old.table_path(results), _rows(["2026-01-01", "2026-01-01",
                                                       "2026-01-02"], [1, 2, 3]),
                       partition_by=["window_end_date"])
    new = _pipeline(home, VARIANTS[1] + "effective_from: 2026-01-02\n")
    assert versions.reconcile(new).state == versions.PENDING
    fast_writes.append(new.table_path(results),
                       _rows(["2026-01-01", "2026-01-02", "2026-01-02"], [10, 30, 40],
                             top=pa.array([7, 8, 9], pa.int64())),
                       partition_by=["window_end_date"])

    waiting = rollout.switch_if_pending(new, "test")
    assert isinstance(waiting, rollout.Waiting) and "no watermark yet" in waiting.reason
    final_at = 1_767_312_000_000 - 1 + 30_000  # 2026-01-02T00:00Z, minus 1 ms, plus 30 s
    _log_watermark(new, 0, final_at - 1)
    waiting = rollout.switch_if_pending(new, "test")
    assert isinstance(waiting, rollout.Waiting)
    assert (f"the switch waits until version {old.version}'s days before it are final, at "
            "watermark 2026-01-02 00:00:29Z") in waiting.said()
    assert versions.serving(new).version == old.version
    _log_watermark(new, 1, final_at)
    switched = rollout.switch_if_pending(new, "test")
    assert isinstance(switched, rollout.Switched)
    assert versions.serving(new).version == new.version
    for _ in range(2):  # carrying again (a crash before the switch's write) changes nothing
        table = fast_writes.read_columns(new.table_path(results),
                                         ["window_end_date", "events", "top"])
        assert sorted((r["window_end_date"], r["events"], r["top"])
                      for r in table.to_pylist()) == [
            (dt.date(2026, 1, 1), 1, None), (dt.date(2026, 1, 1), 2, None),
            (dt.date(2026, 1, 2), 30, 8), (dt.date(2026, 1, 2), 40, 9)]
        effective_from.carry(new, versions.version_pipeline(new, old.version))
    assert effective_from.kept_before(new) == dt.date(2026, 1, 2)
    assert effective_from.kept_before(old) is None


def test_effective_from_is_a_day_of_a_windowed_pipeline(tmp_path):
    for value, message in (("tomorrow", "effective_from must be a day as YYYY-MM-DD, got "
                                        "'tomorrow'"),
                           ("2026-01-02T10:00:00", "must be a day (YYYY-MM-DD), not a time")):
        with pytest.raises(SettingsError, match=re.escape(message)):
            _pipeline(tmp_path / value[:4], PER_MINUTE + f"effective_from: {value}\n")


def test_another_source_is_a_new_pipeline_not_a_version(tmp_path):
    first = _pipeline(tmp_path / "home", PER_MINUTE)
    versions.reconcile(first)
    streams = tmp_path / "streams"
    streams.mkdir()
    stream_text = (Path(__file__).resolve().parents[1] / "streams" / "events.yaml").read_text()
    for name in ("events", "clicks"):
        (streams / f"{name}.yaml").write_text(stream_text)
    moved = _pipeline(tmp_path / "home", PER_MINUTE.replace("source: events", "source: clicks"),
                      PLATFORM_STREAMS=str(streams))
    with pytest.raises(SettingsError, match=r"counts.yaml: source: 'clicks', but pipeline "
                                            r"counts's tables were computed from stream "
                                            r"'events' .* another source is a new pipeline"):
        versions.reconcile(moved)


def test_a_version_covers_the_user_code_it_names_unless_a_label_stands_for_it(tmp_path,
                                                                            monkeypatch):
    package = tmp_path / "code"
    package.mkdir()
    module = package / "spread_mod.py"
    module.write_text(textwrap.dedent("""
        class Spread:
            result_type = "double"
            def __init__(self, field): self.field = field
            def create_accumulator(self): return [None, None]
            def add(self, element, acc): return acc
            def merge(self, a, b): return a
            def get_result(self, acc): return 0.0
    """))
    monkeypatch.syspath_prepend(str(package))
    text = SESSIONS + "  - {name: spread, fn: 'spread_mod:Spread', field: value}\n"
    before = _pipeline(tmp_path / "a", text)
    assert set(before.code) == {"spread_mod"}
    module.write_text(module.read_text() + "\n# a fix\n")
    after = _pipeline(tmp_path / "b", text)
    assert after.version != before.version  # the code changed, the description did not
    labelled = _pipeline(tmp_path / "c", text + "version: '7'\n")
    module.write_text(module.read_text() + "\n# another\n")
    assert _pipeline(tmp_path / "d", text + "version: '7'\n").version == labelled.version
    assert labelled.code == {}
    with pytest.raises(SettingsError,
                       match=r"counts.yaml: aggregates\[3\].fn: cannot import 'no_such_mod'"):
        _pipeline(tmp_path / "e", SESSIONS + "  - {name: s, fn: 'no_such_mod:X'}\n")


# -- any sequence of steps, against a model ---------------------------------------------------

STEPS = st.lists(st.one_of(
    # the file edited to a variant (maybe the same), then computed by a backfill or the live job
    st.tuples(st.sampled_from(["backfill", "live"]), st.integers(0, len(VARIANTS) - 1)),
    st.tuples(st.just("caught_up"), st.just(0)),  # the pending version caught up: switch
    st.tuples(st.just("days_pass"), st.integers(3, 9)),  # then retention (7 days)
), min_size=3, max_size=14)
RESTORED = [("backfill", 0), ("live", 1), ("caught_up", 0), ("backfill", 0)]
"""A rollout, then the first file restored while its tables are kept."""
RETIRED_THEN_GONE = [("backfill", 0), ("live", 1), ("caught_up", 0), ("days_pass", 4),
                     ("days_pass", 4), ("live", 0)]
"""A retired version's tables deleted by retention: restoring it is a rollout again."""
SUPERSEDED = [("backfill", 0), ("live", 1), ("days_pass", 4), ("live", 2), ("days_pass", 4),
              ("days_pass", 4), ("caught_up", 0)]
"""A pending version replaced by another before it caught up: kept 7 days from then."""


class Model:
    """What docs/streams-and-pipelines.md ("Versions") says, for variants of one file."""

    def __init__(self, now: int) -> None:
        self.now = now
        self.file = 0
        self.serving: int | None = None
        self.recorded: dict[int, int] = {}
        self.served: set[int] = set()
        self.stopped: dict[int, int] = {}
        self.tables: set[int] = set()

    def serve(self, variant: int) -> None:
        if self.serving is not None and self.serving != variant:
            self.stopped[self.serving] = self.now
        self.serving = variant
        self.served.add(variant)

    def compute(self, first_serves_at_once: bool) -> None:
        v = self.file
        self.recorded.setdefault(v, self.now)
        first = self.serving is None and first_serves_at_once
        restored = self.serving not in (None, v) and v in self.served and v in self.tables
        if first or restored:
            self.serve(v)
        self.tables.add(v)

    def prune(self) -> None:
        for v in sorted(self.tables):
            if v in (self.serving, self.file):
                continue
            later = [t for w, t in self.recorded.items() if t > self.recorded[v]]
            since = self.stopped.get(v) if v in self.served else \
                (min(later) if later else self.recorded[v])
            if since is not None and self.now - since >= 7 * DAY_MS:
                self.tables.discard(v)


@settings(max_examples=examples(40), deadline=None)
@given(steps=STEPS)
@example(steps=RESTORED)
@example(steps=RETIRED_THEN_GONE)
@example(steps=SUPERSEDED)
def test_readers_always_see_one_computed_version_as_the_model_says(tmp_path_factory, steps):
    """Any sequence of edits (the file names one of three variants) computed by a backfill or
    by the live job, switches of a caught-up version and days passing: readers see what the
    model says, always a version with tables, and a version's tables are there exactly while
    the model keeps them."""
    home = tmp_path_factory.mktemp("versions") / "home"
    names = [_version(home, v) for v in range(len(VARIANTS))]
    model = Model(1_000 * DAY_MS)
    for step, value in steps:
        if step in ("backfill", "live"):
            model.file = value
        pipeline = _pipeline(home, VARIANTS[model.file])
        if step in ("backfill", "live"):
            versions.reconcile(pipeline, model.now, first_serves_at_once=step == "backfill")
            _computed(pipeline)
            model.compute(step == "backfill")
        elif step == "caught_up" and model.file in model.tables:
            versions.switch(pipeline, pipeline.version, "caught up", model.now)
            model.serve(model.file)
        elif step == "days_pass":
            model.now += value * DAY_MS
            versions.prune(_pipeline(home, VARIANTS[model.file]), model.now)
            model.prune()
        model.now += 1_000
        current = versions.serving(pipeline)
        assert (None if current is None else current.version) == \
            (None if model.serving is None else names[model.serving]), steps
        kept = {v for v in range(len(VARIANTS)) if storage.local_path(storage.join(
            pipeline.root, "versions", names[v], tables.WINDOW_RESULTS)).exists()}
        assert kept == model.tables, steps
        if model.serving is not None:
            assert model.serving in kept, steps


def _version(home: Path, variant: int) -> str:
    return _pipeline(home.parent / f"probe-{variant}", VARIANTS[variant]).version


# -- cohorts -----------------------------------------------------------------------------------

def test_a_stream_runs_one_cohort_and_a_changed_pipeline_gets_one_of_its_own(tmp_path):
    home = tmp_path / "home"
    env = platform_env(home, {"a": VARIANTS[0], "b": SESSIONS})
    platform = platform_of(PlatformSettings.from_env(env))
    stream = platform.streams["events"]
    a, b = platform.pipelines["a"], platform.pipelines["b"]
    (first,) = cohorts.plan(stream, [a, b], buckets=16, now_ms=1)
    assert first.new and [p.name for p in first.pipelines] == ["a", "b"]
    cohorts.claim(first.checkpoint, stream, first.pipelines, 16, now_ms=1)
    assert cohorts.plan(stream, [a, b], 16)[0].checkpoint == first.checkpoint  # resumed
    changed = _pipeline(home, VARIANTS[1], "a")
    runs = cohorts.plan(stream, [a, changed, b], 16, now_ms=2)
    assert [(r.new, [p.version for p in r.pipelines]) for r in runs] == [
        (False, [a.version, b.version]), (True, [changed.version])]
    assert runs[1].checkpoint != first.checkpoint
    # once readers switched, the retired version is dropped from its cohort at its next start
    (kept, mine) = cohorts.plan(stream, [changed, b], 16, now_ms=3)
    assert kept.checkpoint == first.checkpoint and kept.drop == [("a", a.version)]
    cohorts.claim(kept.checkpoint, stream, kept.pipelines, 16)
    record = cohorts.read_record(first.checkpoint)
    assert record.members == (("b", b.version),) and record.dropped == (("a", a.version),)
    # a selection runs the cohorts holding its versions, whole
    assert [r.checkpoint for r in cohorts.plan(stream, [changed, b], 16, {"b"})] == [
        first.checkpoint]


def test_a_cohort_never_takes_in_a_version_and_never_leaves_a_live_one_behind(tmp_path):
    env = platform_env(tmp_path / "home", {"a": VARIANTS[0], "b": SESSIONS})
    platform = platform_of(PlatformSettings.from_env(env))
    stream = platform.streams["events"]
    a, b = platform.pipelines["a"], platform.pipelines["b"]
    checkpoint = storage.join(stream.checkpoints, "mine")
    cohorts.claim(checkpoint, stream, [a], 16)
    with pytest.raises(SettingsError, match=r"its state was not built for b@"):
        cohorts.claim(checkpoint, stream, [a, b], 16)
    with pytest.raises(SettingsError, match="it has 16 buckets, this run 8"):
        cohorts.claim(checkpoint, stream, [a], 8)
    both = storage.join(stream.checkpoints, "both")
    cohorts.claim(both, stream, [a, b], 16)
    with pytest.raises(SettingsError, match=r"also runs b@.* which this run would leave "
                                            "behind"):
        cohorts.claim(both, stream, [a], 16, still_live=[("b", b.version)])

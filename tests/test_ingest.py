"""Ingest writes the arrival log and quarantine that docs/contract.md §1-2 define, exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.generator import BAD_KINDS, GeneratorConfig, generate
from jobs.streams.landing.batch import BAD_INGEST_STAMP
from jobs.streams.landing.ingestor import Ingestor, ingest
from jobs.streams.landing.log import IngestLog
from operators.watermarks import assign_watermarks

pytestmark = pytest.mark.spark

SMALL = GeneratorConfig(events=2_000, duration_ms=3 * 3_600_000, keys=8, producers=3,
                        bad_fraction=0.05, flush_interval_ms=600_000)


def _quiet(_: str) -> None:
    pass


def _table(spark, stream: Stream, name: str):
    return spark.read.format("delta").load(stream.table_path(name)).toPandas()


def _stream(env: dict[str, str] | None = None) -> Stream:
    """The home's one stream, ``events``."""
    return platform_of(PlatformSettings.from_env(env)).streams["events"]


def test_every_line_lands_once_good_in_the_log_bad_in_quarantine(spark, platform_env):
    stream = _stream()
    counts = generate(SMALL, stream.landing)
    report = ingest(spark, stream, progress=_quiet)

    log = _table(spark, stream, tables.ARRIVAL_LOG).sort_values("arrival_seq")
    quarantine = _table(spark, stream, tables.QUARANTINE)
    assert len(log) + len(quarantine) == counts["lines"]
    assert len(log) == counts["events"] == report.records
    # every injected kind of bad line is quarantined for that reason, and nothing else is
    injected = {kind: counts.get(f"bad_{kind}", 0) for kind in BAD_KINDS}
    found = quarantine.reason.value_counts().to_dict()
    assert {k: v for k, v in injected.items() if v} == found
    # arrival positions: gap-free sequence, non-decreasing ingest clock
    assert log.arrival_seq.tolist() == list(range(len(log)))
    assert log.ingest_time_ms.is_monotonic_increasing
    assert (log[["source_file", "line_number"]].drop_duplicates().shape[0] == len(log))


def test_each_record_carries_the_watermark_computed_from_the_records_before_it(spark,
                                                                             platform_env):
    stream = _stream()
    generate(SMALL, stream.landing)
    ingest(spark, stream, progress=_quiet)
    log = _table(spark, stream, tables.ARRIVAL_LOG).sort_values("arrival_seq")
    expected = assign_watermarks(stream.watermark, [
        (row.source_partition, row.event_time_ms, row.ingest_time_ms, json.loads(row.payload))
        for row in log.itertuples()])
    assert log.watermark_ms.tolist() == expected
    assert log.watermark_ms.is_monotonic_increasing


def test_reingest_adds_nothing_and_new_files_continue_the_log(spark, platform_env):
    stream = _stream()
    generate(SMALL, stream.landing)
    first = ingest(spark, stream, progress=_quiet)
    assert ingest(spark, stream, progress=_quiet).batch_id is None
    later = GeneratorConfig(**{**SMALL.__dict__, "seed": 99,
                               "start_ms": SMALL.start_ms + SMALL.duration_ms})
    generate(later, stream.landing)
    second = ingest(spark, stream, progress=_quiet)
    assert second.batch_id == first.batch_id + 1

    log = _table(spark, stream, tables.ARRIVAL_LOG).sort_values("arrival_seq")
    assert log.arrival_seq.tolist() == list(range(first.records + second.records))
    assert log.ingest_time_ms.is_monotonic_increasing
    # the watermark state carried between batches gives what one pass over the log gives
    expected = assign_watermarks(stream.watermark, [
        (row.source_partition, row.event_time_ms, row.ingest_time_ms, json.loads(row.payload))
        for row in log.itertuples()])
    assert log.watermark_ms.tolist() == expected


def test_a_crash_before_commit_reruns_the_same_batch_without_doubling(spark, platform_env,
                                                                     monkeypatch):
    stream = _stream()
    generate(SMALL, stream.landing)
    original = IngestLog.write_commit

    def crash_on_commit(log, commit):
        raise RuntimeError("simulated crash after the appends")

    monkeypatch.setattr(IngestLog, "write_commit", crash_on_commit)
    with pytest.raises(RuntimeError, match="simulated crash"):
        ingest(spark, stream, progress=_quiet)
    crashed = _table(spark, stream, tables.ARRIVAL_LOG)
    # a new file arriving meanwhile must not slip into the re-run batch
    extra = stream.landing_dir / "producer-9" / "late-arrival.jsonl"
    extra.parent.mkdir(parents=True)
    extra.write_text(json.dumps({"key": "user-0001", "event_time": SMALL.start_ms,
                                 "received_at": SMALL.start_ms + 10}) + "\n")
    monkeypatch.setattr(IngestLog, "write_commit", original)

    # one batch: the crashed one (``ingest`` would go on to the new file as batch 1)
    resumed = Ingestor(spark, stream, _quiet).run_once()
    assert resumed.resumed and resumed.batch_id == 0
    after = _table(spark, stream, tables.ARRIVAL_LOG)
    assert len(after) == len(crashed)
    assert after.sort_values("arrival_seq").equals(crashed.sort_values("arrival_seq"))
    assert len(_table(spark, stream, tables.QUARANTINE)) == resumed.quarantined

    follow_up = ingest(spark, stream, progress=_quiet)
    assert follow_up.batch_id == 1 and follow_up.files == 1 and follow_up.records == 1


def test_lines_without_the_clock_field_take_their_neighbours_clock(spark, platform_env):
    stream = _stream()
    folder = stream.landing_dir / "producer-0"
    folder.mkdir(parents=True)
    lines = [
        {"key": "a", "event_time": 1_000, "received_at": 5_000},
        {"key": "b", "event_time": 2_000},  # no stamp: takes 5_000
        {"key": "c", "event_time": 3_000, "received_at": 4_000},  # clock never goes back
        "{not json",
        {"key": "d", "event_time": 9_000_000_000_000, "received_at": 6_000},  # far future
    ]
    (folder / "f.jsonl").write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    ingest(spark, stream, progress=_quiet)
    log = _table(spark, stream, tables.ARRIVAL_LOG).sort_values("arrival_seq")
    quarantine = _table(spark, stream, tables.QUARANTINE).sort_values("line_number")
    assert log.key.tolist() == ["c", "a", "b"]  # arrival order follows the ingest clock
    assert log.ingest_time_ms.tolist() == [4_000, 5_000, 5_000]
    assert quarantine.reason.tolist() == ["malformed_json", "too_far_in_future"]
    assert quarantine.ingest_time_ms.tolist() == [4_000, 6_000]  # previous line's stamp


def test_configuration_errors_name_the_setting(platform_env, tmp_path: Path):
    from jobs.config.errors import SettingsError

    with pytest.raises(SettingsError, match="PLATFORM_INGEST_CLOCK"):
        PlatformSettings.from_env({"PLATFORM_INGEST_CLOCK": "sundial"})
    streams = tmp_path / "streams"
    streams.mkdir()
    (streams / "events.yaml").write_text("watermark: {strategy: bounded_out_of_orderness}\n")
    with pytest.raises(SettingsError, match=r"events\.yaml: watermark\.max_out_of_orderness "
                                            "is required"):
        platform_of(PlatformSettings.from_env({"PLATFORM_STREAMS": str(streams)}))
    with pytest.raises(SettingsError, match="PLATFORM_MAX_FUTURE"):
        PlatformSettings.from_env({"PLATFORM_MAX_FUTURE": "soon"})


def test_bad_lines_and_bogus_stamps_change_nothing_for_the_good_records(spark, tmp_path):
    """Quarantined lines never move the ingest clock, so never the watermark either (idleness
    and interval ticks run on that clock): the log with bad lines mixed in equals the log of
    the good lines alone. A collector stamp far in the future is itself quarantined."""
    start = 1_767_225_600_000
    good = {
        "producer-0": [{"key": f"k{i % 3}", "event_time": start + i * 20_000,
                        "received_at": start + i * 20_000 + 500} for i in range(12)],
        "producer-1": [{"key": "k9", "event_time": start + i * 90_000,
                        "received_at": start + i * 90_000 + 700} for i in range(3)],
    }
    bad = {
        "producer-0": [{"event_time": start + 30_000, "received_at": start + 3_600_000},
                       {"key": "k1", "event_time": start + 40_000,
                        "received_at": 253_402_300_000_000}],  # the year 9999
        "producer-1": [{"key": "k9", "event_time": "soon", "received_at": start + 7_200_000},
                       "{broken", {"key": "k9", "event_time": start + 50_000,
                                   "received_at": "2999-01-01T00:00:00Z"}],
    }

    def ingest_into(home: Path, with_bad: bool):
        stream = _stream({"PLATFORM_HOME": str(home)})
        for partition, lines in good.items():
            extra = bad[partition] if with_bad else []
            mixed = [*lines[:4], *extra, *lines[4:]]
            path = stream.landing_dir / partition / "f.jsonl"
            path.parent.mkdir(parents=True)
            path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x)
                                      for x in mixed) + "\n")
        ingest(spark, stream, progress=_quiet)
        return stream

    clean = ingest_into(tmp_path / "clean", with_bad=False)
    dirty = ingest_into(tmp_path / "dirty", with_bad=True)
    columns = ["arrival_seq", "key", "event_time_ms", "ingest_time_ms", "watermark_ms"]
    expected = _table(spark, clean, tables.ARRIVAL_LOG).sort_values("arrival_seq")[columns]
    got = _table(spark, dirty, tables.ARRIVAL_LOG).sort_values("arrival_seq")[columns]
    assert got.reset_index(drop=True).equals(expected.reset_index(drop=True))
    reasons = sorted(_table(spark, dirty, tables.QUARANTINE).reason)
    assert reasons == sorted(["missing_key", BAD_INGEST_STAMP,
                              "unparsable_event_time", "malformed_json",
                              BAD_INGEST_STAMP])

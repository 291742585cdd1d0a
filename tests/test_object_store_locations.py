"""Locations in an object store, against a real S3-compatible server on loopback: a landing
folder behind an ``s3a://`` URI (read through Arrow's filesystems) is seen exactly as the same
files on local disk (the same finished files, sizes and bytes, the same half-written file left
for later), and a warehouse there keeps its pipeline record as a local one does."""

from __future__ import annotations

import pytest

from jobs.config.registry import platform_of
from jobs.streams.landing.folder import LandingFolder, list_landing, read_range, sha256_prefix
from tests.cluster.object_store import start_object_store

FILES = {
    "producer-0/a.jsonl": b'{"key": "a", "event_time": 1}\n{"key": "b", "event_time": 2}\n',
    "producer-0/b.jsonl": b"",
    "producer-1/c.jsonl": b'{"key": "c", "event_time": 3}\n{"key": "c", "event_ti',  # in flight
    "producer-1/d.jsonl.tmp": b'{"key": "d"}\n',
    "producer-1/e.txt": b"not a landing file\n",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    running = start_object_store(tmp_path_factory.mktemp("s3"))
    yield running
    running.stop()


@pytest.fixture
def both(store, tmp_path, monkeypatch) -> tuple[LandingFolder, LandingFolder]:
    """The same files in a local folder and under ``s3a://landing-test/<test>/landing``."""
    for name, value in store.environment().items():
        monkeypatch.setenv(name, value)
    bucket = "landing-test"
    if bucket not in _buckets(store):
        store.create_bucket(bucket)
    local = tmp_path / "landing"
    remote = f"s3a://{bucket}/{tmp_path.name}/landing"
    remote_folder = LandingFolder(remote)
    for name, data in FILES.items():
        path = local / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        with remote_folder._filesystem.open_output_stream(remote_folder._path(name)) as out:
            out.write(data)
    return LandingFolder(local), remote_folder


def _buckets(store) -> set[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=store.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    return {b["Name"] for b in client.list_buckets()["Buckets"]}


def test_an_object_store_landing_lists_and_reads_as_local_disk(both):
    local, remote = both
    settle_ms = 3_600_000  # every file was written just now: the cut-off one waits
    local_files, local_deferred = list_landing(local, settle_ms)
    remote_files, remote_deferred = list_landing(remote, settle_ms)
    assert [(f.name, f.size) for f in remote_files] == [(f.name, f.size) for f in local_files]
    assert [f.name for f in remote_files] == ["producer-0/a.jsonl", "producer-0/b.jsonl"]
    assert remote_deferred == local_deferred == 1
    assert all(f.mtime_ns > 0 for f in remote_files)
    # once settled, the cut-off file is taken as it is (its last line quarantined later)
    settled, deferred = list_landing(remote, 0)
    assert [f.name for f in settled] == [*[f.name for f in local_files], "producer-1/c.jsonl"]
    assert deferred == 0
    name, size = "producer-0/a.jsonl", len(FILES["producer-0/a.jsonl"])
    assert read_range(remote, name, 5, size) == read_range(local, name, 5, size) \
        == FILES[name][5:]
    assert sha256_prefix(remote, name, 20) == sha256_prefix(local, name, 20)


def test_a_missing_object_store_landing_is_reported_missing(store, monkeypatch):
    for name, value in store.environment().items():
        monkeypatch.setenv(name, value)
    folder = LandingFolder("s3a://no-such-bucket-here/landing")
    assert not folder.exists()
    assert list_landing(folder, 0) == ([], 0)
    with pytest.raises(FileNotFoundError, match="no-such-bucket-here/landing/p/x.jsonl"):
        read_range(folder, "p/x.jsonl", 0, 1)


def test_a_warehouse_in_the_object_store_keeps_its_pipelines_versions(store, monkeypatch,
                                                                      tmp_path):
    """A pipeline's version records and the file saying which version readers see live in
    the bucket as on local disk: the first version serves, a changed description is pending
    (readers stay on the first) until a switch, and switching back needs no new record."""
    from jobs.config.settings import PlatformSettings
    from jobs.lifecycle import versions
    from tests.platform_home import PER_MINUTE, platform_env

    for name, value in store.environment().items():
        monkeypatch.setenv(name, value)
    store.create_bucket("marks")

    def counts(text: str):
        env = {**platform_env(tmp_path / "home", {"counts": text}),
               "PLATFORM_WAREHOUSE": "s3a://marks/warehouse"}
        return platform_of(PlatformSettings.from_env(env)).pipelines["counts"]

    first = counts(PER_MINUTE)
    assert versions.reconcile(first).said(first) == \
        f"counts: version {first.version} serves (its first)"
    assert store.keys("marks", "warehouse/pipelines/counts/_platform/")
    assert versions.reconcile(first).said(first) is None  # the same version again
    changed = counts(PER_MINUTE.replace("size: 1m", "size: 2m"))
    assert versions.reconcile(changed).state == versions.PENDING
    assert versions.serving_pipeline(changed).version == first.version
    assert versions.serving_pipeline(changed).spec.window.size_ms == 60_000  # as recorded
    versions.switch(changed, changed.version, "test")
    assert versions.serving(first).version == changed.version
    assert [s.state for s in versions.version_states(changed)] == [versions.SERVING,
                                                                   versions.RETIRED]


def test_an_object_store_warehouse_without_an_arrival_log_is_refused(store, monkeypatch,
                                                                     tmp_path):
    """A backfill or a live run that does not ingest needs an arrival log: in a bucket as on
    local disk, a warehouse without one is named before Spark starts, and one with it passes;
    a bucket that is not there is reported as unreadable, not as empty."""
    from jobs.config.errors import SettingsError
    from jobs.config.settings import PlatformSettings
    from jobs.store import fast_writes
    from jobs.streams.checks import check_ingested
    from jobs.streams.log_rows import ARRIVAL_SCHEMA

    for name, value in store.environment().items():
        monkeypatch.setenv(name, value)
    store.create_bucket("ingested")
    env = {"PLATFORM_HOME": str(tmp_path / "home"),
           "PLATFORM_WAREHOUSE": "s3a://ingested/warehouse"}
    stream = platform_of(PlatformSettings.from_env(env)).streams["events"]
    with pytest.raises(SettingsError, match=r"events has no arrival log in PLATFORM_WAREHOUSE "
                                            r"\(s3a://ingested/warehouse\)"):
        check_ingested(stream)
    fast_writes.append(stream.arrival_log, ARRIVAL_SCHEMA.empty_table())
    check_ingested(stream)
    with pytest.raises(SettingsError, match=r"cannot be read: .*NoSuchBucket"):
        check_ingested(platform_of(PlatformSettings.from_env(
            {**env, "PLATFORM_WAREHOUSE": "s3a://no-such-bucket/warehouse"})).streams["events"])


def test_a_checkpoint_in_the_object_store_has_its_owed_batch_run_again(store, monkeypatch):
    """A live query's checkpoint under ``s3a://``: its offset and commit logs are read and
    the commit of a last batch that owes a batch without data is removed, as on local disk
    (tests/test_owed_batch.py), through Arrow's filesystem."""
    from jobs.runtime.owed_batch import last_committed_batch, run_owed_batch_again
    from jobs.store import storage

    for name, value in store.environment().items():
        monkeypatch.setenv(name, value)
    store.create_bucket("checkpoints")
    checkpoint = "s3a://checkpoints/warehouse/streams/events/_checkpoints/live-1"
    for batch, (ran_at, next_at) in enumerate([(0, 500), (500, 900)]):
        storage.write_small_text(f"{checkpoint}/offsets/{batch}",
                                 f'v1\n{{"batchWatermarkMs":{ran_at},"batchTimestampMs":1}}\n'
                                 '{"next_arrival_seq": 10}')
        storage.write_small_text(f"{checkpoint}/commits/{batch}",
                                 f'v1\n{{"nextBatchWatermarkMs":{next_at}}}')
    owed = run_owed_batch_again(checkpoint, lambda _: None, "live events")
    assert owed is not None and owed.batch_id == 1
    assert storage.list_file_names(f"{checkpoint}/commits") == ["0"]
    assert storage.list_file_names(f"{checkpoint}/offsets") == ["0", "1"]
    assert last_committed_batch(checkpoint) is None

"""Configuration errors fail before any data is touched, with one message naming the setting;
services bind to loopback; configured paths cannot reach outside the warehouse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from jobs.config.errors import SettingsError
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings

REPO = Path(__file__).resolve().parents[2]


def _pipeline(tmp_path: Path, text: str) -> dict[str, str]:
    """A home whose one pipeline is ``text`` (reading the project's stream)."""
    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "bad.yaml").write_text("source: events\n" + text, encoding="utf-8")
    return {"PLATFORM_HOME": str(tmp_path / "home"), "PLATFORM_PIPELINES": str(folder)}


def _stream(tmp_path: Path, watermark: str) -> dict[str, str]:
    """A home whose one stream, events, has this watermark section."""
    folder = tmp_path / "streams"
    folder.mkdir()
    (folder / "events.yaml").write_text(f"watermark: {watermark}\n", encoding="utf-8")
    return {"PLATFORM_HOME": str(tmp_path / "home"), "PLATFORM_STREAMS": str(folder)}


@pytest.mark.parametrize(("text", "named"), [
    ("window: {type: tumbling, size: 0}\n", "window.size"),
    ("window: {type: tumbling, size: ten minutes}\n", "window.size"),
    ("window: {type: sliding, size: 1m, slide: 5m}\n", "window.slide"),
    ("window: {type: session}\n", "window.gap"),
    ("window: {type: tumbling, size: 1m}\nallowed_lateness: soon\n", "allowed_lateness"),
])
def test_a_wrong_pipeline_setting_is_named(tmp_path, text, named):
    with pytest.raises(SettingsError, match=r"bad\.yaml: .*" + named.replace(".", r"\.")):
        platform_of(PlatformSettings.from_env(_pipeline(tmp_path, text)))


@pytest.mark.parametrize(("watermark", "named"), [
    ("{strategy: bounded_out_of_orderness, max_out_of_orderness: -5s}",
     "watermark.max_out_of_orderness"),
    ("{strategy: bounded_out_of_orderness, max_out_of_orderness: 5s, idle_timeout: 0}",
     "watermark.idle_timeout"),
])
def test_a_wrong_stream_setting_is_named(tmp_path, watermark, named):
    with pytest.raises(SettingsError, match=r"events\.yaml: .*" + named.replace(".", r"\.")):
        platform_of(PlatformSettings.from_env(_stream(tmp_path, watermark)))


def test_wrong_paths_are_named(tmp_path):
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    with pytest.raises(SettingsError, match="PLATFORM_WAREHOUSE .* is a file"):
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "h"),
                                   "PLATFORM_WAREHOUSE": str(a_file)})
    with pytest.raises(SettingsError, match="PLATFORM_LANDING .* cannot be created"):
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "h"),
                                   "PLATFORM_LANDING": str(a_file / "landing")})
    with pytest.raises(SettingsError, match="PLATFORM_LANDING .* must not be inside"):
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "h"),
                                   "PLATFORM_WAREHOUSE": str(tmp_path / "w"),
                                   "PLATFORM_LANDING": str(tmp_path / "w" / "landing")})
    if os.geteuid() != 0:  # root can write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(SettingsError, match="PLATFORM_HOME .* not writable"):
            PlatformSettings.from_env({"PLATFORM_HOME": str(locked / "home")})


def test_configured_paths_cannot_escape_the_warehouse(tmp_path):
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "home")})
    with pytest.raises(SettingsError, match="escape the warehouse"):
        settings.table_path("../landing")
    with pytest.raises(SettingsError, match="escape the warehouse"):
        settings.table_path("/etc")
    with pytest.raises(SettingsError, match="--checkpoint .* escape the warehouse"):
        settings.inside_warehouse(tmp_path / "elsewhere", "--checkpoint")
    assert settings.table_path("arrival_log").startswith(str(Path(settings.warehouse).resolve()))


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_")}
    return subprocess.run([sys.executable, "-m", "jobs", *args], cwd=REPO,
                          env={**environment, **env}, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.cli
def test_the_command_line_names_the_setting_and_touches_nothing(tmp_path):
    home = tmp_path / "home"
    for args, env, named in (
        (["backfill"], {"PLATFORM_TIME_ZONE": "Mars/Olympus_Mons"}, "PLATFORM_TIME_ZONE"),
        (["ingest"], {"PLATFORM_MAX_FUTURE": "a while"}, "PLATFORM_MAX_FUTURE"),
        (["live", "--checkpoint", str(tmp_path / "elsewhere")], {}, "--checkpoint"),
        (["nexmark", "q5", "--param", "window_size_ms=ten"], {}, "--param"),
        (["nexmark", "q11", "--param", "session_gap_ms=0"], {}, "session_gap_ms"),
        (["nexmark", "q7", "--param", "window_slide_ms=5"], {}, "window_slide_ms"),
    ):
        result = _cli(args, {"PLATFORM_HOME": str(home), **env})
        assert result.returncode == 2, result.stderr
        assert named in result.stderr
        assert "Traceback" not in result.stderr
        assert not (home / "warehouse").exists()  # nothing was touched


@pytest.mark.cli
@pytest.mark.parametrize(("variable", "value"), [
    ("PLATFORM_LATE_RATE_WARN", "five percent"),
    ("PLATFORM_FINALITY_LOOKBACK_DAYS", "0"),
    ("PLATFORM_TIME_ZONE", "Mars/Olympus_Mons"),
])
def test_the_code_location_names_a_bad_environment_setting(tmp_path, variable, value):
    """Read when Dagster loads the definitions: one line naming the variable, not a bare
    ValueError from inside Dagster."""
    environment = {**os.environ, "PLATFORM_HOME": str(tmp_path), variable: value}
    result = subprocess.run([sys.executable, "-c", "import platform_defs.definitions"],
                            cwd=REPO, env=environment, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("jobs.config.errors.SettingsError: ") and variable in last_line


def test_a_resource_time_zone_other_than_the_partitions_is_refused(tmp_path, monkeypatch):
    """The daily partitions are defined when the code location loads, from
    PLATFORM_TIME_ZONE; a resource set to another zone would file days under wrong keys."""
    from platform_defs.partitions import daily_partitions
    from platform_defs.resources import PlatformResource

    monkeypatch.setenv("PLATFORM_HOME", str(tmp_path))
    other = "Asia/Tokyo" if daily_partitions.timezone != "Asia/Tokyo" else "UTC"
    with pytest.raises(SettingsError, match="PLATFORM_TIME_ZONE"):
        PlatformResource(time_zone=other).settings()
    same = PlatformResource(time_zone=daily_partitions.timezone).settings()
    assert same.time_zone == daily_partitions.timezone


@pytest.mark.spark
def test_a_delta_setting_spark_refuses_is_named_before_any_job(spark):
    from jobs.session import SparkConfigError, get_spark

    before = spark.conf.get("spark.sql.shuffle.partitions")
    with pytest.raises(SparkConfigError,
                       match="spark.databricks.delta.retentionDurationCheck.enabled"):
        get_spark("local[2]", 2, extra={
            "spark.databricks.delta.retentionDurationCheck.enabled": "maybe"})
    with pytest.raises(SparkConfigError, match="spark.sql.shuffle.partitions"):
        get_spark("local[2]", 2, extra={"spark.sql.shuffle.partitions": "many"})
    assert spark.conf.get("spark.sql.shuffle.partitions") == before  # the session is unchanged


def test_the_enrichment_service_binds_to_loopback_by_default():
    from services.enrichment_service import ServiceConfig, running_service

    assert ServiceConfig().host == "127.0.0.1"
    with running_service() as service:
        assert urlparse(service.base_url).hostname == "127.0.0.1"


def test_the_dagster_ui_binds_to_loopback():
    script = (REPO / "platform").read_text(encoding="utf-8")
    ui = next(line for line in script.splitlines() if "dagster\" dev" in line)
    assert "-h 127.0.0.1" in ui


def test_the_enrichment_resource_builds_the_operator_config_or_names_the_field():
    from operators.async_io import OutputMode
    from platform_defs.enrichment_assets import EnrichmentServiceResource

    config = EnrichmentServiceResource(backoff="fixed", output="unordered", retry_delay_ms=7,
                                       max_attempts=4).enrich_config("replay")
    assert (config.retry.backoff, config.retry.delay_ms, config.retry.max_attempts) == \
        ("fixed", 7, 4)
    assert config.output == OutputMode.UNORDERED and config.mode.value == "replay"
    capped = EnrichmentServiceResource(max_retry_delay_ms=300).enrich_config("live")
    assert (capped.retry.backoff, capped.retry.max_delay_ms) == ("exponential", 300)
    for fields, named in (({"backoff": "linear"}, "backoff"), ({"capacity": 0}, "capacity"),
                          ({"output": "random"}, "random")):
        with pytest.raises(ValueError, match=f"enrichment_service.*{named}"):
            EnrichmentServiceResource(**fields).enrich_config("live")

"""Choosing the engine: Spark settings from the environment, the packages every session asks
for, and the code a cluster session ships. Pure Python; the cluster itself is tested in
tests/cluster."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from jobs.config.errors import SettingsError
from jobs.config.settings import PlatformSettings
from jobs.session import classes as jvm_classes
from jobs.session import jars as spark_jars
from jobs.session import session_settings
from jobs.session.shipping import is_cluster, package_zip


@pytest.mark.parametrize("text", ['{"spark.executor.memory": "1g", "spark.cores.max": "2"}',
                                  "spark.executor.memory=1g,spark.cores.max=2",
                                  "spark.executor.memory = 1g\nspark.cores.max=2\n"])
def test_spark_settings_come_from_the_environment_as_json_or_key_value(tmp_path, text):
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                          "PLATFORM_SPARK_CONF": text,
                                          "PLATFORM_SPARK_MASTER": "spark://127.0.0.1:7077"})
    assert settings.spark_settings() == {"spark.executor.memory": "1g", "spark.cores.max": "2"}
    assert settings.spark_master == "spark://127.0.0.1:7077"


def test_a_spark_defaults_file_is_read_and_the_variable_wins(tmp_path):
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text("# cluster\nspark.executor.memory 2g\nspark.cores.max 4\n")
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                          "PLATFORM_SPARK_DEFAULTS": str(defaults),
                                          "PLATFORM_SPARK_CONF": "spark.cores.max=2"})
    assert settings.spark_settings() == {"spark.executor.memory": "2g", "spark.cores.max": "2"}


def test_a_malformed_spark_setting_is_named(tmp_path):
    with pytest.raises(SettingsError, match="PLATFORM_SPARK_CONF: expected key=value"):
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                   "PLATFORM_SPARK_CONF": "spark.cores.max"})


@pytest.mark.parametrize(("value", "said"), [
    ("abc", "PLATFORM_INGEST_PROCESSES: Input should be 'auto' or a valid integer (got 'abc')"),
    ("-2", "PLATFORM_INGEST_PROCESSES: Input should be 'auto' or a number greater than or "
           "equal to 0 (got '-2')"),
])
def test_a_setting_of_two_forms_is_named_once_with_both(tmp_path, value, said):
    """``auto`` or a number: one line saying both forms, not one line per form it is not."""
    with pytest.raises(SettingsError) as raised:
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                   "PLATFORM_INGEST_PROCESSES": value,
                                   "PLATFORM_SHUFFLE_PARTITIONS": "0"})
    assert str(raised.value).split("; ") == [
        said, "PLATFORM_SHUFFLE_PARTITIONS: Input should be greater than or equal to 1 "
              "(got '0')"]


def test_the_users_packages_are_added_to_deltas_not_replacing_them():
    wanted = spark_jars.packages("org.apache.hadoop:hadoop-aws:3.4.2, x:y:1")
    assert wanted[0].startswith("io.delta:delta-spark_")
    assert wanted[1].startswith("org.apache.spark:spark-sql-kafka-0-10_2.13:")
    assert wanted[2:] == ["org.apache.hadoop:hadoop-aws:3.4.2", "x:y:1"]


def test_remembered_jars_are_used_only_while_every_file_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"jar")
    wanted = spark_jars.packages()
    assert spark_jars.remembered_jars(wanted) is None
    spark_jars.remember_jars(wanted, f"file://{jar}")
    assert spark_jars.remembered_jars(wanted) == [f"file://{jar}"]
    assert spark_jars.remembered_jars(spark_jars.packages("x:y:1")) is None  # other packages
    jar.unlink()
    assert spark_jars.remembered_jars(wanted) is None  # resolve again


def test_only_non_local_masters_ship_code():
    assert not is_cluster("local[2]") and not is_cluster("local[*]")
    assert is_cluster("spark://127.0.0.1:7077") and is_cluster("yarn")
    assert is_cluster("k8s://https://10.0.0.1:6443")


def test_the_shipped_zip_holds_every_module_the_executors_run(tmp_path):
    archive = package_zip(folder=tmp_path)
    names = set(zipfile.ZipFile(archive).namelist())
    for module in ("operators/window_operator.py", "jobs/runtime/buckets.py",
                   "jobs/windows/vectorised.py", "jobs/live/standard.py", "nexmark/queries.py",
                   "jobs/config/settings.py", "jobs/store/storage.py", "jobs/tables/__init__.py"):
        assert module in names
    assert not any("__pycache__" in name for name in names)
    assert package_zip(folder=tmp_path) == archive  # same content, same file


def test_spark_connect_is_refused_up_front_saying_what_works(tmp_path):
    with pytest.raises(SettingsError, match=r"PLATFORM_SPARK_MASTER: Spark Connect .* not "
                                            r"supported.*spark://host:port"):
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                   "PLATFORM_SPARK_MASTER": "sc://127.0.0.1:15002"})


def test_the_drivers_class_archive_is_used_only_when_it_exists_for_this_java(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive = jvm_classes.archive_path()
    assert archive is not None and archive.parent == tmp_path / "cache" / "eventtime-platform"
    config = session_settings("local[2]", 2, "t", {"spark.driver.extraJavaOptions": "-Dx=1"})
    assert config["spark.driver.extraJavaOptions"] == "-Dx=1"  # none built: as without
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")  # no size recorded: not known to be whole, not offered
    assert "spark.driver.extraJavaOptions" not in session_settings("local[2]", 2, "t")
    archive.with_suffix(".size").write_text("7\n")
    config = session_settings("local[2]", 2, "t", {"spark.driver.extraJavaOptions": "-Dx=1"})
    # the archive's options first, so a user's own option of the same name wins
    archive_options = f"-XX:SharedArchiveFile={archive} {jvm_classes.QUIET_OPTION}"
    assert config["spark.driver.extraJavaOptions"] == f"{archive_options} -Dx=1"
    assert config["spark.executor.extraJavaOptions"] == archive_options
    dumping = {"spark.driver.extraJavaOptions": "-XX:ArchiveClassesAtExit=/tmp/a.jsa"}
    assert session_settings("local[2]", 2, "t", dumping)["spark.driver.extraJavaOptions"] \
        == "-XX:ArchiveClassesAtExit=/tmp/a.jsa"
    archive.write_bytes(b"archi")  # truncated: JDK 17 would die on it, so it is not offered
    assert "spark.driver.extraJavaOptions" not in session_settings("local[2]", 2, "t")
    archive.write_bytes(b"archive")
    # another Java (JAVA_HOME) is another archive: this one is not offered to it
    java_home = tmp_path / "other-jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_bytes(b"#!")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    assert jvm_classes.archive_path() != archive
    assert not {"spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"} & set(
        session_settings("local[2]", 2, "t"))


def test_a_new_archive_replaces_only_this_installations_older_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    current = jvm_classes.archive_path()
    current.parent.mkdir(parents=True)
    built_for = jvm_classes._built_for()
    archives = {"current": current, "older": current.with_name("spark-driver-older.jsa"),
                "elsewhere": current.with_name("spark-driver-elsewhere.jsa")}
    for name, archive in archives.items():
        archive.write_bytes(b"archive")
        where = ["/other/venv/pyspark/jars", built_for[1]] if name == "elsewhere" else built_for
        archive.with_suffix(".size").write_text("\n".join(["7", *where]) + "\n")
    jvm_classes._forget_older_archives(current)
    assert {name for name, archive in archives.items() if archive.exists()} == {
        "current", "elsewhere"}
    assert not archives["older"].with_suffix(".size").exists()
    assert jvm_classes.usable_archive() == current  # a record with the installation is read


def test_a_first_start_names_an_ivy_settings_file_that_is_there(tmp_path, monkeypatch):
    """Nothing remembered yet (a fresh machine): the session asks Ivy to resolve Delta's jars
    with the project's settings file, which must exist, or the JVM dies before Spark starts
    (a move of the file once broke every fresh clone while warm machines kept working)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = session_settings("local[2]", 4, "test")
    assert "spark.jars" not in config
    settings_file = config["spark.jars.ivySettings"]
    assert settings_file == str(spark_jars.IVY_SETTINGS)
    assert "repo1.maven.org" in Path(settings_file).read_text()

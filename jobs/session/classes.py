"""A class-data-sharing archive of the Spark driver's classes, built once per installation.

Every ``python -m jobs ...`` step, Dagster run and test process starts a Spark driver, and a
cold driver spends seconds loading, parsing and verifying the same tens of thousands of Spark,
Scala, Hadoop and Delta classes before it does any work (measured: a cold driver's start and a
one-day backfill's reads and window computation took 20.7 s, and 16.3 s with the archive). The
JDK's class-data sharing (CDS) maps them from one file instead. The JDK builds such a *dynamic
archive* of whatever a process loaded when it exits (``-XX:ArchiveClassesAtExit``), so
:func:`build` runs a small representative job (ingest, a backfill, a live stream) in a process
of its own and keeps the file only if that process ended cleanly; it is renamed into place
whole, and used only while its size is the one recorded beside it when it was built: JDK 17
does not reject a truncated archive, it dies on it (SIGBUS while mapping), so a damaged file
must never reach a JVM.

Sessions use the archive only when one exists for the same Java binary, Spark installation and
Delta jars (:func:`fingerprint`); otherwise the driver starts exactly as without it. The JVM
checks the archive again itself and quietly ignores one that does not fit or is not there
(the ``cds`` log tags are turned off, so nothing is printed then): executors on other
machines start as without it. ``./platform setup`` builds it; delete
``<cache>/spark-driver-*`` to go without.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyspark

from jobs.session import jars as spark_jars
from jobs.store.storage import write_small_text

WARM_UP = "jobs.warm_up"
"""The representative job the archive is dumped from (named, not imported: the session must not
depend on the jobs that use it)."""
DUMP_OPTION = "-XX:ArchiveClassesAtExit"
USE_OPTION = "-XX:SharedArchiveFile"
QUIET_OPTION = "-Xlog:cds=off,cds+dynamic=off"
"""A mismatched archive is ignored without the JVM's warning line on stdout."""


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def fingerprint() -> str | None:
    """What an archive depends on: the Java binary (path, size, time), the Spark
    installation's jars, and the Delta jars a session loads. ``None`` without Java."""
    java = java_binary()
    if java is None:
        return None
    stat = java.stat()
    jars = Path(_spark_jars_folder())
    names, installed = [], 0
    if jars.is_dir():  # a reinstall (new files, new folder time) makes the JVM refuse it
        names, installed = sorted(p.name for p in jars.glob("*.jar")), int(jars.stat().st_mtime)
    parts = [str(java), str(stat.st_size), str(int(stat.st_mtime)), str(jars), str(installed),
             pyspark.__version__, *names, *spark_jars.packages()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path() -> Path | None:
    """Where this installation's archive is (or would be) kept."""
    stamp = fingerprint()
    return None if stamp is None else spark_jars.cache_folder() / f"spark-driver-{stamp}.jsa"


def usable_archive() -> Path | None:
    """This installation's archive, if it was built whole and is still the size it was."""
    archive = archive_path()
    if archive is None:
        return None
    try:
        recorded = int(_size_record(archive).read_text().split("\n", 1)[0])
        return archive if archive.stat().st_size == recorded else None
    except (OSError, ValueError):
        return None


def _size_record(archive: Path) -> Path:
    """Beside the archive: its size when built, then the Spark installation and the Java it was
    built for."""
    return archive.with_suffix(".size")


def _spark_jars_folder() -> str:
    """The pyspark installation's own jars (not Delta's, which :mod:`jobs.session.jars` keeps):
    the classes the archive holds, so a reinstall there must not reuse it."""
    return str(Path(pyspark.__file__).parent / "jars")


def _built_for() -> list[str]:
    return [_spark_jars_folder(), str(java_binary())]


def _forget_older_archives(current: Path) -> None:
    """Archives this same installation built before with the same Java (before a reinstall or
    an upgrade) are of no use to anyone: about 200 MB each, so they go. Other installations'
    archives stay. (A process still mapping one keeps its pages: unlinking does not unmap.)"""
    for record in current.parent.glob("spark-driver-*.size"):
        if record == _size_record(current):
            continue
        try:
            lines = record.read_text().splitlines()
        except OSError:  # another build removed it meanwhile
            continue
        if lines[1:3] == _built_for():
            record.with_suffix(".jsa").unlink(missing_ok=True)
            record.unlink(missing_ok=True)


def java_options(user_options: str = "", archive: Path | None = None) -> str:
    """``spark.driver.extraJavaOptions`` (or the executors') for a session: the archive's
    options, when there is one, before the user's own (which therefore win), and none when the
    user's options build or name an archive themselves (``archive``: :func:`usable_archive`,
    looked up once per session). Executors on other machines do not
    find the file and start as without it; on this machine (a standalone cluster on one host)
    they share the driver's Spark jars and use it too."""
    if archive is None or DUMP_OPTION in user_options or USE_OPTION in user_options:
        return user_options
    return " ".join(filter(None, [f"{USE_OPTION}={archive}", QUIET_OPTION, user_options]))


def build(progress: Callable[[str], None] = print) -> Path | None:
    """Build the archive if this installation has none; its path (``None`` without Java)."""
    archive = archive_path()
    if archive is None:
        progress("jvm classes: no java found; Spark's driver starts without an archive")
        return None
    if usable_archive() is not None:
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    progress(f"jvm classes: building {archive} (a small job in a Spark driver of its own, "
             "about a minute, once)")
    with tempfile.TemporaryDirectory(prefix="jvm-classes-") as home:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_")}
        environment.update(PLATFORM_HOME=home, PYSPARK_PYTHON=sys.executable)
        result = subprocess.run([sys.executable, "-m", WARM_UP, str(partial)],
                                env=environment, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        progress("jvm classes: not built (Spark's driver starts without an archive): "
                 + " | ".join(tail))
        return None
    size = partial.stat().st_size
    partial.replace(archive)
    write_small_text(str(_size_record(archive)), "\n".join([str(size), *_built_for()]) + "\n")
    _forget_older_archives(archive)
    progress(f"jvm classes: built {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")
    return archive


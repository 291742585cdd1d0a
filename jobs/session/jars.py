"""The JVM packages a session needs (Delta, plus any the user names), resolved once.

Spark resolves ``spark.jars.packages`` with Ivy at *every* start: about five seconds of
dependency resolution and dozens of log lines per process, and a lookup of
``repos.spark-packages.org`` that fails noisily on machines without it. The jars do not change
for a given list of packages, so the first start resolves them from Maven Central only (plus
the local Ivy cache), and remembers the jar files it got; later starts hand Spark those files
(``spark.jars``) and skip Ivy entirely. A remembered file that has gone makes the next start
resolve again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlsplit

import pyspark

from jobs.store.storage import write_small_text

IVY_SETTINGS = Path(__file__).with_name("ivysettings.xml")
"""Maven Central only (Spark's default chain also asks repos.spark-packages.org); Ivy's cache
still serves what it downloaded before."""


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eventtime-platform"


def delta_package() -> str:
    """The Delta artifact matching the installed delta-spark and pyspark (as delta-spark's
    ``configure_spark_with_delta_pip`` names it)."""
    from importlib.metadata import version

    spark_major_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_major_minor}_2.13:{version('delta_spark')}"


def kafka_package() -> str:
    """Spark's own Kafka source for the installed pyspark (Kafka streams' ingest reads with it,
    jobs.streams.kafka)."""
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


def packages(user_packages: str = "") -> list[str]:
    """Delta's artifact, Spark's Kafka source, and the user's ``spark.jars.packages``, in a
    fixed order."""
    extra = [p.strip() for p in user_packages.split(",") if p.strip()]
    ours = [delta_package(), kafka_package()]
    return [*ours, *sorted(set(extra) - set(ours))]


def _record(wanted: list[str]) -> Path:
    digest = hashlib.sha256(",".join(wanted).encode()).hexdigest()[:16]
    return cache_folder() / f"jars-{digest}.txt"


def remembered_jars(wanted: list[str]) -> list[str] | None:
    """The jar files resolved for ``wanted`` before, if every one is still there."""
    record = _record(wanted)
    if not record.exists():
        return None
    jars = [line for line in record.read_text().splitlines() if line]
    if not jars or not all(Path(urlsplit(jar).path).is_file() for jar in jars):
        return None
    return jars


def remember_jars(wanted: list[str], resolved: str) -> None:
    """Keep what Ivy resolved (Spark's ``spark.jars`` after start) for the next start."""
    jars = [jar for jar in resolved.split(",") if jar]
    if not jars or not all(Path(urlsplit(jar).path).is_file() for jar in jars):
        return
    write_small_text(str(_record(wanted)), "\n".join(jars) + "\n")

"""Ship the project's code to a cluster's executors, and check they can run it.

On a cluster the executors' Python has pyspark and the third-party dependencies but not this
project (nobody installs a data team's code on every worker). Spark runs Python functions that
live in ``operators`` and ``jobs`` (the stateful processors, the window computations), so the
session adds a zip of those packages (``SparkContext.addPyFile``, the same mechanism as
``spark-submit --py-files``) built from the driver's own copy, and the user's files listed in
``spark.submit.pyFiles`` (``PLATFORM_SPARK_CONF``) beside it.

Then one tiny task imports everything the jobs need on an executor. Without that check, a
missing module kills the executor inside transformWithState's state-server thread and the
driver reports only ``MetadataFetchFailedException`` after a dozen executor restarts; with it
the user reads which module is missing and on which host.
"""

from __future__ import annotations

import hashlib
import importlib.util
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROJECT_PACKAGES = ("operators", "jobs", "nexmark", "examples")
"""The packages whose functions Spark runs on executors."""

EXECUTOR_MODULES = ("pandas", "pyarrow", "numpy", "google.protobuf", "xxhash", "operators",
                    "jobs", "jobs.runtime.buckets", "jobs.windows.vectorised",
                    "jobs.streams.landing.on_spark", "jobs.live.log_source")
"""What an executor imports to run every job (protobuf: transformWithState's Python side;
xxhash: the live source's buckets)."""


class ExecutorImportError(RuntimeError):
    """An executor cannot import what the jobs need; the message names the module and host."""


def is_cluster(master: str) -> bool:
    """Whether executors run outside this process's Python environment (anything but local)."""
    return not master.startswith("local")


def package_zip(packages: Iterable[str] = PROJECT_PACKAGES, folder: Path | None = None) -> Path:
    """A zip of the packages' ``.py`` files as imported here, named by content so a re-run in
    the same folder reuses it and executors never mix two versions."""
    files: list[tuple[str, Path]] = []
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ExecutorImportError(f"cannot ship package {package!r}: not importable here")
        root = Path(next(iter(spec.submodule_search_locations)))
        files += [(str(path.relative_to(root.parent)), path)
                  for path in sorted(root.rglob("*.py")) if "__pycache__" not in path.parts]
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode())
        digest.update(path.read_bytes())
    folder = folder or Path(tempfile.gettempdir()) / "eventtime-platform-ship"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"project-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        partial = target.with_suffix(".zip.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, path in files:
                archive.write(path, name)
        partial.replace(target)
    return target


def ship_project(spark: SparkSession, extra_py_files: Iterable[str] = ()) -> list[str]:
    """Add the project's zip and the user's files to the session; what was added."""
    shipped = [str(package_zip()), *extra_py_files]
    for path in shipped:
        spark.sparkContext.addPyFile(path)
    return shipped


def check_executors(spark: SparkSession, modules: tuple[str, ...] = EXECUTOR_MODULES) -> None:
    """Import ``modules`` in one task per default-parallelism slot; raise naming what failed."""
    def import_all(_: object) -> list[tuple[str, str, str]]:
        # defined here so cloudpickle ships it by value: an executor without the project
        # must still be able to run the check that says so
        import importlib
        import socket

        failures = []
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception as error:  # noqa: BLE001 - every failure is reported, by name
                failures.append((socket.gethostname(), module,
                                 f"{type(error).__name__}: {error}"))
        return failures

    context = spark.sparkContext
    slots = max(1, context.defaultParallelism)
    try:
        failures = (context.parallelize(range(slots), slots)
                    .mapPartitions(import_all).collect())
    except Exception as error:  # the Python worker itself could not start
        first = str(error).strip().splitlines()[0][:400] if str(error).strip() else repr(error)
        raise ExecutorImportError(
            "the executors could not run Python: check that the workers have Python 3.11 with "
            "pyspark, pandas, pyarrow, protobuf and xxhash at the driver's versions, and that "
            f"PYSPARK_PYTHON names it on the workers. Spark said: {first}") from None
    if failures:
        unique = sorted(set(failures))
        listed = "; ".join(f"{module} on {host} ({reason})" for host, module, reason in unique)
        raise ExecutorImportError(
            f"executors cannot import what the jobs need: {listed}. The project's own code is "
            "shipped by the platform; third-party modules must be installed on the workers "
            "(pip install the project's dependencies there)")

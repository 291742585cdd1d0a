"""A real Spark standalone cluster on loopback, from the pyspark package's own launcher.

The master and two one-core workers run ``bin/spark-class`` from the installed pyspark (the pip
package has no ``sbin`` scripts). The workers' Python is a bare virtual environment that sees
the project's third-party dependencies but not the project itself, as on a cluster where nobody
installed it: the platform has to ship its code.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def bare_python(folder: Path) -> Path:
    """A venv whose ``sys.path`` has this venv's site-packages as a plain entry: packages
    import, but ``.pth`` hooks there (the project's editable install) are not run."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})
                ["purelib"])
    (site / "platform_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin" / "python"


@dataclass
class StandaloneCluster:
    master_url: str
    worker_python: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def start_cluster(folder: Path, workers: int = 2, memory: str = "2g",
                  node_environment: dict[str, str] | None = None) -> StandaloneCluster:
    """Master and workers on 127.0.0.1; returns once every worker has registered.
    ``node_environment``: what every node's environment holds (an object store's endpoint and
    credentials, as a cloud node gets them from its instance role); executors inherit it."""
    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    environment.update(SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1",
                       SPARK_WORKER_DIR=str(folder / "work"), SPARK_LOG_DIR=str(folder / "logs"),
                       **(node_environment or {}))
    port, ui = free_port(), free_port()
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", bare_python(folder / "worker-venv"))
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def launch(name: str, arguments: list[str]) -> None:
        with open(logs / f"{name}.log", "w") as log:
            cluster.processes.append(subprocess.Popen(
                [spark_class, *arguments], env=environment, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True))

    launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                      "--port", str(port), "--webui-port", str(ui)])
    for index in range(workers):
        launch(f"worker-{index}", ["org.apache.spark.deploy.worker.Worker", cluster.master_url,
                                   "--host", "127.0.0.1", "--cores", "1", "--memory", memory,
                                   "--webui-port", str(free_port()),
                                   "--work-dir", str(folder / "work" / str(index))])
    deadline = time.monotonic() + 90
    master_log = logs / "master.log"
    while time.monotonic() < deadline:
        text = master_log.read_text(errors="replace") if master_log.exists() else ""
        if text.count("Registering worker") >= workers:
            return cluster
        if any(p.poll() is not None for p in cluster.processes):
            break
        time.sleep(0.5)
    cluster.stop()
    raise RuntimeError(f"the standalone cluster did not start; see {logs}")

"""An Apache Kafka broker on this machine, in KRaft mode (one process, broker and controller),
in its own JVM, from the jars on Maven Central: what the suite, the demo and
``python -m jobs kafka`` start when no other broker is given.

The jars of ``org.apache.kafka:kafka_2.13`` and a Log4j 2 binding are resolved once with the
Ivy jar pyspark ships (no other tool to install), from Maven Central only, into
``~/.cache/eventtime-platform/kafka-<version>/`` (kept like the Delta jars). A broker's
folder holds its ``server.properties``, its logging settings, its data (formatted once with a
cluster id of its own: ``kafka.tools.StorageTool``) and its log (``logs/server.log``). It
listens on 127.0.0.1 only, on free ports unless given; stopping it is a SIGTERM (the broker
shuts down cleanly in about a second), then a SIGKILL after 30 s.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from jobs.session.jars import cache_folder

KAFKA_VERSION = "4.1.1"
SCALA = "2.13"
LOG4J_BINDING = ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3")
"""Kafka 4 logs through Log4j 2 but brings no SLF4J binding of its own."""
START_TIMEOUT_S = 90.0

_IVY_XML = """<ivy-module version="2.0">
  <info organisation="eventtime-platform" module="kafka-broker"/>
  <dependencies>
    <dependency org="org.apache.kafka" name="kafka_{scala}" rev="{version}"
                conf="default->default"/>
    <dependency org="{binding[0]}" name="{binding[1]}" rev="{binding[2]}"
                conf="default->default"/>
  </dependencies>
</ivy-module>
"""
_IVY_SETTINGS = """<ivysettings>
  <property name="ivy.maven.lookup.sources" value="false"/>
  <property name="ivy.maven.lookup.javadoc" value="false"/>
  <settings defaultResolver="central"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="https://repo1.maven.org/maven2/"/>
  </resolvers>
</ivysettings>
"""
_LOG4J2 = """status = warn
name = kafka-broker
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


class BrokerError(RuntimeError):
    """The broker could not be installed or started; the message says why and where to look."""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java:
        raise BrokerError("java is not on PATH (Kafka's broker runs in a JVM; Java 17 is "
                          "needed as for Spark)")
    return java


def _ivy_jar() -> Path:
    found = sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not found:
        raise BrokerError("pyspark ships no ivy-*.jar here: cannot resolve Kafka's jars")
    return found[-1]


def kafka_jars(progress: Callable[[str], None] = print) -> Path:
    """The folder of the broker's jars, resolved from Maven Central the first time (about
    30 s, 44 MB), then reused."""
    home = cache_folder() / f"kafka-{KAFKA_VERSION}"
    jars = home / "jars"
    done = home / "resolved"
    if done.is_file() and any(jars.glob("kafka_*.jar")):
        return jars
    home.mkdir(parents=True, exist_ok=True)
    (home / "ivy.xml").write_text(_IVY_XML.format(scala=SCALA, version=KAFKA_VERSION,
                                                   binding=LOG4J_BINDING))
    (home / "ivysettings.xml").write_text(_IVY_SETTINGS)
    progress(f"kafka: resolving the jars of kafka_{SCALA} {KAFKA_VERSION} from Maven Central "
             f"into {jars} (once, about 30 s)")
    partial = home / "jars.partial"
    shutil.rmtree(partial, ignore_errors=True)
    command = [_java(), "-jar", str(_ivy_jar()), "-settings", str(home / "ivysettings.xml"),
               "-cache", str(home / "ivy-cache"), "-ivy", str(home / "ivy.xml"),
               "-confs", "default", "-retrieve",
               str(partial / "[artifact]-[revision](-[classifier]).[ext]"), "-warn"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not any(partial.glob("kafka_*.jar")):
        raise BrokerError(f"resolving Kafka's jars from Maven Central failed (is "
                          f"repo1.maven.org reachable?): {(result.stderr or result.stdout)[-800:]}")
    shutil.rmtree(jars, ignore_errors=True)
    partial.rename(jars)
    done.write_text(KAFKA_VERSION)
    return jars


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@dataclass
class KafkaBroker:
    """One broker (and its controller) in a folder of its own."""

    folder: Path
    port: int = 0
    controller_port: int = 0
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "logs" / "server.log"

    def _write_settings(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        (self.folder / "server.properties").write_text("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT", "controller.listener.names=CONTROLLER",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"log.dirs={self.folder / 'data'}", "num.partitions=1",
            "default.replication.factor=1", "min.insync.replicas=1",
            "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1", "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false", "delete.topic.enable=true",
            # Records are kept until deleted: Kafka's default (7 days by record timestamp)
            # would remove a replayed history's old events minutes after they are produced.
            # A topic's own retention.ms still applies.
            "log.retention.ms=-1", ""]))
        (self.folder / "log4j2.properties").write_text(_LOG4J2)

    def _java_command(self, jars: Path, main: str, *args: str, heap: bool = False) -> list[str]:
        options = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC"] if heap else ["-Xmx256m"]
        return [_java(), *options, "-Djava.awt.headless=true",
                "-Dlog4j2.shutdownHookEnabled=false",
                f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.folder / 'logs'}",
                "-cp", f"{jars}/*", main, *args]

    def start(self, progress: Callable[[str], None] = print) -> KafkaBroker:
        """Format the folder's storage if it is new, start the broker, wait until it listens
        (about 5 s)."""
        jars = kafka_jars(progress)
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        self._write_settings()
        if not (self.folder / "data" / "meta.properties").is_file():
            cluster = subprocess.run(self._java_command(jars, "kafka.tools.StorageTool",
                                                        "random-uuid"),
                                     capture_output=True, text=True, check=False)
            cluster_id = cluster.stdout.strip().splitlines()[-1] if cluster.stdout else ""
            formatted = subprocess.run(self._java_command(
                jars, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                str(self.folder / "server.properties")), capture_output=True, text=True,
                check=False)
            if cluster.returncode or formatted.returncode:
                raise BrokerError(f"formatting Kafka's storage in {self.folder} failed: "
                                  f"{(formatted.stderr or formatted.stdout)[-600:]}")
        output = (self.folder / "logs" / "stdout.log").open("ab")
        self.process = subprocess.Popen(
            self._java_command(jars, "kafka.Kafka", str(self.folder / "server.properties"),
                               heap=True),
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(self.port):
            if self.process.poll() is not None:
                raise BrokerError(f"the Kafka broker exited ({self.process.returncode}) before "
                                  f"listening; its log: {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(f"the Kafka broker did not listen on {self.bootstrap_servers} "
                                  f"within {START_TIMEOUT_S:g} s; its log: {self.log}")
            time.sleep(0.2)
        progress(f"kafka: broker listening on {self.bootstrap_servers} (data in {self.folder})")
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a clean shutdown, about a second), SIGKILL if it does not end in time."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@contextmanager
def running_broker(folder: Path, port: int = 0,
                   progress: Callable[[str], None] = print) -> Iterator[KafkaBroker]:
    """A broker for the duration of a block (the suite's, the demo's)."""
    broker = KafkaBroker(folder, port).start(progress)
    try:
        yield broker
    finally:
        broker.stop()


def create_topics(servers: str, topics: dict[str, int], timeout_s: float = 30.0) -> None:
    """Create the topics that are not there yet, each with its number of partitions (a
    topic that exists keeps its own)."""
    if not topics:
        return
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers, "log_level": "0"})
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    new = [NewTopic(name, count, 1) for name, count in topics.items() if name not in existing]
    if not new:
        return
    for future in admin.create_topics(new, operation_timeout=timeout_s).values():
        future.result(timeout=timeout_s)

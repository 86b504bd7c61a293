"""Apache Kafka as a peer in `make bench`: one KRaft node (broker and controller in one JVM) per profile.

Why Kafka: it is what pybroker stands in for, so the goals of issue 34 are ratios to it, in one run on the
same machine, with the same client fleet and grid. It runs in two profiles:

- `kafka`: Kafka's defaults. An acks=all produce is answered once the records are in the page cache (with one
  replica, acks=all waits for nothing more); the OS writes them back later.
- `kafka-fsync`: `log.flush.interval.messages=1`, pybroker's durability. Kafka's log flushes (fsyncs the
  active segment) on the append path whenever its unflushed messages reach that count, so every append is
  on disk before the produce is answered. `log.flush.interval.ms` need not be set: it is a second, timed
  trigger (unset, it falls back to the flush scheduler, which never fires by default), and with a count of
  1 there is never anything left for it.

Both use the same version the tests use (the jars `make kafka` resolved, `tests/kafka_node.py`) and the
JVM flags Kafka's own start scripts use (`JVM_FLAGS`: a 1 GB heap, G1), stated in the output. Everything
not named in `PROFILES` is Kafka's default, except what one node needs (internal topics with one replica)
and two settings pybroker is given in the bench too: `group.initial.rebalance.delay.ms=0` (a lone consumer
should not wait 3 s for others) and `DELETE_SOON` (`bench/grid.py`: a deleted topic's files go a second
after the deletion, so the grid can wait for them between phases).

The harness starts these as it starts every target (`bench/run.py`, `tests/integration/brokers.py`): the
process is `java` itself (so its pid is the JVM's: CPU seconds and peak RSS are read from its `/proc`), and
it is ready at its first Metadata answer listing a broker, timed from the process start as every target is
(`bench/readiness.py`, `ready_at`; the
storage format before it is a separate, untimed step: `format_seconds`). Blocking; call from the harness's
main thread.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bench.grid import DELETE_SOON
from bench.readiness import ReadyByMetadata
from tests.integration.brokers import BrokerProcess, free_port
from tests.kafka_node import format_command, java_command, kafka_version, kraft_properties

#: the two profiles: name -> broker settings on top of Kafka's defaults
PROFILES: dict[str, dict[str, str]] = {
    "kafka": {},
    "kafka-fsync": {"log.flush.interval.messages": "1"},
}
STORAGE = {
    "kafka": "Kafka's defaults: acks=all answered from the page cache",
    "kafka-fsync": "log.flush.interval.messages=1: fsync of every append before acks=all is answered",
}
DEFAULT_HEAP = "1g"


def jvm_flags(heap: str = DEFAULT_HEAP) -> list[str]:
    """What Kafka's start scripts give a broker (`-Xmx1G -Xms1G`, G1 with a 20 ms pause goal), with `heap`;
    and no perf data file (two JVMs racing over its directory printed warnings)."""
    return [f"-Xms{heap}", f"-Xmx{heap}", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
            "-Djava.awt.headless=true", "-XX:-UsePerfData"]


def java_version() -> str:
    """`java -version`'s first line, e.g. 'openjdk version "17.0.15" 2025-04-15'; '?' where it cannot run."""
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "?"
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0] if lines else "?"


def describe(heap: str = DEFAULT_HEAP) -> str:
    """The line the bench prints (and keeps in its JSON) about Kafka: version, Java, JVM flags, profiles."""
    profiles = "; ".join(f"{name}: " + (", ".join(f"{k}={v}" for k, v in PROFILES[name].items()) or "defaults")
                         for name in PROFILES)
    return (f"Apache Kafka {kafka_version()} (one KRaft node: broker and controller in one JVM), {java_version()}, "
            f"JVM flags: {' '.join(jvm_flags(heap))}; profiles: {profiles}; both with "
            "group.initial.rebalance.delay.ms=0, as pybroker")


class KafkaProcess(ReadyByMetadata, BrokerProcess):
    """One profile's Kafka node under `workdir`, started, checked and stopped like any bench target."""

    supports_restart = False
    supports_overrides = True

    def __init__(self, workdir: Path, name: str = "kafka", heap: str = DEFAULT_HEAP,
                 startup_timeout: float = 180.0) -> None:
        self.name = name  # before the base class names its log file after it
        self.jvm = jvm_flags(heap)
        super().__init__(workdir, PROFILES[name], startup_timeout=startup_timeout)
        self.controller_port = free_port()
        self.config_path = self.workdir / "server.properties"
        self.format_seconds = float("nan")

    def properties(self) -> dict[str, str]:
        return {**kraft_properties(self.port, self.controller_port, self.log_dirs[0]), **DELETE_SOON, **self.overrides}

    def _write_config(self) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))

    def start(self) -> KafkaProcess:
        """Format the log dir once (not timed as start-up), then start the JVM and wait for Metadata."""
        if self.format_seconds != self.format_seconds:
            self._write_config()
            began = time.monotonic()
            with open(self.log_path, "ab") as log:
                subprocess.run(format_command(self.config_path), stdout=log, stderr=subprocess.STDOUT, check=True,
                               timeout=120)
            self.format_seconds = time.monotonic() - began
        super().start()
        return self

    def command(self) -> list[str]:
        self._write_config()  # the port changes if the first one was taken
        return java_command("kafka.Kafka", str(self.config_path), jvm=self.jvm)

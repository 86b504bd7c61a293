"""Apache Kafka's own command-line tools, run from the resolved jars against a broker.

A Maven resolve has no `bin/*.sh`: each tool is `java -cp 'libs/*' <main class> ...`, the class its
script in Kafka's `bin/` runs (`TOOLS` names them by script). Every run is its own JVM (about 1 s on an
idle machine, several under load), with a small heap, the client compiler only, and slf4j-simple at WARN
so that what a test reads is the tool's own output, not the client's config dump.

`run` blocks until the tool exits (or its timeout kills it) and returns its output; `start` leaves a
long-running tool (a console consumer, a verifiable consumer) running for the test to stop. `both` runs
the same command against pybroker and the Kafka node at once, one thread each, so a comparison costs one
JVM start of wall time, not two. Blocking; call from the test's thread.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.kafka_node import kafka_home

TOOL_TIMEOUT = 120.0
#: -XX:-UsePerfData: no /tmp/hsperfdata file, whose clash with another JVM's prints a warning into the output
JVM = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-UsePerfData",
       "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
BOOTSTRAP = "{bootstrap}"  # replaced by the broker's address in every argument

#: script name -> main class, as Kafka 4's bin/*.sh run them
TOOLS: dict[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
}

#: lines the JVM or the tool prints about itself, never about the broker
_NOISE = re.compile(r"deprecated|KIP-848|kafka-version\.properties|^SLF4J:|^OpenJDK .*warning|has no active members|^Processed a total of \d+ messages"
                    r"|^\[[\d.]+s\]\[warning\]\[cds", re.IGNORECASE)


@dataclass(frozen=True)
class ToolResult:
    tool: str
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        """stdout's non-empty lines, trailing blanks stripped."""
        return [line.rstrip() for line in self.stdout.splitlines() if line.strip()]

    def errors(self) -> list[str]:
        """stderr's lines that are not the JVM's or the tool's notes about itself."""
        return [line for line in self.stderr.splitlines() if line.strip() and not _NOISE.search(line)]

    def check(self) -> ToolResult:
        """Self, if the tool exited 0 and printed no error; else fail with everything it said."""
        assert self.code == 0 and not self.errors(), (
            f"{self.tool} {' '.join(self.args)} exited {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")
        return self


#: the class-data archive every tool's JVM maps (`make_archive`), once made
_archive: list[Path] = []


def make_archive(path: Path, bootstrap: str) -> None:
    """Record the classes an admin tool loads into a class-data-sharing archive at `path` (one JVM run that
    dumps them at exit), so every later tool maps them instead of loading and verifying them again: it
    halves a tool's CPU time at start (0.86 s to 0.43 s measured here), which is most of what a tool costs.
    A JVM that cannot use the archive (another Java, other jars) warns and runs without it."""
    done = subprocess.run(["java", *JVM, f"-XX:ArchiveClassesAtExit={path}", "-cp",
                           str(kafka_home() / "libs" / "*"), TOOLS["kafka-topics"], "--bootstrap-server",
                           bootstrap, "--list"], capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False)
    if done.returncode == 0 and path.exists():
        _archive[:] = [path]


def command(tool: str, args: Sequence[str], bootstrap: str) -> list[str]:
    sharing = [f"-XX:SharedArchiveFile={_archive[0]}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"] if _archive else []
    return ["java", *JVM, *sharing, "-cp", str(kafka_home() / "libs" / "*"), TOOLS[tool],
            *(arg.replace(BOOTSTRAP, bootstrap) for arg in args)]


def run(tool: str, bootstrap: str, *args: str, stdin: str | None = None,
        timeout: float = TOOL_TIMEOUT) -> ToolResult:
    """Run one tool to its end; `{bootstrap}` in an argument becomes `bootstrap`."""
    done = subprocess.run(command(tool, args, bootstrap), input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return ToolResult(tool, args, done.returncode, done.stdout, done.stderr)


def start(tool: str, bootstrap: str, *args: str) -> subprocess.Popen[str]:
    """A long-running tool, its stdout a pipe (stderr dropped: nobody reads it, and a full pipe would stall
    the tool); the caller stops it (terminate, wait) and closes its stdout."""
    return subprocess.Popen(command(tool, args, bootstrap), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True)


@dataclass(frozen=True)
class Targets:
    """pybroker's and the Kafka node's client listeners."""

    ours: str
    kafkas: str

    def both(self, tool: str, *args: str, stdin: str | None = None,
             timeout: float = TOOL_TIMEOUT) -> tuple[ToolResult, ToolResult]:
        """The same tool and arguments against both brokers at once: (pybroker's result, Kafka's result)."""
        with ThreadPoolExecutor(2) as pool:
            mine = pool.submit(run, tool, self.ours, *args, stdin=stdin, timeout=timeout)
            theirs = pool.submit(run, tool, self.kafkas, *args, stdin=stdin, timeout=timeout)
            return mine.result(), theirs.result()

    def same(self, tool: str, *args: str, normalize: Callable[[str], str] = lambda text: text,
             stdin: str | None = None) -> tuple[ToolResult, ToolResult]:
        """Run against both, require both to succeed, and require the same (normalized) output."""
        mine, theirs = self.both(tool, *args, stdin=stdin)
        mine.check()
        theirs.check()
        assert normalize(mine.stdout) == normalize(theirs.stdout), (
            f"{tool} {' '.join(args)} differs from Kafka's\n--- pybroker\n{mine.stdout}\n--- Kafka\n{theirs.stdout}")
        return mine, theirs

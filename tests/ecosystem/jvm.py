"""Java programs of the ecosystem tests: compiled once per session against Kafka's client jars, run as tours.

The programs live beside this file (`java/*.java`). `compile_programs` runs `javac` once into a directory the
session owns (a few seconds); `Tour.run` starts one JVM for one tour and parses the JSON line each step prints
(see `java/ClientTour.java`). The jars are the ones `make kafka` resolved for the oracle (tests/kafka_node.py),
so the clients are exactly the Kafka version the tests pin.

Everything here is blocking and runs on the test's own thread.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.kafka_node import kafka_home, kafka_version, required

SOURCES = Path(__file__).parent / "java"
#: a small heap and a quick JIT: the tours are short, and two cores are shared with the broker
JVM_FLAGS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
             "-XX:-UsePerfData"]  # no /tmp/hsperfdata file: a clash with another JVM's prints a warning
TOUR_TIMEOUT_S = 180.0


ENV_ECOSYSTEM = "PYBROKER_ECOSYSTEM_HOME"


def ecosystem_home() -> Path:
    """Where `make ecosystem` put Kafka Streams' jars (tests/ecosystem/pom.xml)."""
    configured = os.environ.get(ENV_ECOSYSTEM)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "pybroker" / f"ecosystem-{kafka_version()}"


def ecosystem_missing() -> str | None:
    if not (ecosystem_home() / ".resolved").exists():
        return f"Kafka Streams {kafka_version()} is not resolved in {ecosystem_home()}: run `make ecosystem`"
    return None


ENV_CONNECT = "PYBROKER_CONNECT_HOME"


def connect_home() -> Path:
    """Where `make connect` put Kafka Connect, its file connectors and MirrorMaker 2."""
    configured = os.environ.get(ENV_CONNECT)
    if configured:
        return Path(configured)
    pom = (SOURCES.parent / "connect" / "pom.xml").read_text()
    version = pom.split("<connect.version>")[1].split("</connect.version>")[0].strip()
    return Path.home() / ".cache" / "pybroker" / f"connect-{version}"


def connect_missing() -> str | None:
    if not (connect_home() / ".resolved").exists():
        return f"Kafka Connect is not resolved in {connect_home()}: run `make connect`"
    return None


def classpath(classes: Path) -> str:
    return f"{classes}:{ecosystem_home() / 'libs' / '*'}:{kafka_home() / 'libs' / '*'}"


def compile_programs(classes: Path) -> Path:
    """javac every program here into `classes`; a compile error fails with javac's own words."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac (a JDK 17+) is needed for the Java client tests: `make java` installs one")
    classes.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p) for p in SOURCES.glob("*.java"))
    done = subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", classpath(classes), *sources],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}\n{done.stderr}")
    return classes


@dataclass
class Steps:
    """The lines one tour printed, by step name (a repeated step keeps every line, in order)."""

    lines: list[dict[str, Any]]
    stderr: str

    def __getitem__(self, step: str) -> dict[str, Any]:
        found = [line for line in self.lines if line["step"] == step]
        assert found, f"no step {step!r} in the tour's output; stderr tail:\n{self.stderr[-3000:]}"
        return found[-1]

    def all(self, step: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["step"] == step]

    def outcomes(self) -> dict[str, tuple[bool, str | None]]:
        """step -> (ok, the exception's class name or None): what two brokers' tours are compared on."""
        return {line["step"]: (line["ok"], line.get("error")) for line in self.lines}


@dataclass
class Tours:
    classes: Path

    def run(self, tour: str, bootstrap: str, *args: str, timeout: float = TOUR_TIMEOUT_S,
            main: str = "ClientTour") -> Steps:
        command = ["java", *JVM_FLAGS, "-cp", classpath(self.classes), main, tour, bootstrap, *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0:
            raise AssertionError(f"tour {tour} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}")
        return Steps(lines, done.stderr)


def need(reason: str | None) -> None:
    """Nothing when `reason` is None; else skip with it, or fail under `make test` (which resolves everything)."""
    if reason is not None:
        if required():
            pytest.fail(reason)
        pytest.skip(reason)

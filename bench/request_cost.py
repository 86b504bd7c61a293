"""pybroker's CPU per produce request, from pre-encoded frames: the broker's own cost, without librdkafka.

Why: the throughput grid runs stock clients beside the broker on the same 2 cores, and its figures move with
the host (the disk's state, the hypervisor) by more than most changes to the broker's request path are
worth, so a change that saves a tenth of the broker's CPU per request can vanish in it. Here the client
does almost nothing: it builds each produce request once (one partition, one batch of RECORDS records,
a valid CRC; the broker patches the offsets in place as always) and only writes the same bytes again
over CONNECTIONS plain sockets, WINDOW requests in flight on each (librdkafka's default is 5), and reads
the answers. The figure is the broker process's user and system CPU time (`/proc/<pid>/stat`, every
thread: the loop, the flushers, the page-cache thread) per request and per GB of payload, over REQUESTS
requests, so it reads the same on a busy or slow machine as long as the broker's work is the same.

A fresh broker per run, every case on one topic per partition count; acks=all, so each request costs
what the grid's produce does (receive, validate, append, group-commit fsync, answer).

    .venv/bin/python -m bench.request_cost [--requests N]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.grid import cpu_times, create_topic  # noqa: E402
from pybroker.protocol.frame_codec import encode_request  # noqa: E402
from pybroker.protocol.messages.produce import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pybroker.protocol.records.record import Record, build_batch  # noqa: E402
from tests.integration.brokers import BrokerProcess, kill_all  # noqa: E402

CONNECTIONS = 4
WINDOW = 5
PRODUCE_VERSION = 9
#: (record bytes, records per request, partitions): the grid's 1 KiB requests over one and 1,024
#: partitions (librdkafka sends one partition per request there), and 1 MB requests of 10 KiB records
CASES = ((1024, 256, 1), (1024, 256, 1024), (10240, 100, 16))
REQUESTS = 6000
#: how long the broker may take to stop (it fsyncs whatever acks=1 data is still unsynced)
STOP_S = 180.0

T = TypeVar("T")


@dataclass
class RequestCost:
    size: int
    records: int
    partitions: int
    requests: int
    seconds: float
    user_s: float
    system_s: float

    @property
    def payload_gb(self) -> float:
        return self.requests * self.records * self.size / 1e9

    def per_request_us(self, cpu_s: float) -> float:
        return 1e6 * cpu_s / self.requests if self.requests else float("nan")

    def per_gb(self, cpu_s: float) -> float:
        return cpu_s / self.payload_gb if self.requests else float("nan")


def produce_frames(topic: str, size: int, records: int, partitions: int, acks: int = -1) -> list[bytes]:
    """One produce request per partition (acks=all unless told), each a whole frame (size prefix included)."""
    batch = build_batch([Record(i, 0, None, b"x" * size) for i in range(records)],
                        base_timestamp=int(time.time() * 1000))
    return [encode_request(ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=p, records=batch)])]), PRODUCE_VERSION, p)
        for p in range(partitions)]


def _read_answers(sock: socket.socket, count: int, window: threading.Semaphore, failures: list[str]) -> None:
    reader = sock.makefile("rb", buffering=1 << 16)
    try:
        for _ in range(count):
            head = reader.read(4)
            if len(head) < 4:
                failures.append("the broker closed the connection")
                return
            (length,) = struct.unpack(">i", head)
            reader.read(length)
            window.release()
    except OSError as exc:
        failures.append(repr(exc))
    finally:
        reader.close()


def _send(address: tuple[str, int], frames: list[bytes], first: int, count: int, failures: list[str]) -> None:
    """`count` requests over one connection, partitions taken in turn from `first`, WINDOW in flight."""
    window = threading.Semaphore(WINDOW)
    with socket.create_connection(address, timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = threading.Thread(target=_read_answers, args=(sock, count, window, failures), daemon=True)
        reader.start()
        for i in range(count):
            if not window.acquire(timeout=60) or failures:
                failures.append("no answer within 60 s")
                break
            sock.sendall(frames[(first + i * CONNECTIONS) % len(frames)])
        reader.join(60)


def measure(broker: BrokerProcess, size: int, records: int, partitions: int, requests: int,
            acks: int = -1) -> RequestCost:
    topic = f"request-cost-{size}-{records}-{partitions}"
    create_topic(broker.bootstrap, topic, partitions)
    frames = produce_frames(topic, size, records, partitions, acks)
    host, port = broker.bootstrap.rsplit(":", 1)
    each = requests // CONNECTIONS
    failures: list[str] = []
    senders = [threading.Thread(target=_send, args=((host, int(port)), frames, k, each, failures), daemon=True)
               for k in range(CONNECTIONS)]
    user0, system0 = cpu_times(broker.pid)
    started = time.perf_counter()
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    seconds = time.perf_counter() - started
    user1, system1 = cpu_times(broker.pid)
    if failures:
        raise RuntimeError(f"request cost {size} B x{records} over {partitions}p: {failures[0]}")
    return RequestCost(size, records, partitions, each * CONNECTIONS, seconds, user1 - user0, system1 - system0)


def run(workdir: Path | None = None, requests: int = REQUESTS,
        cases: tuple[tuple[int, int, int], ...] = CASES, *, acks: int = -1,
        overrides: dict[str, str] | None = None) -> list[RequestCost]:
    """A fresh pybroker (with `overrides`), every case in turn, and the broker stopped again."""
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-request-cost-", dir=workdir) as tmp:
        broker = BrokerProcess(Path(tmp) / "pybroker", overrides)
        try:
            broker.start()
            results = []
            for size, records, partitions in cases:
                print(f"  [pybroker] CPU per request: {records} x {size} B over {partitions} partition(s), "
                      f"{requests:,} requests ...", flush=True)
                results.append(measure(broker, size, records, partitions, requests, acks))
            broker.stop(STOP_S)  # acks 0/1 data not yet fsynced is flushed at shutdown: 1,024 logs of it
        finally:
            broker.close()
    return results


def print_table(results: list[RequestCost]) -> None:
    print(f"\n== pybroker CPU per produce request (pre-encoded frames, no librdkafka; acks=all; {CONNECTIONS} "
          f"connections x {WINDOW} in flight; user and system CPU of the whole broker process) ==")
    print(f"  {'request':<26}{'req/s':>8}{'MB/s':>8}{'user us/req':>13}{'sys us/req':>12}"
          f"{'user s/GB':>11}{'sys s/GB':>10}")
    for r in results:
        case = f"{r.records} x {r.size} B, {r.partitions}p"
        print(f"  {case:<26}{r.requests / r.seconds:>8,.0f}{r.payload_gb * 1000 / r.seconds:>8,.0f}"
              f"{r.per_request_us(r.user_s):>13,.0f}{r.per_request_us(r.system_s):>12,.0f}"
              f"{r.per_gb(r.user_s):>11.2f}{r.per_gb(r.system_s):>10.2f}")


def measured_alone(measure: Callable[[], list[T]], show: Callable[[list[T]], None]) -> int:
    """A measurement run on its own (`main` of this module and of `bench.fetch_cost`): every broker it
    started is killed however it ends, then its figures are printed."""
    try:
        results = measure()
    finally:
        kill_all()
    show(results)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=REQUESTS, help="requests per case")
    args = parser.parse_args(argv)
    return measured_alone(lambda: run(requests=args.requests), print_table)


if __name__ == "__main__":
    sys.exit(main())

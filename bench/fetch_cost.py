"""One consumer's fetch round trip, from pre-encoded frames: pybroker beside the null broker.

Why: librdkafka keeps one fetch in flight per connection, so a consumer of one partition reads one answer
(about 1 MB of 10 KiB records) per round trip, and what the broker spends before an answer's first byte
leaves is added to every round trip. The grid's consume cell shows the sum of that and of everything the
clients do, on shared cores, and moves by more than a tenth from run to run; this shows the round trip
alone. One plain socket sends the same fetch requests librdkafka would (Fetch v12, no session, one
partition, 1 MiB per partition), one in flight, over offsets spread across the partition, and reads each
answer whole; the figures are the round trip's median and p99, and the broker process's user and system CPU
per fetch (`/proc/<pid>/stat`, every thread). The null broker (`bench/null_broker.py`) answers from memory
with no lookup: its round trip is what the client and the sockets cost.

    .venv/bin/python -m bench.fetch_cost [--fetches N]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.grid import NullBrokerProcess, cpu_times, create_topic  # noqa: E402
from bench.request_cost import measured_alone, produce_frames  # noqa: E402
from pybroker.protocol.frame_codec import encode_request  # noqa: E402
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from tests.integration.brokers import BrokerProcess  # noqa: E402

FETCH_VERSION = 12  # topic names, not ids: the null broker serves no topic ids
PARTITION_MAX_BYTES = 1 << 20  # librdkafka's max.partition.fetch.bytes
MAX_BYTES = 52_428_800  # librdkafka's fetch.max.bytes
#: record bytes and records per produced batch: the grid's 10 KiB cell, ~1 MB batches as librdkafka makes
SIZE = 10240
RECORDS_PER_BATCH = 97
BATCHES = 400  # ~400 MB in the partition: fetches are spread over it
FETCHES = 3000
WARM_UP = 200  # fetches not timed: the first reads of each part of the file, the broker's first answers


@dataclass
class FetchCost:
    target: str
    fetches: int
    answer_bytes: int
    seconds: float
    p50_us: float
    p99_us: float
    user_s: float
    system_s: float

    def per_fetch_us(self, cpu_s: float) -> float:
        return 1e6 * cpu_s / self.fetches if self.fetches else float("nan")


def fetch_frames(topic: str, end: int, step: int) -> list[bytes]:
    """Whole frames (size prefix included) fetching partition 0 of `topic` from offsets 0, step, ... < end."""
    return [encode_request(FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=MAX_BYTES, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                partition_max_bytes=PARTITION_MAX_BYTES)])]),
        FETCH_VERSION, i) for i, offset in enumerate(range(0, max(1, end - step), step))]


def _recv_exactly(sock: socket.socket, view: memoryview, size: int) -> None:
    got = 0
    while got < size:
        n = sock.recv_into(view[got:size], size - got)
        if not n:
            raise ConnectionError("the broker closed the connection")
        got += n


def measure(target: str, broker: BrokerProcess, topic: str, end: int, fetches: int) -> FetchCost:
    """`fetches` round trips (after WARM_UP untimed ones) on one connection, one fetch in flight."""
    frames = fetch_frames(topic, end, RECORDS_PER_BATCH)
    host, port = broker.bootstrap.rsplit(":", 1)
    buffer = bytearray(4 << 20)
    view = memoryview(buffer)
    times: list[float] = []
    answer = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        user0 = system0 = started = 0.0
        for i in range(WARM_UP + fetches):
            if i == WARM_UP:
                user0, system0 = cpu_times(broker.pid)
                started = time.perf_counter()
            sent_at = time.perf_counter()
            sock.sendall(frames[i % len(frames)])
            _recv_exactly(sock, view, 4)
            (answer,) = struct.unpack_from(">i", buffer)
            if not 0 < answer <= len(buffer):
                raise ConnectionError(f"an answer of {answer} bytes")
            _recv_exactly(sock, view, answer)
            if i >= WARM_UP:
                times.append(time.perf_counter() - sent_at)
        seconds = time.perf_counter() - started
        user1, system1 = cpu_times(broker.pid)
    times.sort()
    return FetchCost(target, fetches, answer, seconds, 1e6 * statistics.median(times),
                     1e6 * times[min(len(times) - 1, int(0.99 * len(times)))], user1 - user0, system1 - system0)


def _fill(broker: BrokerProcess, topic: str) -> int:
    """BATCHES produce requests of one ~1 MB batch each to partition 0; the partition's end offset."""
    (frame,) = produce_frames(topic, SIZE, RECORDS_PER_BATCH, 1, acks=1)
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        reader = sock.makefile("rb")
        for _ in range(BATCHES):
            sock.sendall(frame)
            (length,) = struct.unpack(">i", reader.read(4))
            reader.read(length)
        reader.close()
    return BATCHES * RECORDS_PER_BATCH


def run(workdir: Path | None = None, fetches: int = FETCHES, *, overrides: dict[str, str] | None = None,
        null: bool = True) -> list[FetchCost]:
    """pybroker (its defaults, or `overrides`) and the null broker (unless not `null`), each fresh, each
    filled alike and fetched from."""
    results = []
    targets: list[tuple[str, Any]] = [("pybroker", lambda path: BrokerProcess(path, overrides))]
    if null:
        targets.append(("null broker", NullBrokerProcess))
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-fetch-cost-", dir=workdir) as tmp:
        for target, kind in targets:
            broker = kind(Path(tmp) / target.replace(" ", "-"))
            try:
                broker.start()
                topic = f"fetch-cost-s{SIZE}-p1-x"  # the null broker reads the record size and partitions here
                if target == "pybroker":
                    create_topic(broker.bootstrap, topic, 1)
                end = _fill(broker, topic)
                print(f"  [{target}] fetch round trip: {fetches:,} fetches of 1 MiB ...", flush=True)
                results.append(measure(target, broker, topic, end, fetches))
            finally:
                broker.close()
    return results


def print_table(results: list[FetchCost]) -> None:
    print(f"\n== one consumer's fetch round trip (pre-encoded Fetch v{FETCH_VERSION}, one partition of "
          f"{SIZE // 1024} KiB records, {PARTITION_MAX_BYTES >> 20} MiB per fetch, one in flight; CPU: the whole "
          f"broker process) ==")
    print(f"  {'target':<14}{'fetch/s':>9}{'answer B':>11}{'p50 us':>9}{'p99 us':>9}{'user us':>9}{'sys us':>8}")
    for r in results:
        print(f"  {r.target:<14}{r.fetches / r.seconds:>9,.0f}{r.answer_bytes:>11,}{r.p50_us:>9,.0f}"
              f"{r.p99_us:>9,.0f}{r.per_fetch_us(r.user_s):>9,.0f}{r.per_fetch_us(r.system_s):>8,.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--fetches", type=int, default=FETCHES, help="timed fetches per target")
    parser.add_argument("--pybroker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for pybroker (repeatable; the defaults are what is measured)")
    parser.add_argument("--skip-ceiling", action="store_true", help="pybroker alone, no null broker")
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.pybroker_config)
    return measured_alone(lambda: run(fetches=args.fetches, overrides=overrides, null=not args.skip_ceiling),
                          print_table)


if __name__ == "__main__":
    sys.exit(main())

"""Request latency with and without a large clean running: does the log cleaner stall the broker?

One broker process, one data dir, two runs:
1. `log.cleaner.enable=false`: a topic is filled with VERSIONS versions of KEYS keys (so almost all of
   it is garbage once compacted), then a probe measures produce and fetch round trips on another topic;
2. the same dir restarted with the cleaner on; once the probe has warmed up, the big topic is switched
   to `cleanup.policy=compact` (IncrementalAlterConfigs), which starts its clean, and the same probe runs
   for as long as the clean takes.

Both runs first probe for `--warmup-seconds` and drop those round trips: the first seconds after a
restart (first connection, caches, the allocator) are slower whatever the cleaner does, and a clean that
started with the broker would be charged for them.

The probe is one connection sending, at a fixed rate, a Produce (acks=1, one 100 B record) then a
Fetch (max_wait 0) of what it just wrote: both are answered on the event loop, which is exactly what a
cleaner thread competing for the interpreter could delay. Reports p50/p99/max per request type.

    .venv/bin/python bench/cleaner_latency.py [--keys N] [--versions N] [--rate N] [--set KEY=VALUE]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import platform
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pybroker.protocol.frame_codec import decode_response, encode_request  # noqa: E402
from pybroker.protocol.messages.create_topics import (  # noqa: E402
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from pybroker.protocol.messages.incremental_alter_configs import (  # noqa: E402
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pybroker.protocol.messages.produce import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pybroker.protocol.records.record import Record, build_batch  # noqa: E402
from pybroker.storage.checkpoints import read_checkpoint  # noqa: E402
from tests.integration.brokers import BrokerProcess  # noqa: E402

PRODUCE_V, FETCH_V, CREATE_V, ALTER_V = 9, 12, 5, 0
TOPIC_RESOURCE, SET = 2, 0
#: the big topic's segment.ms: short enough that one append after the fill rolls the active segment
ROLL_MS = 3000


class Client:
    """Blocking request/response over our own codecs: nothing between the clock and the broker."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ids = itertools.count(1)

    def call(self, request: Any, version: int) -> Any:
        self.sock.sendall(encode_request(request, version, next(self.ids)))
        (size,) = struct.unpack(">i", self._exactly(4))
        return decode_response(self._exactly(size), type(request).API_KEY, version)[1]

    def _exactly(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def create(client: Client, topic: str, **configs: str) -> None:
    answer = client.call(CreateTopicsRequest(topics=[CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(k, v) for k, v in configs.items()])]), CREATE_V)
    assert answer.topics[0].error_code == 0, answer


def set_topic_config(client: Client, topic: str, name: str, value: str) -> None:
    answer = client.call(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configs=[AlterableConfig(name, SET, value)])]), ALTER_V)
    assert answer.responses[0].error_code == 0, answer


def produce(client: Client, topic: str, records: list[Record], acks: int = 1) -> int:
    batch = build_batch(records, base_timestamp=int(time.time() * 1000))
    answer = client.call(ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]), PRODUCE_V)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return int(part.base_offset)


def fetch(client: Client, topic: str, offset: int) -> None:
    answer = client.call(FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]),
        FETCH_V)
    assert answer.responses[0].partitions[0].error_code == 0


def fill(client: Client, topic: str, keys: int, versions: int, batch: int = 1000) -> int:
    """`versions` x `keys` records of ~100 B, 1000 to a batch; returns the bytes sent."""
    sent = 0
    value = b"x" * 80
    for version in range(versions):
        for start in range(0, keys, batch):
            records = [Record(i, 0, b"key-%09d" % (start + i), value + b"%d" % version)
                       for i in range(min(batch, keys - start))]
            produce(client, topic, records)
            sent += sum(len(r.value or b"") + 13 for r in records)
    return sent


def rss_mb(pid: int) -> float:
    """A process's resident set (VmRSS) in MB; 0 when it is gone or the platform has no /proc."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children_of(pid: int) -> list[int]:
    """The direct children of a process, whichever of its threads started them (the cleaner's worker is
    started by a cleaner thread), from /proc."""
    found = []
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in path.read_text().split()]
    return found


class RssSampler:
    """The broker's RSS and its children's (the cleaner worker), sampled while the probe runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.broker: list[float] = []
        self.children: list[float] = []
        self._next = 0.0

    def sample(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 0.1
        self.broker.append(rss_mb(self.pid))
        self.children.append(sum(rss_mb(child) for child in children_of(self.pid)))


def probe(client: Client, topic: str, rate: int, until: Any,
          sampler: RssSampler | None = None) -> tuple[list[float], list[float]]:
    """Produce+fetch pairs at `rate` per second until `until()`; the round trips in ms."""
    produce_ms: list[float] = []
    fetch_ms: list[float] = []
    interval = 1 / rate
    due = time.perf_counter()
    record = [Record(0, 0, b"probe", b"p" * 100)]
    while not until():
        if sampler is not None:
            sampler.sample()
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        due += interval
        started = time.perf_counter()
        offset = produce(client, topic, record)
        middle = time.perf_counter()
        fetch(client, topic, offset)
        ended = time.perf_counter()
        produce_ms.append((middle - started) * 1000)
        fetch_ms.append((ended - middle) * 1000)
    return produce_ms, fetch_ms


def warm_up(client: Client, topic: str, args: argparse.Namespace) -> None:
    """Probe for the warm-up seconds after a restart, and forget the round trips."""
    deadline = time.monotonic() + args.warmup_seconds
    probe(client, topic, args.rate, lambda: time.monotonic() > deadline)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


def row(name: str, values: list[float]) -> str:
    return (f"  {name:<28} {len(values):>7} {percentile(values, 50):>8.2f} {percentile(values, 99):>8.2f} "
            f"{max(values, default=float('nan')):>8.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--rate", type=int, default=200, help="probe produce+fetch pairs per second")
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    parser.add_argument("--warmup-seconds", type=float, default=3.0,
                        help="probing after each restart that is not counted")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config override for both runs (e.g. log.cleaner.process.enable=false: "
                             "the clean on a broker thread)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="cleaner-bench-"))
    common = {"log.cleaner.backoff.ms": "200", "log.cleaner.dedupe.buffer.size": str(64 << 20),
              **dict(item.split("=", 1) for item in args.set)}
    broker = BrokerProcess(workdir, {**common, "log.cleaner.enable": "false"})
    big, probe_topic = "big-compacted", "probe"
    try:
        broker.start()
        client = Client(broker.bootstrap)
        create(client, big, **{"cleanup.policy": "delete", "segment.bytes": str(8 << 20),
                               "segment.ms": str(ROLL_MS)})
        create(client, probe_topic)
        started = time.monotonic()
        sent = fill(client, big, args.keys, args.versions)
        print(f"filled {big}: {args.keys * args.versions} records, {sent / 1e6:.1f} MB of keys and values in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        time.sleep(ROLL_MS / 1000 + 0.2)
        produce(client, big, [Record(0, 0, b"roll", b"r")])  # rolls (segment.ms): every fill batch is cleanable
        client.close()
        # the baseline runs on a freshly started broker too, so both runs start from the same RSS
        broker.restart()
        client = Client(broker.bootstrap)
        assert broker.proc is not None
        idle = RssSampler(broker.proc.pid)
        warm_up(client, probe_topic, args)
        deadline = time.monotonic() + args.baseline_seconds
        baseline = probe(client, probe_topic, args.rate, lambda: time.monotonic() > deadline, idle)
        client.close()

        broker.overrides = {**common, "log.cleaner.enable": "true"}
        broker.restart()
        client = Client(broker.bootstrap)
        assert broker.proc is not None
        busy = RssSampler(broker.proc.pid)
        checkpoint = broker.log_dirs[0] / "cleaner-offset-checkpoint"
        end = args.keys * args.versions
        warm_up(client, probe_topic, args)
        set_topic_config(client, big, "cleanup.policy", "compact")  # the clean starts now
        started = time.monotonic()

        def cleaned() -> bool:
            return read_checkpoint(checkpoint).get((big, 0), 0) >= end or time.monotonic() - started > 600

        during = probe(client, probe_topic, args.rate, cleaned, busy)
        clean_s = time.monotonic() - started
        client.close()
        size = sum(p.stat().st_size for p in (broker.log_dirs[0] / f"{big}-0").glob("*.log"))
        broker.stop()
    finally:
        broker.close()
    print(f"\npybroker cleaner latency bench ({platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cpus, {platform.system()})")
    print(f"  big topic: {args.keys} keys x {args.versions} versions of ~100 B, segment.bytes 8 MiB; "
          f"cleaned in {clean_s:.1f} s (one clean: the map holds every key) to {size / 1e6:.1f} MB on disk")
    print(f"  overrides: {' '.join(args.set) or 'none'}")
    print(f"  probe: {args.rate}/s produce (acks=1, 1 record of 100 B) + fetch (max_wait 0), one connection\n")
    print(f"  {'request (ms)':<28} {'count':>7} {'p50':>8} {'p99':>8} {'max':>8}")
    print(row("produce, no clean", baseline[0]))
    print(row("produce, large clean running", during[0]))
    print(row("fetch, no clean", baseline[1]))
    print(row("fetch, large clean running", during[1]))
    print(f"\n  broker RSS (MB): no clean peak {max(idle.broker, default=0):.0f}; large clean running peak "
          f"{max(busy.broker, default=0):.0f}; cleaner worker process peak {max(busy.children, default=0):.0f}")
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The load the benchmark puts on a broker, with confluent-kafka (librdkafka) as the client.

Why librdkafka: it is the fastest stock client, so the numbers measure the broker rather than a Python
client loop. Every phase is bounded in record count and in time; a phase that runs out of time
reports what it managed and says so instead of hanging.
"""

from __future__ import annotations

import statistics
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PHASE_TIMEOUT_S = 120.0

# Stated in the output with every figure: batching decides throughput as much as the broker does.
PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all", "enable.idempotence": False, "compression.type": "none", "linger.ms": 5,
    "batch.size": 1_000_000, "batch.num.messages": 10_000, "queue.buffering.max.messages": 200_000,
    "queue.buffering.max.kbytes": 262_144, "message.timeout.ms": 60_000,
}
# fetch.queue.backoff.ms=0: librdkafka otherwise pauses fetching for 1 s whenever its local queue passes
# queued.min.messages, which caps 100 B records at ~200k msgs/s on any broker.
CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "pybroker-bench-never-commits", "enable.auto.commit": False, "enable.partition.eof": False,
    "fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 0,
}
LATENCY_PRODUCER_SETTINGS: dict[str, Any] = {**PRODUCER_SETTINGS, "linger.ms": 0}
COMMON: dict[str, Any] = {"socket.timeout.ms": 10_000, "log_level": 3}


class Rates:
    """msgs/s and MB/s of payload from a phase's records, payload bytes and seconds (its dataclass fields)."""

    records: int
    payload_bytes: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Throughput(Rates):
    """One phase's result: records, payload bytes and seconds, plus a note if it was cut short."""

    records: int
    payload_bytes: int
    seconds: float
    note: str = ""


@dataclass
class Latency:
    """End-to-end latency samples in milliseconds (consumer receive time minus the time in the payload)."""

    rate: int
    seconds: float
    samples_ms: list[float] = field(default_factory=list)
    note: str = ""
    #: pybroker only: wakes of its event-loop watcher more than 50 ms late during the window
    loop_stalls: float | None = None

    def percentile(self, q: float) -> float:
        if not self.samples_ms:
            return float("nan")
        if len(self.samples_ms) == 1:
            return self.samples_ms[0]
        return statistics.quantiles(self.samples_ms, n=1000, method="inclusive")[int(q * 1000) - 1]


@dataclass
class LatencyWindows:
    """One broker's end-to-end latency over several windows: `bench/run.py` measures one per repetition of
    the grid, the brokers in a rotated order, each window on a fresh topic. A figure is the median over the
    windows of each window's percentile, as a grid figure is the median of its repetitions. Why: the p99 of
    one 10 s window at 1,000 msgs/s is its 100 slowest samples, so a single stall of the host of 150 ms
    is that window's p99 (once in a run of the full grid: 102 ms, where the other runs of that day gave
    1.3 to 5 ms); it moves the figure only if it recurs."""

    rate: int
    windows: list[Latency] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        values = [v for w in self.windows if (v := w.percentile(q)) == v]
        return statistics.median(values) if values else float("nan")

    @property
    def note(self) -> str:
        return "; ".join(f"window {i + 1}: {w.note}" for i, w in enumerate(self.windows) if w.note)

    @property
    def samples(self) -> int:
        return sum(len(w.samples_ms) for w in self.windows)


def create_topic(bootstrap: str, topic: str, partitions: int, extra: dict[str, Any] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **COMMON, **(extra or {})})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(15)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} did not appear with {partitions} partitions")


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int,
            settings: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> Throughput:
    """Send `records` values of `size` bytes round-robin over the partitions; time until all are acked.
    `extra`: client settings on top (e.g. the TLS ones)."""
    producer = Producer({"bootstrap.servers": bootstrap, **COMMON, **(settings or PRODUCER_SETTINGS), **(extra or {})})
    payload = bytes(range(256)) * (size // 256 + 1)
    payload = payload[:size]
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    started = time.perf_counter()
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    sent = 0
    while sent < records and time.monotonic() < deadline:
        try:
            producer.produce(topic, payload, partition=sent % partitions, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    seconds = time.perf_counter() - started
    acked = sent - left - len(failures)
    note = ""
    if sent < records or left:
        note = f"timed out after {PHASE_TIMEOUT_S:.0f}s"
    if failures:
        note += f"{'; ' if note else ''}{len(failures)} failed ({failures[0].str()})"
    return Throughput(acked, acked * size, seconds, note)


def consume(bootstrap: str, topic: str, partitions: int, records: int, size: int,
            extra: dict[str, Any] | None = None) -> Throughput:
    """Read `records` from offset 0 of every partition (assign, no group); timed from assign to the last.

    The bootstrap connection and metadata are set up before the clock starts; the leader connection and
    the first fetch are part of the measured time, as in Kafka's own consumer perf test.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, **COMMON, **CONSUMER_SETTINGS, **(extra or {})})
    try:
        consumer.list_topics(topic, timeout=10)
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        payload_bytes = 0
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while got < records and time.monotonic() < deadline:
            # never ask for more than is left: consume() waits out its timeout for a batch it cannot fill
            for message in consumer.consume(num_messages=min(10_000, records - got), timeout=0.5):
                if message.error() is None:
                    got += 1
                    payload_bytes += len(message.value())
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    note = "" if got >= records else f"read {got} of {records} in {PHASE_TIMEOUT_S:.0f}s"
    return Throughput(got, payload_bytes, seconds, note)


def client_ceiling(records: int, size: int, unreachable: str) -> float:
    """msgs/s at which this Python process can merely hand records to librdkafka (no broker involved).

    Produce figures close to this are the client's limit, not the broker's: printed so nobody reads a
    broker ratio into a client bottleneck.
    """
    n = min(records, PRODUCER_SETTINGS["queue.buffering.max.messages"],
            PRODUCER_SETTINGS["queue.buffering.max.kbytes"] * 1024 // (size + 64))  # what the queue can hold
    producer = Producer({"bootstrap.servers": unreachable, **COMMON, **PRODUCER_SETTINGS, "log_level": 0})
    payload = b"x" * size
    started = time.perf_counter()
    for i in range(n):
        producer.produce("bench-ceiling", payload, partition=i % 1)
    seconds = time.perf_counter() - started
    producer.purge()
    producer.flush(1)
    return n / seconds if seconds > 0 else 0.0


_STAMP = struct.Struct(">q")


def latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int = 100) -> Latency:
    """Produce at a fixed rate with a perf-counter stamp in each payload; a consumer thread measures now - stamp.

    Producer and consumer live in this one process, so one monotonic clock serves both ends.
    """
    result = Latency(rate, seconds)
    total = int(rate * seconds)
    ready = threading.Event()
    done = threading.Event()
    consumer = Consumer({"bootstrap.servers": bootstrap, **COMMON, **CONSUMER_SETTINGS,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])  # a fresh topic: offset 0 is the warm-up record

    def read() -> None:
        deadline = time.monotonic() + seconds + 30
        while len(result.samples_ms) < total and time.monotonic() < deadline and not done.is_set():
            # poll(), not consume(): consume() holds messages back until its batch fills or times out
            message = consumer.poll(0.05)
            if message is None or message.error() is not None:
                continue
            now = time.perf_counter_ns()
            (stamp,) = _STAMP.unpack_from(message.value())
            if stamp > 0:
                result.samples_ms.append((now - stamp) / 1e6)
            else:
                ready.set()

    reader = threading.Thread(target=read, name="latency-consumer", daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, **COMMON, **LATENCY_PRODUCER_SETTINGS})
    padding = b"\0" * max(0, size - _STAMP.size)
    # warm up: connections and metadata on both sides before the clock matters (stamp 0 = not sampled)
    producer.produce(topic, _STAMP.pack(0) + padding, partition=0)
    producer.flush(10)
    if not ready.wait(15):
        result.note = "the warm-up record never arrived; "
    interval = 1.0 / rate
    start = time.perf_counter()
    for i in range(total):
        target = start + i * interval
        pause = target - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, _STAMP.pack(time.perf_counter_ns()) + padding, partition=0)
        producer.poll(0)
    producer.flush(30)
    reader.join(timeout=seconds + 35)
    done.set()
    reader.join(timeout=5)
    consumer.close()
    if len(result.samples_ms) < total:
        result.note += f"received {len(result.samples_ms)} of {total}"
    return result


def group_join(bootstrap: str, topic: str, attempts: int = 3, timeout_s: float = 60.0) -> float | None:
    """Median seconds from `subscribe` with a new group id to the first record in hand.

    Covers what a consumer group costs before any data flows: FindCoordinator, JoinGroup (with the
    broker's initial rebalance delay), SyncGroup, OffsetFetch, the first fetch. None if a try timed out.
    """
    times: list[float] = []
    for _ in range(attempts):
        consumer = Consumer({"bootstrap.servers": bootstrap, **COMMON, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.list_topics(topic, timeout=10)
            started = time.perf_counter()
            consumer.subscribe([topic])
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                message = consumer.poll(0.05)
                if message is not None and message.error() is None:
                    times.append(time.perf_counter() - started)
                    break
            else:
                return None
        finally:
            consumer.close()
    return sorted(times)[len(times) // 2]

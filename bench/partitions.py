"""acks=all produce of 100 B records spread over 1, 16, 256 and 1,024 partitions, on pybroker alone.

Why: every partition is its own log, so acks=all over many partitions needs one fsync per partition per
group-commit round instead of one in all; this phase shows how much of the single-partition throughput
survives the spread (the goal: at least half at 1,024). Each figure is the median of REPEATS runs on fresh
topics of one broker (the spread of the runs is printed beside it: the machine may be shared), and beside
it the client-only ceiling at the same partition count (this Python process handing the same records to
librdkafka with no broker), so a figure near its ceiling reads as the client's limit, not the broker's.

    .venv/bin/python -m bench.partitions [--records N] [--counts 1,16,256,1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.load import COMMON, PRODUCER_SETTINGS, produce
from tests.integration.brokers import BrokerProcess, free_port, kill_all

SIZE = 100
COUNTS = (1, 16, 256, 1024)
REPEATS = 3
RECORDS = 300_000


@dataclass
class CountResult:
    partitions: int
    runs: list[float] = field(default_factory=list)  # msgs/s of each run
    ceiling: float = float("nan")
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """As `bench.load.create_topic`, with room for 1,024 partitions' files on a busy disk."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **COMMON, "socket.timeout.ms": 120_000})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                        request_timeout=120)[topic].result(130)


def ceiling(records: int, partitions: int) -> float:
    """msgs/s at which this process merely hands `records` to librdkafka over `partitions` (no broker)."""
    n = min(records, PRODUCER_SETTINGS["queue.buffering.max.messages"])
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", **COMMON, **PRODUCER_SETTINGS,
                         "log_level": 0})
    payload = b"x" * SIZE
    started = time.perf_counter()
    for i in range(n):
        producer.produce("bench-ceiling", payload, partition=i % partitions)
    seconds = time.perf_counter() - started
    producer.purge()
    producer.flush(1)
    return n / seconds if seconds > 0 else 0.0


def run(records: int = RECORDS, counts: tuple[int, ...] = COUNTS, repeats: int = REPEATS,
        workdir: Path | None = None) -> list[CountResult]:
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-partitions-") as tmp:
        broker = BrokerProcess(Path(workdir or tmp) / "partitions")
        broker.start()
        try:
            results = []
            for count in counts:
                result = CountResult(count, ceiling=ceiling(records, count))
                for _ in range(repeats):
                    topic = f"bench-p{count}-{uuid.uuid4().hex[:6]}"
                    create_topic(broker.bootstrap, topic, count)
                    produce(broker.bootstrap, topic, count, max(count * 2, 1000), SIZE)  # warm-up
                    print(f"  [pybroker] acks=all produce {records:,} x {SIZE} B over {count} partition(s) ...",
                          flush=True)
                    t = produce(broker.bootstrap, topic, count, records, SIZE)
                    if t.note:
                        result.note = t.note
                    result.runs.append(t.msgs_per_s)
                results.append(result)
        finally:
            try:
                broker.stop(timeout=120, expect_code=None)  # thousands of partitions to close
            except AssertionError as exc:
                print(f"  [pybroker] unclean stop: {str(exc).splitlines()[0]}", flush=True)
            broker.close()
    return results


def print_table(results: list[CountResult]) -> None:
    print(f"\n== pybroker acks=all produce, {SIZE} B, by partition count (median of runs; min-max) ==")
    print(f"  {'partitions':>10}{'msgs/s':>12}{'min-max':>22}{'of 1 partition':>16}{'client ceiling':>16}  note")
    base = results[0].median if results and results[0].partitions == 1 else float("nan")
    for r in results:
        spread = f"{min(r.runs):,.0f}-{max(r.runs):,.0f}" if r.runs else "-"
        share = f"{r.median / base:.2f}" if base == base and base > 0 else "-"
        print(f"  {r.partitions:>10,}{r.median:>12,.0f}{spread:>22}{share:>16}{r.ceiling:>16,.0f}  {r.note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)), help="partition counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args(argv)
    counts = tuple(int(c) for c in args.counts.split(","))
    try:
        print_table(run(args.records, counts, args.repeats))
    finally:
        kill_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())

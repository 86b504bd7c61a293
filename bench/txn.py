"""Transactional produce on pybroker: records/s while committing a fixed 100 transactions per second, and
commit latency (p50/p99 of `commit_transaction`, which waits for EndTxn: PrepareCommit durable in
`__transaction_state`, markers written and fsynced in every partition, CompleteCommit written).

Why a fixed transaction rate: an exactly-once pipeline commits on a clock (Kafka Streams every 100 ms by
default), so the question is how many records per second fit through while the coordinator does 100
commits a second, and what a commit costs. The load is librdkafka's: PRODUCERS transactional producers,
each in its own thread pacing TXN_RATE / PRODUCERS transactions per second, each transaction RECORDS
records of SIZE bytes over the topic's partitions. A transaction that falls behind its slot starts at once
(the achieved rate is printed beside the target).

    .venv/bin/python -m bench.txn [--seconds S] [--records-per-txn N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer

from bench.load import COMMON, client_ceiling, create_topic
from tests.integration.brokers import BrokerProcess, free_port, kill_all

TXN_RATE = 100
PRODUCERS = 4
RECORDS_PER_TXN = (10, 100, 1000, 3000)
SIZE = 100
PARTITIONS = 3
SECONDS = 10.0
BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
PRODUCER_SETTINGS: dict[str, Any] = {"linger.ms": 5, "batch.num.messages": 10_000, "compression.type": "none",
                                     "queue.buffering.max.messages": 200_000, "transaction.timeout.ms": 60_000}


@dataclass
class TxnFigures:
    records_per_txn: int
    seconds: float = 0.0
    transactions: int = 0
    commit_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        return self.transactions * self.records_per_txn

    @property
    def txn_per_s(self) -> float:
        return self.transactions / self.seconds if self.seconds > 0 else 0.0

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float:
        if len(self.commit_ms) < 2:
            return self.commit_ms[0] if self.commit_ms else float("nan")
        return statistics.quantiles(self.commit_ms, n=100, method="inclusive")[int(q * 100) - 1]


def _producer_loop(bootstrap: str, topic: str, txn_id: str, figures: TxnFigures, lock: threading.Lock,
                   per_producer_rate: float, seconds: float, ready: threading.Barrier, clock: list[float]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **COMMON, **PRODUCER_SETTINGS, "transactional.id": txn_id})
    payload = b"t" * SIZE
    try:
        try:
            producer.init_transactions(30)
        finally:
            ready.wait(60)  # the clock starts when every producer has its id (or has failed to get one)
        start = clock[0]
        interval = 1.0 / per_producer_rate
        slot = start
        n = 0
        while True:
            now = time.perf_counter()
            if now - start >= seconds:
                break
            if slot > now:
                time.sleep(slot - now)
            slot += interval
            producer.begin_transaction()
            for i in range(figures.records_per_txn):
                while True:
                    try:
                        producer.produce(topic, payload, partition=(n + i) % PARTITIONS)
                        break
                    except BufferError:
                        producer.poll(0.005)
            n += figures.records_per_txn
            began = time.perf_counter()
            producer.commit_transaction(30)
            took = (time.perf_counter() - began) * 1000
            with lock:
                figures.transactions += 1
                figures.commit_ms.append(took)
    except (KafkaException, threading.BrokenBarrierError) as exc:
        with lock:
            figures.errors.append(str(exc) or type(exc).__name__)
    finally:
        producer.flush(5)


def measure(bootstrap: str, records_per_txn: int, seconds: float = SECONDS, rate: int = TXN_RATE,
            producers: int = PRODUCERS) -> TxnFigures:
    topic = f"bench-txn-{records_per_txn}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    figures = TxnFigures(records_per_txn)
    lock = threading.Lock()
    clock = [0.0]
    ready = threading.Barrier(producers, action=lambda: clock.__setitem__(0, time.perf_counter()))
    threads = [threading.Thread(target=_producer_loop, args=(
        bootstrap, topic, f"bench-{topic}-{i}", figures, lock, rate / producers, seconds, ready, clock), daemon=True)
        for i in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 90)
    figures.seconds = time.perf_counter() - clock[0] if clock[0] else 0.0
    return figures


def run(seconds: float = SECONDS, sizes: tuple[int, ...] = RECORDS_PER_TXN) -> list[TxnFigures]:
    """A fresh pybroker, each records-per-transaction load in turn, and the broker stopped again."""
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-txn-") as tmp:
        broker = BrokerProcess(Path(tmp) / "pybroker", BROKER_OVERRIDES)
        try:
            broker.start()
            results = []
            for records_per_txn in sizes:
                print(f"  [pybroker] transactions: {TXN_RATE}/s x {records_per_txn} records of {SIZE} B "
                      f"for {seconds:.0f} s ...", flush=True)
                results.append(measure(broker.bootstrap, records_per_txn, seconds))
            broker.stop()
        finally:
            broker.close()
    return results


def print_table(results: list[TxnFigures], ceiling: float) -> None:
    print(f"\n== pybroker transactional produce ({TXN_RATE} transactions/s target over {PRODUCERS} producers, "
          f"{SIZE} B records, {PARTITIONS} partitions, acks=all, markers fsynced) ==")
    print(f"  {'records/txn':<12}{'txn/s':>8}{'records/s':>12}{'MB/s':>8}{'commit p50':>12}{'commit p99':>12}  note")
    for r in results:
        note = f"{len(r.errors)} producer(s) failed: {r.errors[0][:80]}" if r.errors else ""
        print(f"  {r.records_per_txn:<12}{r.txn_per_s:>8.1f}{r.records_per_s:>12,.0f}"
              f"{r.records_per_s * SIZE / 1e6:>8.2f}{r.percentile(0.50):>10.1f}ms{r.percentile(0.99):>10.1f}ms  {note}")
    print(f"  client ceiling (Python handing {SIZE} B records to librdkafka, no broker): {ceiling:,.0f} records/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=SECONDS, help="length of each load")
    parser.add_argument("--records-per-txn", type=int, nargs="+", default=list(RECORDS_PER_TXN))
    args = parser.parse_args(argv)
    try:
        results = run(args.seconds, tuple(args.records_per_txn))
    finally:
        kill_all()
    print_table(results, client_ceiling(200_000, SIZE, f"127.0.0.1:{free_port()}"))
    return 1 if any(r.errors for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

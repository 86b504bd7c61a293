"""Share groups (KIP-932) on pybroker: what a queue of work costs and gives.

Three figures, each from librdkafka share consumers (confluent-kafka's `ShareConsumer`) against one broker:

- **Scaling on one partition**: N share consumers (1, 2, 4, 8; each its own process) read RECORDS records
  of ONE partition, sleeping WORK_MS per record (the work), implicit acknowledgement. Records/s should grow
  with N while the work dominates (the ideal is N x 1000 / WORK_MS); the share of the ideal reached says
  where the broker or the clients take over.
- **Redelivery after a lock timeout**: member A acquires a batch and never acknowledges it; member B,
  polling, gets it again once the lock (`share.record.lock.duration.ms`, LOCK_MS) runs out. The latency is B's
  receipt minus (A's receipt + LOCK_MS): the broker's timer and the woken share fetch, a lower bound by A's
  answer's transit (A receives after the broker acquired).
- **`__share_group_state` per acknowledgement**: one consumer accepts every record (explicit mode,
  `commit_sync` after each poll) asking for 1 and for 100 records per poll (a fetch hands out whole
  batches, so asking for 1 gets a produced batch of BATCH): acknowledgements per second, bytes
  appended to `__share_group_state` per accepted record and per commit, and fsyncs per commit (the broker's
  `fdatasync`/`fsync` calls on `__share_group_state` files, counted by strace in a second, shorter pass, so
  the tracing does not slow the first).

    .venv/bin/python -m bench.share [--records N] [--consumers 1,2,4,8]

Run by `make bench-share`. The figures in docs/benchmarks.md say how loaded the machine was.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.integration.brokers import kill_all
from tests.integration.clients import ck_admin, ck_flush, ck_producer
from tests.integration.metrics_broker import MetricsBrokerProcess

RECORDS = 4000
CONSUMERS = (1, 2, 4, 8)
WORK_MS = 1.0
BATCH = 10  # records per produced batch: a share fetch hands out whole batches
MAX_POLL = 10
LOCK_MS = 3000
REDELIVERIES = 5
ACK_SECONDS = 8.0
STRACE_SECONDS = 4.0
SETTLE_S = 3.0  # after every consumer's first poll, before the records are produced: the joins settle
DEADLINE_S = 180.0
BROKER_OVERRIDES = {"offsets.topic.num.partitions": "1", "share.coordinator.state.topic.num.partitions": "1"}


def _topic_and_group(bootstrap: str, configs: dict[str, str]) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"bench-share-{suffix}", f"bench-share-group-{suffix}"
    admin = ck_admin(bootstrap)  # held in a name: a collected AdminClient cancels its futures
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)
    return topic, group


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = ck_producer(bootstrap, **{"acks": "all", "linger.ms": 50, "batch.num.messages": BATCH})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=f"r{i}".encode(), partition=0)
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.05)
    ck_flush(producer)


def _consumer(bootstrap: str, group: str, topic: str, mode: str, max_poll: int) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": max_poll,
                              "share.acknowledgement.mode": mode})
    consumer.subscribe([topic])
    return consumer


# -- scaling on one partition ------------------------------------------------------------------------
def _worker(bootstrap: str, group: str, topic: str, ready: Any, stop: Any, out: Any) -> None:
    """One share consumer process: WORK_MS of sleep per record, implicit acknowledgement; reports
    (values, first receipt, last done) when `stop` is set."""
    consumer = _consumer(bootstrap, group, topic, "implicit", MAX_POLL)
    values: list[str] = []
    first = last = 0.0
    consumer.poll(0.5)
    ready.release()
    while not stop.is_set():
        for message in consumer.poll(0.2):
            if message.error() is not None:
                continue
            first = first or time.monotonic()
            time.sleep(WORK_MS / 1000)
            values.append(message.value().decode())
            last = time.monotonic()
        out.put(("progress", os.getpid(), len(values)))
    consumer.poll(0)  # the last records' acknowledgements go out with this
    consumer.close()
    out.put(("done", values, first, last))


@dataclass
class Scaling:
    consumers: int
    records: int
    seconds: float
    duplicates: int
    per_consumer: list[int] = field(default_factory=list)

    @property
    def per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def ideal(self) -> float:
        return self.consumers * 1000 / WORK_MS


def scaling(bootstrap: str, consumers: int, records: int) -> Scaling:
    topic, group = _topic_and_group(bootstrap, {"share.auto.offset.reset": "earliest"})
    context = multiprocessing.get_context("spawn")
    ready, stop, out = context.Semaphore(0), context.Event(), context.Queue()
    procs = [context.Process(target=_worker, args=(bootstrap, group, topic, ready, stop, out), daemon=True)
             for _ in range(consumers)]
    for proc in procs:
        proc.start()
    for _ in procs:
        assert ready.acquire(timeout=DEADLINE_S), "a consumer process did not start"
    time.sleep(SETTLE_S)
    _produce(bootstrap, topic, records)
    progress: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE_S
    done: list[tuple[list[str], float, float]] = []
    try:
        while sum(progress.values()) < records and time.monotonic() < deadline:
            kind, *rest = out.get(timeout=DEADLINE_S)
            if kind == "progress":
                progress[rest[0]] = rest[1]
    finally:
        stop.set()
    while len(done) < consumers:
        kind, *rest = out.get(timeout=DEADLINE_S)
        if kind == "done":
            done.append((rest[0], rest[1], rest[2]))
    for proc in procs:
        proc.join(30)
    values = [v for vs, _, _ in done for v in vs]
    starts = [f for _, f, _ in done if f]
    ends = [last for _, _, last in done if last]
    return Scaling(consumers, len(set(values)), max(ends) - min(starts) if starts else 0.0,
                   len(values) - len(set(values)), sorted((len(vs) for vs, _, _ in done), reverse=True))


# -- redelivery after a lock timeout -------------------------------------------------------------------
def redelivery(bootstrap: str) -> tuple[float, float]:
    """(the latency past the lock's expiry in ms, A's poll bracket in ms) of one redelivery."""
    topic, group = _topic_and_group(bootstrap, {"share.auto.offset.reset": "earliest",
                                                "share.record.lock.duration.ms": str(LOCK_MS)})
    _produce(bootstrap, topic, BATCH)
    holder = _consumer(bootstrap, group, topic, "explicit", BATCH)
    deadline = time.monotonic() + DEADLINE_S
    held: list[Any] = []
    while not held:
        before = time.monotonic()
        held = [m for m in holder.poll(0.2) if m.error() is None]
        assert time.monotonic() < deadline, "the holder got nothing"
    acquired = time.monotonic()
    second = _consumer(bootstrap, group, topic, "explicit", BATCH)
    got: list[Any] = []
    while not got:
        got = [m for m in second.poll(0.05) if m.error() is None]
        assert time.monotonic() < deadline, "nothing was delivered again"
    received = time.monotonic()
    for m in got:
        second.acknowledge(m, AcknowledgeType.ACCEPT)
    second.commit_sync(30)
    second.close()
    holder.close()
    return (received - acquired) * 1000 - LOCK_MS, (acquired - before) * 1000


# -- __share_group_state per acknowledgement -----------------------------------------------------------
def _state_bytes(log_dirs: list[Path]) -> int:
    return sum(f.stat().st_size for d in log_dirs for f in d.glob("__share_group_state-*/*.log"))


_DURATION = re.compile(r'^pybroker_request_duration_seconds_(sum|count)\{api="(ShareFetch|ShareAcknowledge)"\} (\S+)$')


def _served(broker: MetricsBrokerProcess) -> dict[str, tuple[float, int]]:
    """API -> (seconds, requests) the broker's request-duration histogram holds for the share APIs."""
    _, page = broker.http_get("/metrics")
    found: dict[str, dict[str, float]] = {}
    for line in page.splitlines():
        match = _DURATION.match(line)
        if match:
            found.setdefault(match.group(2), {})[match.group(1)] = float(match.group(3))
    return {api: (v.get("sum", 0.0), int(v.get("count", 0))) for api, v in found.items()}


@dataclass
class AckCost:
    per_poll: int
    accepted: int = 0
    commits: int = 0
    seconds: float = 0.0
    state_bytes: int = 0
    traced_commits: int = 0
    state_fsyncs: int = 0
    spent: list[float] = field(default_factory=list)  # seconds in poll, in commit_sync
    broker_ms: dict[str, float] = field(default_factory=dict)  # API -> mean ms the broker took (its metrics)

    @property
    def acks_per_s(self) -> float:
        return self.accepted / self.seconds if self.seconds > 0 else 0.0


def _accept_for(consumer: ShareConsumer, seconds: float, spent: list[float] | None = None) -> tuple[int, int]:
    """Accept every record for `seconds`, committing after each poll: (records, commits); `spent` gets the
    seconds in poll and in commit_sync added to it."""
    accepted = commits = 0
    polling = committing = 0.0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        t0 = time.monotonic()
        batch = [m for m in consumer.poll(0.2) if m.error() is None]
        t1 = time.monotonic()
        for m in batch:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        if batch:
            consumer.commit_sync(30)
            accepted, commits = accepted + len(batch), commits + 1
        polling, committing = polling + t1 - t0, committing + time.monotonic() - t1
    if spent is not None:
        spent[:] = [polling, committing]
    return accepted, commits


def ack_cost(broker: MetricsBrokerProcess, per_poll: int, records: int) -> AckCost:
    topic, group = _topic_and_group(broker.bootstrap, {"share.auto.offset.reset": "earliest"})
    _produce(broker.bootstrap, topic, records)
    consumer = _consumer(broker.bootstrap, group, topic, "explicit", per_poll)
    cost = AckCost(per_poll)
    deadline = time.monotonic() + DEADLINE_S
    while not (batch := [m for m in consumer.poll(0.2) if m.error() is None]):  # joined: the clock starts
        assert time.monotonic() < deadline, "no records"
    for m in batch:
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    consumer.commit_sync(30)
    before, served = _state_bytes(broker.log_dirs), _served(broker)
    started = time.monotonic()
    cost.accepted, cost.commits = _accept_for(consumer, ACK_SECONDS, cost.spent)
    cost.seconds = time.monotonic() - started
    cost.state_bytes = _state_bytes(broker.log_dirs) - before
    after = _served(broker)
    cost.broker_ms = {api: 1000 * (after[api][0] - served.get(api, (0.0, 0))[0])
                      / max(1, after[api][1] - served.get(api, (0.0, 0))[1]) for api in after}
    if shutil.which("strace") and broker.pid is not None:
        trace = subprocess.Popen(["strace", "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", "-p", str(broker.pid)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # attached to every thread
        _, cost.traced_commits = _accept_for(consumer, STRACE_SECONDS)
        trace.terminate()
        _, err = trace.communicate(timeout=30)
        cost.state_fsyncs = len(re.findall(r"f(?:data)?sync\(\d+<[^>]*__share_group_state-", err))
    consumer.close()
    return cost


# -- the run -------------------------------------------------------------------------------------------
def run(records: int, consumers: list[int]) -> dict[str, Any]:
    results: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-share-") as tmp:
        broker = MetricsBrokerProcess(Path(tmp) / "pybroker", BROKER_OVERRIDES)
        try:
            broker.start()
            results["scaling"] = []
            for n in consumers:
                print(f"  [pybroker] {n} share consumer(s), one partition, {WORK_MS} ms of work per record ...",
                      flush=True)
                results["scaling"].append(scaling(broker.bootstrap, n, records))
            print(f"  [pybroker] redelivery after a {LOCK_MS} ms lock, x{REDELIVERIES} ...", flush=True)
            results["redelivery"] = [redelivery(broker.bootstrap) for _ in range(REDELIVERIES)]
            results["ack_cost"] = []
            for per_poll in (1, 100):
                print(f"  [pybroker] accepting {per_poll} record(s) per commit ...", flush=True)
                results["ack_cost"].append(ack_cost(broker, per_poll, 150_000 if per_poll > 1 else 20_000))
        finally:
            broker.close()
            kill_all()
    results["load_after"] = os.getloadavg()[0]
    return results


def print_table(results: dict[str, Any]) -> None:
    print(f"\n== share groups on pybroker (load average {results['load_before']:.1f} before, "
          f"{results['load_after']:.1f} after) ==")
    print(f"one partition, {WORK_MS} ms of work per record, {MAX_POLL} records per poll, implicit acknowledgement")
    print("consumers  records/s  ideal  share  records per consumer       delivered twice")
    for s in results["scaling"]:
        print(f"{s.consumers:>9}  {s.per_s:>9,.0f}  {s.ideal:>5,.0f}  {s.per_s / s.ideal:>5.0%}  "
              f"{' '.join(str(c) for c in s.per_consumer):<25}  {s.duplicates}")
    late = sorted(r[0] for r in results["redelivery"])
    brackets = [r[1] for r in results["redelivery"]]
    print(f"redelivery after a {LOCK_MS} ms lock ran out: median {statistics.median(late):.0f} ms, max {max(late):.0f} "
          f"ms past the expiry (x{len(late)}; the holder's receipt known within {max(brackets):.0f} ms)")
    print("records per commit (asked)  acks/s  state bytes per ack  per commit  fsyncs per commit (state topic)  "
          "ms per poll, per commit_sync")
    for c in results["ack_cost"]:
        per_commit = c.state_bytes / c.commits if c.commits else 0.0
        fsyncs = f"{c.state_fsyncs / c.traced_commits:.2f}" if c.traced_commits else "n/a (no strace)"
        asked = f"{c.accepted / max(1, c.commits):.0f} ({c.per_poll})"
        print(f"{asked:>26}  {c.acks_per_s:>6,.0f}  {c.state_bytes / max(1, c.accepted):>19,.1f}  "
              f"{per_commit:>10,.0f}  {fsyncs:<31}  {1000 * c.spent[0] / max(1, c.commits):.1f}, "
              f"{1000 * c.spent[1] / max(1, c.commits):.1f}")
    for c in results["ack_cost"]:
        print(f"  {c.per_poll} per commit, the broker's mean time per request (its metrics): "
              + ", ".join(f"{api} {ms:.1f} ms" for api, ms in sorted(c.broker_ms.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--consumers", default=",".join(str(n) for n in CONSUMERS))
    args = parser.parse_args(argv)
    results = run(args.records, [int(n) for n in args.consumers.split(",")])
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

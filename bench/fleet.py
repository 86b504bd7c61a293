"""Several librdkafka client processes driven as one load, so the Python client is not the ceiling.

Why processes: one Python process hands records to librdkafka (and takes them back) at a rate of its
own (~0.3-1M msgs/s here); a broker faster than that shows up as "the client's speed". N processes
(spawned once, kept for the whole run, one job each at a time) share a phase's records, start at one
instant of the machine's monotonic clock (CLOCK_MONOTONIC is one clock for every process), and the
phase's time is from that instant to the last process's last ack (produce) or last record (consume).

Each job sets its client up (bootstrap connection, metadata) before the start instant, so the timed part
is the data moving. The same jobs run against the null broker (`bench/null_broker.py`) for the ceiling.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.load import COMMON, CONSUMER_SETTINGS, PRODUCER_SETTINGS, Rates

#: a job that has not answered this long after its start instant is reported as timed out
JOB_TIMEOUT_S = 180.0
SETUP_TIMEOUT_S = 60.0  # a client that cannot set up in this long (bootstrap, metadata) fails its job
START_DELAY_S = 0.05  # from "every client is ready" to the common start instant
READY = "ready"


@dataclass
class JobResult:
    records: int = 0
    payload_bytes: int = 0
    finished_at: float = 0.0  # time.monotonic() of the last ack / record
    per_partition: dict[int, int] = field(default_factory=dict)  # produce: acked records per partition
    note: str = ""


@dataclass
class PhaseResult(Rates):
    """One phase over all processes: records, bytes, seconds from the common start to the last finish."""

    records: int
    payload_bytes: int
    seconds: float
    per_partition: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Sync:
    """The job's side of the start: say the client is set up, then wait for the common start instant."""

    def __init__(self, jobs: Any, results: Any) -> None:
        self._jobs = jobs
        self._results = results

    def start(self) -> float:
        self._results.put(READY)
        start_at: float = self._jobs.get()
        pause = start_at - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        return start_at


#: records handed to librdkafka per `produce_batch` call, all to one partition
CHUNK = 256


def produce_job(sync: Sync, bootstrap: str, topic: str, partitions: list[int], records: int, size: int,
                seconds: float, deadline_s: float, counts: list[int] | None = None) -> JobResult:
    """Send values of `size` bytes over `partitions` for `seconds` (at most `records` of them), `CHUNK` at a
    time to one partition then the next, then wait for every ack; count acks per partition. With `counts`
    (a fill), `counts[i]` records go to `partitions[i]` and `records` is their sum.

    A chunk librdkafka takes only part of (its queue is full) is finished on the same partition once there
    is room, never sent again whole: re-sending it piled a slow broker's records onto a few partitions
    (3/4 of 1,024 partitions were left empty), so its consume phase read far fewer partitions than a fast
    broker's.

    No Python call per record, either way: records are handed over `CHUNK` to a call
    (`produce_batch`, about a quarter less client CPU per 1 KiB record than one `produce` each), and
    librdkafka reports only failures (`delivery.report.only.error`; a Python call per ack was about a third
    of the client's CPU), so what each partition acked is what was queued for it less the failures
    reported for it."""
    from confluent_kafka import Producer

    failed: dict[int, int] = {}
    first_error: list[str] = []

    def on_error(err: Any, msg: Any) -> None:
        failed[msg.partition()] = failed.get(msg.partition(), 0) + 1
        if not first_error:
            first_error.append(err.str())

    producer = Producer({"bootstrap.servers": bootstrap, **COMMON, **PRODUCER_SETTINGS,
                         "delivery.report.only.error": True, "on_delivery": on_error})
    producer.list_topics(topic, timeout=30)
    payload = (bytes(range(256)) * (size // 256 + 1))[:size]
    result = JobResult()
    produce_batch = producer.produce_batch
    chunk = [{"value": payload}] * CHUNK
    queued = [0] * len(partitions)
    start_at = sync.start()
    stop_at = start_at + seconds
    deadline = start_at + deadline_s
    sent = turn = 0
    pending = CHUNK  # records of this turn's chunk not taken yet
    left = list(counts) if counts is not None else None  # what each partition is still owed
    while sent < records:
        index = turn % len(partitions)
        if left is not None and not left[index]:
            turn += 1
            continue
        want = min(pending, records - sent if left is None else left[index])
        messages = chunk if want == CHUNK else chunk[:want]
        try:
            n = produce_batch(topic, messages, partition=partitions[index])
        except BufferError:
            n = 0
        sent += n
        queued[index] += n
        if left is not None:
            left[index] -= n
        if n < len(messages):  # the queue is full: the rest of this chunk goes here once there is room
            pending -= n
            producer.poll(0.005)
        else:
            pending = CHUNK
            turn += 1
        if time.monotonic() >= stop_at:
            break
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    result.finished_at = time.monotonic()
    result.per_partition = acked_per_partition(partitions, queued, failed)
    result.records = sent - left - sum(failed.values())
    result.payload_bytes = result.records * size
    if left:
        result.note = (f"timed out after {deadline_s:.0f} s ({sent - left:,} of {sent:,} acked; "
                       "acks per partition are an upper bound)")
    if failed:
        result.note += f"{'; ' if result.note else ''}{sum(failed.values())} failed ({first_error[0]})"
    return result


def acked_per_partition(partitions: list[int], queued: list[int], failed: dict[int, int]) -> dict[int, int]:
    """Acked records per partition when `queued[i]` records went to `partitions[i]` and `failed` were
    reported failed: exact once nothing is left unacknowledged, else an upper bound. Partitions with none
    acked are left out."""
    acked: dict[int, int] = {}
    for p, n in zip(partitions, queued, strict=True):
        acked[p] = acked.get(p, 0) + n
    for p, n in failed.items():
        acked[p] = acked.get(p, 0) - n
    return {p: n for p, n in acked.items() if n > 0}


def consume_job(sync: Sync, bootstrap: str, topic: str, slices: list[tuple[int, int, int]],
                deadline_s: float, size: int | None = None, passes: int = 1) -> JobResult:
    """Read the offset ranges `slices` = [(partition, start, end)] by assign (no group, nothing committed),
    `passes` times over: once a pass has read every range whole, the next seeks each back to its start.
    With `size` (every record's value is that long, as the produce phase wrote them) the payload is
    counted from it rather than by a `len(value())` call per record."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, **COMMON, **CONSUMER_SETTINGS})
    result = JobResult()
    try:
        consumer.list_topics(topic, timeout=30)
        ranges = [(p, start, end) for p, start, end in slices if end > start]
        per_pass = sum(end - start for _, start, end in ranges)
        start_at = sync.start()
        deadline = start_at + deadline_s
        got = 0
        payload_bytes = 0
        for done in range(passes if ranges else 0):
            if time.monotonic() >= deadline:
                break
            assigned = [TopicPartition(topic, p, start) for p, start, _ in ranges]
            if not done:
                consumer.assign(assigned)
            else:
                # each range's start again, then resume what the last pass paused at its end. Seeks and
                # resumes reach a partition in the order they are made, after its pause; a second assign()
                # instead raced them, and once left a partition paused for the rest of the phase
                for partition in assigned:
                    consumer.seek(partition)
                consumer.resume(assigned)
            ends = {p: end for p, _, end in ranges}
            left = per_pass
            while ends and time.monotonic() < deadline:
                # never ask for more than is left: consume() waits out its timeout for a batch it cannot fill
                for message in consumer.consume(num_messages=min(10_000, left), timeout=0.2):
                    if message.error() is not None:
                        continue
                    partition = message.partition()
                    end = ends.get(partition)
                    offset = message.offset()
                    if end is None or offset >= end:
                        continue  # past this slice: another process reads it
                    got += 1
                    left -= 1
                    if size is None:
                        payload_bytes += len(message.value())
                    if offset == end - 1:
                        del ends[partition]
                        consumer.pause([TopicPartition(topic, partition)])  # nothing more wanted from it
        result.finished_at = time.monotonic()
        result.records = got
        result.payload_bytes = payload_bytes if size is None else got * size
        wanted = per_pass * passes
        if got < wanted:
            result.note = f"read {got:,} of {wanted:,} in {deadline_s:.0f} s"
    finally:
        consumer.close()
    return result


def _serve(jobs: Any, results: Any) -> None:
    """A fleet process: run jobs until told to stop (None); an exception is a result too."""
    while True:
        job = jobs.get()
        if job is None:
            return
        if isinstance(job, float):
            continue  # the start instant of a job that failed before it was ready
        fn, kwargs = job
        try:
            results.put(fn(Sync(jobs, results), **kwargs))
        except Exception:
            results.put(JobResult(note="failed: " + traceback.format_exc().strip().splitlines()[-1]))


def owners(partitions: int, n: int) -> list[list[int]]:
    """The partitions each of `n` producers writes: its own share when there are enough, else all."""
    if partitions >= n:
        return [list(range(w, partitions, n)) for w in range(n)]
    return [list(range(partitions)) for _ in range(n)]


def consume_slices(ends: dict[int, int], n: int,
                   starts: dict[int, int] | None = None) -> list[list[tuple[int, int, int]]]:
    """[(partition, start, end)] for each of `n` consumers: whole partitions when there are enough of
    them, else every partition cut into one offset range per consumer. Together: every offset in
    [start, end) of each partition once (`starts`: 0 for a partition it does not name)."""
    starts = starts or {}
    slices: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    parts = sorted(ends)
    if len(parts) >= n:
        for i, p in enumerate(parts):
            slices[i % n].append((p, min(starts.get(p, 0), ends[p]), ends[p]))
        return slices
    for p in parts:
        first = min(starts.get(p, 0), ends[p])
        step = -(-(ends[p] - first) // n)
        for w in range(n):
            slices[w].append((p, min(first + w * step, ends[p]), min(first + (w + 1) * step, ends[p])))
    return slices


class Fleet:
    """N spawned client processes; `run` gives each one job and gathers the phase."""

    def __init__(self, processes: int) -> None:
        ctx = mp.get_context("spawn")
        self.size = processes
        self._jobs = [ctx.Queue() for _ in range(processes)]
        self._results = ctx.Queue()
        self._procs = [ctx.Process(target=_serve, args=(q, self._results), daemon=True, name=f"bench-client-{i}")
                       for i, q in enumerate(self._jobs)]
        for proc in self._procs:
            proc.start()

    def run(self, jobs: list[tuple[Callable[..., JobResult], dict[str, Any]]]) -> PhaseResult:
        """Hand out the jobs, wait until every client is set up, give them one start instant, gather."""
        queues = self._jobs[:len(jobs)]
        for q, job in zip(queues, jobs, strict=True):
            q.put(job)
        results: list[JobResult] = []
        ready = 0
        while ready + len(results) < len(jobs):  # a job that fails in its setup answers with its result
            try:
                answer = self._results.get(timeout=SETUP_TIMEOUT_S)
            except queue.Empty:
                raise RuntimeError("client processes did not set up in time") from None
            if answer == READY:
                ready += 1
            else:
                results.append(answer)
        start_at = time.monotonic() + START_DELAY_S
        for q in queues:
            q.put(start_at)  # a process whose job already failed takes this as its next job and ignores it
        for _ in range(ready):
            try:
                results.append(self._results.get(timeout=JOB_TIMEOUT_S))
            except queue.Empty:
                results.append(JobResult(note="a client process did not answer"))
        finished = max((r.finished_at for r in results), default=start_at)
        per_partition: dict[int, int] = {}
        for r in results:
            for p, n in r.per_partition.items():
                per_partition[p] = per_partition.get(p, 0) + n
        return PhaseResult(sum(r.records for r in results), sum(r.payload_bytes for r in results),
                           max(0.0, finished - start_at), per_partition, [r.note for r in results if r.note])

    def produce(self, bootstrap: str, topic: str, partitions: int, records: int, size: int,
                seconds: float = 1e9, deadline_s: float = 120.0) -> PhaseResult:
        """At most `records` over all processes, for at most `seconds`; with at least as many partitions as processes each process
        writes its own partitions, else every process writes every partition."""
        n = self.size
        owned = owners(partitions, n)
        shares = [records // n + (1 if w < records % n else 0) for w in range(n)]
        return self.run([(produce_job, {"bootstrap": bootstrap, "topic": topic, "partitions": owned[w],
                                        "records": shares[w], "size": size, "seconds": seconds,
                                        "deadline_s": deadline_s}) for w in range(n) if shares[w]])

    def fill(self, bootstrap: str, topic: str, counts: dict[int, int], size: int,
             deadline_s: float = 120.0) -> PhaseResult:
        """Exactly `counts[p]` more records into each partition `p`, each partition written by one process
        (untimed: done when all are acked or `deadline_s` passes)."""
        jobs = []
        for w in range(self.size):
            mine = [p for p in sorted(counts) if p % self.size == w and counts[p] > 0]
            if mine:
                jobs.append((produce_job, {"bootstrap": bootstrap, "topic": topic, "partitions": mine,
                                           "records": sum(counts[p] for p in mine), "size": size,
                                           "seconds": deadline_s, "deadline_s": deadline_s,
                                           "counts": [counts[p] for p in mine]}))
        return self.run(jobs)

    def consume(self, bootstrap: str, topic: str, ends: dict[int, int], deadline_s: float = 120.0,
                size: int | None = None, starts: dict[int, int] | None = None, passes: int = 1) -> PhaseResult:
        """Read offsets [start, end) of every partition (start 0 unless `starts` names it), `passes` times
        over: whole partitions per process when there are enough of them, else every partition cut into one
        range per process. `size`: every value's length, when the caller knows it (the produce phase wrote
        them)."""
        slices = consume_slices(ends, self.size, starts)
        return self.run([(consume_job, {"bootstrap": bootstrap, "topic": topic, "slices": s,
                                        "deadline_s": deadline_s, "size": size, "passes": passes})
                         for s in slices if s])

    def close(self) -> None:
        for q in self._jobs:
            q.put(None)
        for proc in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()

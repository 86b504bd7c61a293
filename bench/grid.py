"""The throughput grid: record sizes x partition counts, produce then consume, on every target in turn.

Targets: pybroker, Apache Kafka in two profiles (`bench/kafka_peer.py`), Tansu and the null broker
(`bench/null_broker.py`, the client-only ceiling), all up at once; every cell (size, partitions) runs on each
target in turn, and the whole grid is repeated, so a change in the machine's load (it is shared) hits
them all alike. A figure is the median of the repetitions; a ratio is the median of the repetitions' ratios
(each taken between runs seconds apart).

Per phase, beside msgs/s and MB/s: the broker process's CPU seconds (user + system, its children included,
from `/proc/<pid>/stat`) per GB of payload moved (less sensitive to a busy machine than a rate), its RSS after
the phase, and for pybroker's consume the share of fetched bytes sent by `os.sendfile` (its `pybroker_fetch_bytes_total{path}`).
Before every produce phase, on every target alike, the disk is settled (`bench/disk.py`: `os.sync()`,
then wait until the kernel's dirty pages are written back), so no phase pays for the previous one's
writes. A produce phase runs for a fixed time (the clients stop handing records over, then wait for every
ack) so every target gets a phase of similar length; then every target's consume phase reads the same
number of records, written for it just before (`run_grid` says how). Topics are fresh per cell; on a disk target each is
deleted once its consume phase is done, and the grid waits for its files to go (`drop_topic` says why);
Tansu, which keeps deleted data, is restarted when it grows.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.disk import settle_disk
from bench.fleet import Fleet, PhaseResult
from bench.idle_peers import waiting
from bench.load import COMMON, Rates
from bench.procfs import descendants, stat_fields
from tests.integration.brokers import BrokerProcess

CEILING = "null"
#: a produce phase stops after its seconds or this much payload, whichever comes first
MAX_BYTES_PER_PHASE = 4e9
RECYCLE_RSS_MB = 3000.0
#: every target's consume phase reads this many bytes of records, an even share of each partition, written
#: for it (untimed) after the produce phase (`fill_for_consume`): the same work on every target, and what a
#: consumer that keeps up reads
CONSUME_BYTES = 1e9
#: (least record size, passes): how many times a consume phase reads the `CONSUME_BYTES` its fill wrote, the
#: same records from the same batch boundaries each time. A 1 GB read of 10 KiB records lasted 0.5-1 s and
#: one of 1 KiB 1-1.5 s: the consumers' start (their first fetches) was a tenth of such a window, and three
#: repetitions of one cell on one target spread by up to a factor of two (10 KiB x16p on Kafka: 126k, 233k,
#: 268k msgs/s). With passes every consume phase lasts seconds, as the produce phase's 2.5 s do.
CONSUME_PASSES = ((10240, 4), (1024, 2), (0, 1))
#: what every disk target runs with beside its own defaults (`bench/run.py`, `bench/kafka_peer.py`): a deleted
#: topic's files go a second after the deletion rather than a minute, so `drop_topic` can wait for them
#: between phases. Not 0: Kafka's deletion task would then schedule itself again at once, for ever. No
#: timed phase deletes a file, so no figure depends on it.
DELETE_SOON = {"log.segment.delete.delay.ms": "1000"}
#: how long `drop_topic` waits for a deleted topic's files to leave the disk before it says so and goes on
DELETED_FILES_GONE_S = 30.0
#: the peak RSS of broker processes replaced by `recycled`, so the run's peak counts them too
RETIRED_PEAK_MB: dict[str, float] = {}


class NullBrokerProcess(BrokerProcess):
    """`bench/null_broker.py` as a process the harness starts, checks (ApiVersions) and stops like a broker."""

    name = "null"
    supports_restart = False
    supports_overrides = False

    def command(self) -> list[str]:
        return [sys.executable, "-m", "bench.null_broker", "--host", self.host, "--port", str(self.port)]

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        return env


def cpu_times(pid: int | None) -> tuple[float, float]:
    """User and system CPU seconds of a process so far, every thread, children included: its live
    descendants' (pybroker's validation worker processes; a JVM has none) and those it has reaped (Linux
    `/proc`); NaNs where that cannot be read."""
    fields = stat_fields(pid) if pid is not None else None
    if fields is None:
        return float("nan"), float("nan")
    tick = os.sysconf("SC_CLK_TCK")
    user, system = int(fields[11]) + int(fields[13]), int(fields[12]) + int(fields[14])
    for child in descendants(pid) if pid is not None else []:
        if (theirs := stat_fields(child)) is not None:  # a child reaped meanwhile is counted in cutime
            user += int(theirs[11])
            system += int(theirs[12])
    return user / tick, system / tick


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process and its children so far; NaN where that cannot be read."""
    return sum(cpu_times(pid))


def memory_mb(pid: int | None, key: str = "VmRSS") -> float:
    """`VmRSS` (now) or `VmHWM` (peak) of a process in MB; NaN where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return float("nan")


def start_to_ready(broker: BrokerProcess) -> float:
    """Seconds from the broker's process start (`spawned_at`) to its first Metadata answer that lists a
    broker: when a client can first find a leader. Every target the bench starts is timed alike
    (`bench/readiness.py`: Metadata polled every 20 ms from the spawn, so the figure is good to those
    20 ms); NaN for a process started any other way."""
    ready_at = getattr(broker, "ready_at", 0.0)
    return float(ready_at - broker.spawned_at) if ready_at else float("nan")


def peak_rss_mb(pid: int | None) -> float:
    """Peak RSS (VmHWM) of a process in MB, its live worker processes' peaks added (an upper bound: their
    peaks need not have come at once); NaN where it cannot be read."""
    if pid is None:
        return float("nan")
    return memory_mb(pid, "VmHWM") + sum(v for child in descendants(pid)
                                         if (v := memory_mb(child, "VmHWM")) == v)


def metrics_page(broker: BrokerProcess) -> str | None:
    """pybroker's Prometheus page; None for a broker that serves none (Kafka, Tansu, the null broker) or
    when it cannot be read."""
    http_get = getattr(broker, "http_get", None)
    if http_get is None:
        return None
    try:
        _, page = http_get("/metrics")
    except OSError:
        return None
    return str(page)


def fetch_paths(broker: BrokerProcess) -> tuple[float, float] | None:
    """pybroker's `pybroker_fetch_bytes_total` by path (sendfile, copy); None for a broker without it."""
    if (page := metrics_page(broker)) is None:
        return None
    values = {"sendfile": 0.0, "copy": 0.0}
    for line in page.splitlines():
        if line.startswith("pybroker_fetch_bytes_total{"):
            path = line.split('path="', 1)[1].split('"', 1)[0]
            values[path] = values.get(path, 0.0) + float(line.rsplit(" ", 1)[1])
    return values["sendfile"], values["copy"]


#: a wake of pybroker's loop watcher later than this is counted as a stall of its loop (`loop_late_wakes`)
LOOP_STALL_S = 0.05


def loop_late_wakes(broker: BrokerProcess) -> float | None:
    """How many wakes of pybroker's event-loop watcher so far came more than `LOOP_STALL_S` late
    (`pybroker_event_loop_lag_seconds`); None for a broker without it. The difference over a latency
    window says whether a tail in it was pybroker's loop standing still or something outside it."""
    if (page := metrics_page(broker)) is None:
        return None
    total = prompt = None
    for line in page.splitlines():
        if line.startswith("pybroker_event_loop_lag_seconds_count "):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith(f'pybroker_event_loop_lag_seconds_bucket{{le="{LOOP_STALL_S}"}}'):
            prompt = float(line.rsplit(" ", 1)[1])
    return None if total is None or prompt is None else total - prompt


@dataclass
class Phase(Rates):
    """One produce or consume run on one target: the rate, and what it cost the broker."""

    records: int
    payload_bytes: int
    seconds: float
    cpu_s: float
    rss_mb: float
    sendfile_bytes: float = float("nan")
    copied_bytes: float = float("nan")
    notes: list[str] = field(default_factory=list)

    @property
    def cpu_s_per_gb(self) -> float:
        return self.cpu_s / (self.payload_bytes / 1e9) if self.payload_bytes else float("nan")

    @property
    def sendfile_share(self) -> float:
        total = self.sendfile_bytes + self.copied_bytes
        return self.sendfile_bytes / total if total > 0 else float("nan")


@dataclass
class Cell:
    """All runs of one (kind, size, partitions) on every target: {target: [Phase per repetition]}."""

    kind: str  # produce | consume
    size: int
    partitions: int
    runs: dict[str, list[Phase]] = field(default_factory=dict)

    def median(self, target: str, attr: str = "msgs_per_s") -> float:
        values = [getattr(p, attr) for p in self.runs.get(target, []) if p.records]
        values = [v for v in values if v == v]
        return statistics.median(values) if values else float("nan")

    def ratio(self, ours: str = "pybroker", theirs: str = "tansu") -> float:
        """Median over repetitions of ours/theirs msgs/s (the two ran seconds apart in each)."""
        pairs = zip(self.runs.get(ours, []), self.runs.get(theirs, []), strict=False)
        ratios = [a.msgs_per_s / b.msgs_per_s for a, b in pairs if a.records and b.records and b.msgs_per_s > 0]
        return statistics.median(ratios) if ratios else float("nan")

    def notes(self, target: str) -> list[str]:
        return sorted({n for p in self.runs.get(target, []) for n in p.notes})


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create and wait until the metadata shows every partition (room for 1,024 partitions' files)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **COMMON, "socket.timeout.ms": 120_000})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                        request_timeout=120)[topic].result(130)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} did not appear with {partitions} partitions")


def delete_topic(bootstrap: str, topic: str) -> str | None:
    """Delete one topic (`drop_topic` says when). The admin client must outlive the
    request; a client dropped at once is destroyed with the deletion still queued (`_DESTROY`), which a
    silent best effort once hid until a run filled the disk. Returns why the deletion failed, or None; the
    caller says so."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, **COMMON})
    try:
        admin.delete_topics([topic], request_timeout=60)[topic].result(70)
    except Exception as exc:  # any failure is reported; the run goes on
        return repr(exc)
    return None


def _measured(broker: BrokerProcess, run: Any) -> tuple[PhaseResult, Phase]:
    """Run one phase and what it cost the broker. The fetch paths are scraped before the CPU count starts
    and after it ends: rendering pybroker's metrics page costs it 3 ms over 16 partitions and 48 ms over
    1,024, which inside the window would be charged to a 1 GB consume as 0.05 s/GB that no peer pays."""
    paths = fetch_paths(broker)
    cpu = cpu_seconds(broker.pid)
    result: PhaseResult = run()
    cpu_after, paths_after = cpu_seconds(broker.pid), fetch_paths(broker)
    phase = Phase(result.records, result.payload_bytes, result.seconds, cpu_after - cpu, memory_mb(broker.pid),
                  notes=result.notes[:1])
    if paths is not None and paths_after is not None:
        phase.sendfile_bytes, phase.copied_bytes = paths_after[0] - paths[0], paths_after[1] - paths[1]
    return result, phase


def produce_phase(fleet: Fleet, name: str, broker: BrokerProcess, topic: str, size: int, partitions: int,
                  seconds: float, deadline_s: float) -> tuple[Phase, dict[int, int]]:
    """Produce for `seconds` into a fresh topic: the phase, and the records acked per partition."""
    if name != CEILING:
        create_topic(broker.bootstrap, topic, partitions)
    unsettled = settle_disk()  # every target alike: no phase pays for the previous one's write-back
    print(f"  [{name}] {size} B over {partitions} partition(s): {unsettled + '; ' if unsettled else ''}"
          f"produce {seconds:g} s ...", end="", flush=True)
    records = max(fleet.size, int(MAX_BYTES_PER_PHASE // size))
    produced, produce = _measured(broker, lambda: fleet.produce(broker.bootstrap, topic, partitions, records, size,
                                                                seconds, deadline_s))
    if unsettled:
        produce.notes.append(unsettled)
    print(f" {produce.msgs_per_s:,.0f} msgs/s ({produce.records:,})", flush=True)
    return produce, dict(produced.per_partition)


def fill_for_consume(fleet: Fleet, name: str, broker: BrokerProcess, topic: str, size: int, partitions: int,
                     acked: dict[int, int], want: int, deadline_s: float) -> tuple[dict[int, int], dict[int, int]]:
    """Untimed, after the produce phase: each partition's share of `want` records (`share_of`) more, written by
    one process per partition; (starts, ends) per partition of what the consume phase then reads back: the
    records this fill wrote, from the offset where the produce phase's `acked` records end.

    Why a fill of its own: a consumer is sent whole batches, from the start of the batch that holds its
    offset. Over 1,024 partitions a partition's share of 1 GB (95 records of 10 KiB) is about one 1 MB
    producer batch, so a consume that starts at an offset inside the produce phase's records (its newest
    share) was sent about half a batch per partition that it skipped and nobody counted: 1.6 GB sent for
    1 GB counted by pybroker, whose 2.5 s phase wrote three times its share, against 1.15 GB by Kafka, whose
    phase wrote less than its share, so that most of its consume started at offset 0. A fill's first record
    starts a batch: every target is sent the records it is counted for, and reads the same number of them
    over every partition."""
    share = share_of(want, partitions)
    print(f"  [{name}] writing {share * partitions:,} records ({share:,} per partition) for the consume phase ...",
          flush=True)
    filled = fleet.fill(broker.bootstrap, topic, dict.fromkeys(range(partitions), share), size,
                        deadline_s).per_partition
    starts = {p: acked.get(p, 0) for p in range(partitions)}
    return starts, {p: starts[p] + filled.get(p, 0) for p in range(partitions)}


def share_of(want: int, partitions: int) -> int:
    """Each partition's share of a consume phase's `want` records (rounded up)."""
    return -(-want // max(1, partitions))


def consume_passes(size: int) -> int:
    """How many times a consume phase reads its records (`CONSUME_PASSES`)."""
    return next(passes for least, passes in CONSUME_PASSES if size >= least)


def consume_phase(fleet: Fleet, name: str, broker: BrokerProcess, topic: str, size: int, ends: dict[int, int],
                  starts: dict[int, int], deadline_s: float) -> Phase:
    """Read offsets [start, end) of each partition back, `consume_passes(size)` times over."""
    passes = consume_passes(size)
    print(f"  [{name}] consume {sum(e - starts.get(p, 0) for p, e in ends.items()):,} records"
          f"{f' x {passes} passes' if passes > 1 else ''} ...", end="", flush=True)
    _, consume = _measured(broker, lambda: fleet.consume(broker.bootstrap, topic, ends, deadline_s, size, starts,
                                                         passes))
    print(f" {consume.msgs_per_s:,.0f} msgs/s", flush=True)
    return consume


def held_files(pid: int | None, log_dirs: list[Path], topic: str) -> int:
    """How many of `topic`'s files are still on the disk: its partition dirs (a deleted one renamed
    `-delete` first) under `log_dirs`, and the files the broker still holds open or mapped after their
    unlink (a deleted file's blocks are freed only when the last holder lets go)."""
    marker = f"/{topic}-"
    held = sum(1 for d in log_dirs if d.is_dir() for entry in os.scandir(d) if entry.name.startswith(topic + "-"))
    if pid is None:
        return held
    with contextlib.suppress(OSError):
        for fd in os.scandir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(fd.path)
                held += marker in target and target.endswith(" (deleted)")
    with contextlib.suppress(OSError), open(f"/proc/{pid}/maps") as maps:
        held += sum(1 for line in maps if marker in line and line.rstrip().endswith("(deleted)"))
    return held


def drop_topic(name: str, broker: BrokerProcess, topic: str, timeout_s: float = DELETED_FILES_GONE_S) -> None:
    """Delete a cell's topic from a disk target once its phases are done, wait until its files have left the
    disk, then settle the disk: the next phase starts on a disk with nothing of this one's left to remove.

    Why at once, and why wait: a cell writes 2 to 5 GB over the disk targets and the full grid about 80 GB,
    more than the bench machine has free, so a topic must go before the next cell (deleting only between
    repetitions filled the disk in a run of one). But a broker unlinks a deleted topic's files later
    (`DELETE_SOON`), and on a disk mounted with `discard` the removal is I/O of its own: left to happen
    whenever, it landed in some later phase of some other target. Here it lands in no phase."""
    if (failure := delete_topic(broker.bootstrap, topic)) is not None:
        print(f"  [{name}] {topic} could not be deleted, its data stays on disk: {failure}", flush=True)
        return
    deadline = time.monotonic() + timeout_s
    while (left := held_files(broker.pid, broker.log_dirs, topic)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        print(f"  [{name}] {topic}: {left} of its files still on disk {timeout_s:g} s after its deletion", flush=True)
    settle_disk()


def recycled(name: str, broker: BrokerProcess, fresh: Callable[[], BrokerProcess]) -> BrokerProcess:
    """Tansu's memory:// keeps what a deleted topic held: past RECYCLE_RSS_MB it is replaced by a fresh one."""
    if memory_mb(broker.pid) < RECYCLE_RSS_MB:
        return broker
    print(f"  [{name}] RSS {memory_mb(broker.pid):,.0f} MB: restarting it empty", flush=True)
    RETIRED_PEAK_MB[name] = max(RETIRED_PEAK_MB.get(name, 0.0), memory_mb(broker.pid, "VmHWM"))
    broker.stop(timeout=30, expect_code=None)
    broker.close()
    return fresh().start()


def run_grid(fleet: Fleet, brokers: dict[str, BrokerProcess], fresh: dict[str, Callable[[], BrokerProcess]],
             sizes: tuple[int, ...], counts: tuple[int, ...], seconds: float, repeats: int,
             deadline_s: float, peers_wait_niced: bool = True) -> list[Cell]:
    """Every cell on every target, `repeats` times over; a target that fails is dropped from the rest.
    `brokers` is updated in place when one is recycled (`fresh[name]()` makes its replacement).

    On each target a cell is its timed produce phase, then, untimed, a fill of `CONSUME_BYTES` of records
    (an even share of each partition, `fill_for_consume`), then at once the consume phase of those
    records: every target reads the same number of records, of data just written, from a batch boundary.
    Reading back all of what each one had produced made a slow producer's consume phase a fraction of a
    second long (a tenth of a fast one's records, over as many partitions), and compared rates of unequal
    work; consuming only after every target had produced left the data a minute or more unread, long
    enough for a host that reclaims page cache idle for a minute (DAMON's pageout scheme, seen on the
    bench machine) to drop some of it.

    While a target runs its cell the other targets wait at nice 19 (`bench/idle_peers.py` says why), unless
    `peers_wait_niced` is False."""
    cells = {(kind, size, count): Cell(kind, size, count)
             for size in sizes for count in counts for kind in ("produce", "consume")}
    live = set(brokers)
    turn = 0
    for rep in range(repeats):
        print(f"  -- repetition {rep + 1} of {repeats} --", flush=True)
        for count in counts:
            for size in sizes:
                want = max(fleet.size, int(CONSUME_BYTES // size))
                for name in rotated([n for n in brokers if n in live], turn):
                    broker = brokers[name]
                    topic = f"bench-s{size}-p{count}-{uuid.uuid4().hex[:6]}"  # the null broker reads both from it
                    others = [brokers[n].pid for n in brokers if n != name] if peers_wait_niced else []
                    try:
                        with waiting(others):
                            produce, acked = produce_phase(fleet, name, broker, topic, size, count, seconds,
                                                           deadline_s)
                            starts, ends = fill_for_consume(fleet, name, broker, topic, size, count, acked, want,
                                                            deadline_s)
                            consume = consume_phase(fleet, name, broker, topic, size, ends, starts, deadline_s)
                        if name != CEILING and name not in fresh:  # Tansu's memory is recycled instead
                            drop_topic(name, broker, topic)
                        if name in fresh:
                            brokers[name] = recycled(name, broker, fresh[name])
                    except Exception as exc:
                        _drop(name, broker, exc, live)
                        continue
                    cells["produce", size, count].runs.setdefault(name, []).append(produce)
                    cells["consume", size, count].runs.setdefault(name, []).append(consume)
                turn += 1
    return list(cells.values())


def _drop(name: str, broker: BrokerProcess, exc: Exception, live: set[str]) -> None:
    """A target that failed a phase: said, and left out of the rest of the grid."""
    print(f"\n  [{name}] failed: {exc!r}; left out of the rest\n{broker.log_tail(10)}", flush=True)
    live.discard(name)


def rotated(names: list[str], turn: int) -> list[str]:
    """The targets in the order the `turn`th cell runs them: each cell starts one target further on, so no
    target is always the first after a settled disk, or always the one that meets a change in the
    machine's load that the cell before it began under (with `--repeats`, a cell's repetitions also run
    the targets in different orders)."""
    if not names:
        return names
    start = turn % len(names)
    return names[start:] + names[:start]

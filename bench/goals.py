"""The goals `make bench` judges pybroker by, and how: ratios to a peer measured in one run on one machine,
each cell judged against the lower of the goal and the ceiling pybroker could reach at all.

Why a ceiling: on a shared 2-core machine a goal such as "1.5x Kafka's msgs/s" can ask for more than the
clients can send against a broker that does nothing (the null broker, `bench/null_broker.py`), or, for a
produce at equal durability, for more fsynced MB/s than the disk alone takes (`bench/disk.write_bandwidth`).
No broker could meet such a goal there, so the cell is judged against the ceiling instead: met when
pybroker reaches `NEAR_CEILING` (90%) of it. Which ceilings apply is part of the goal (`Goal.disk_bound`):
the clients' always; the disk's for produce goals against a peer that is as durable as pybroker (Kafka with
`log.flush.interval.messages=1`) and, as before, against Tansu (in memory: the goal was set knowing that).
Against Kafka's defaults (acks=all answered from the page cache) only the clients' ceiling counts: there the
fsync is pybroker's own choice.

Everything here is pure (figures in, verdicts out) and is unit-tested in `tests/unit/test_bench_goals.py`;
`bench/report.py` prints it. Nothing here is timed or does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench.grid import CEILING, Cell

OURS = "pybroker"
#: targets that fsync before they answer acks=all: the disk bounds their produce
FSYNCED = frozenset({OURS, "kafka-fsync"})
KAFKA_PEERS = ("kafka", "kafka-fsync")
#: a goal beyond the ceiling is met at this share of the ceiling
NEAR_CEILING = 0.9
LATENCY_P99_GOAL_MS = 5.0
#: pybroker's peak RSS and start-to-ready time at most this share of Kafka's
KAFKA_SHARE_GOAL = 1 / 5


@dataclass(frozen=True)
class Goal:
    """pybroker's msgs/s at least `ratio` x `peer`'s in every measured cell of `kind` it covers: `sizes` and
    `counts` (None: every size or partition count measured)."""

    issue: int
    peer: str
    kind: str  # produce | consume
    ratio: float
    sizes: tuple[int, ...] | None = None
    counts: tuple[int, ...] | None = None
    disk_bound: bool = False  # the disk-only ceiling applies too (produce at equal durability)

    def covers(self, kind: str, size: int, partitions: int) -> bool:
        return (kind == self.kind and (self.sizes is None or size in self.sizes)
                and (self.counts is None or partitions in self.counts))

    @property
    def label(self) -> str:
        sizes = "every size" if self.sizes is None else "/".join(size_label(s) for s in self.sizes)
        counts = "" if self.counts is None else " x" + "/".join(map(str, self.counts)) + "p"
        return f"{self.kind} {sizes}{counts} >= {self.ratio:g}x {self.peer}"


#: the throughput goals, one row each (issue 14 against Tansu, issue 34 against Kafka's two profiles)
THROUGHPUT_GOALS: tuple[Goal, ...] = (
    Goal(14, "tansu", "produce", 2.0, (1024,), disk_bound=True),
    Goal(14, "tansu", "produce", 3.0, (10240,), disk_bound=True),
    Goal(14, "tansu", "consume", 2.0, (1024,)),
    Goal(14, "tansu", "consume", 3.0, (10240,)),
    Goal(34, "kafka-fsync", "produce", 1.5, (1024, 10240), (1, 16, 256), disk_bound=True),
    Goal(34, "kafka-fsync", "consume", 1.5, (1024, 10240), (1, 16, 256)),
    Goal(34, "kafka", "produce", 1.0, (10240,)),
    Goal(34, "kafka", "consume", 1.0),
)


def size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def _finite(value: float) -> bool:
    return not math.isnan(value)


def client_ceiling(cell: Cell) -> tuple[float, bool]:
    """The clients' ceiling of a cell in msgs/s: the null broker's figure, or where a broker beat it (the
    null broker writes fetched bytes from memory, slower than sendfile) the best figure any broker reached:
    the clients did at least that. The flag says it is such a lower bound."""
    null = cell.median(CEILING)
    best = max((v for t in cell.runs if t != CEILING and _finite(v := cell.median(t))), default=float("nan"))
    if _finite(best) and (not _finite(null) or best > null):
        return best, True
    return null, False


def disk_ceiling(cell: Cell, disk_mb_per_s: Mapping[int, float]) -> float:
    """The disk-only ceiling of a produce cell in msgs/s: the MB/s the disk alone made durable, written the
    way pybroker writes that many partitions, over the record size (payload only: batch headers make the
    true figure a little lower). NaN for consume or where the disk was not measured."""
    mb = disk_mb_per_s.get(cell.partitions, float("nan"))
    return mb * 1e6 / cell.size if cell.kind == "produce" and _finite(mb) else float("nan")


@dataclass(frozen=True)
class Ceiling:
    """What bounds a target in a cell: msgs/s, and which: 'clients', 'clients>=' (a lower bound) or 'disk'."""

    msgs_per_s: float
    source: str

    @property
    def short(self) -> str:
        return {"clients": "c", "clients>=": ">=c", "disk": "d"}.get(self.source, "")


def ceiling_for(cell: Cell, disk_mb_per_s: Mapping[int, float], disk_bound: bool) -> Ceiling:
    """The lower of the clients' ceiling and (with `disk_bound`, for produce) the disk's."""
    clients, lower_bound = client_ceiling(cell)
    disk = disk_ceiling(cell, disk_mb_per_s) if disk_bound else float("nan")
    if _finite(disk) and (not _finite(clients) or disk < clients):
        return Ceiling(disk, "disk")
    return Ceiling(clients, "clients>=" if lower_bound else "clients")


def target_ceiling(cell: Cell, target: str, disk_mb_per_s: Mapping[int, float]) -> Ceiling:
    """The ceiling a target's figure in a cell is read against: the disk bounds the produce of a target
    that fsyncs before it answers."""
    return ceiling_for(cell, disk_mb_per_s, target in FSYNCED)


@dataclass(frozen=True)
class Verdict:
    """One goal in one cell. `met` is None where a figure is missing."""

    goal: Goal
    size: int
    partitions: int
    ours: float  # pybroker's msgs/s (median)
    theirs: float  # the peer's msgs/s (median)
    ratio: float  # median of per-repetition ratios
    ceiling: Ceiling

    @property
    def needed(self) -> float:
        """msgs/s the goal ratio asks for."""
        return self.goal.ratio * self.theirs

    @property
    def beyond_ceiling(self) -> bool:
        return _finite(self.needed) and _finite(self.ceiling.msgs_per_s) and self.needed > self.ceiling.msgs_per_s

    @property
    def share_of_ceiling(self) -> float:
        c = self.ceiling.msgs_per_s
        return self.ours / c if _finite(c) and c > 0 and _finite(self.ours) else float("nan")

    @property
    def met(self) -> bool | None:
        if self.beyond_ceiling:
            return self.share_of_ceiling >= NEAR_CEILING if _finite(self.share_of_ceiling) else None
        if not _finite(self.ratio):
            return None
        return self.ratio >= self.goal.ratio

    def as_dict(self) -> dict[str, Any]:
        return {"goal": self.goal.label, "issue": self.goal.issue, "peer": self.goal.peer, "kind": self.goal.kind,
                "size": self.size, "partitions": self.partitions, "goal_ratio": self.goal.ratio,
                "ratio": self.ratio, "pybroker_msgs_per_s": self.ours, "peer_msgs_per_s": self.theirs,
                "ceiling_msgs_per_s": self.ceiling.msgs_per_s, "ceiling": self.ceiling.source,
                "beyond_ceiling": self.beyond_ceiling, "share_of_ceiling": self.share_of_ceiling, "met": self.met}


def judge(cells: Iterable[Cell], disk_mb_per_s: Mapping[int, float],
          goals: Iterable[Goal] = THROUGHPUT_GOALS) -> list[Verdict]:
    """Every goal in every measured cell it covers whose peer ran in this run."""
    cells = list(cells)
    verdicts = []
    for goal in goals:
        for cell in sorted(cells, key=lambda c: (c.size, c.partitions)):
            if not goal.covers(cell.kind, cell.size, cell.partitions) or goal.peer not in cell.runs:
                continue
            verdicts.append(Verdict(goal, cell.size, cell.partitions, cell.median(OURS), cell.median(goal.peer),
                                    cell.ratio(OURS, goal.peer), ceiling_for(cell, disk_mb_per_s, goal.disk_bound)))
    return verdicts


@dataclass(frozen=True)
class Limit:
    """A goal that is a bound, not a ratio: pybroker's `value` at most `limit` (lower is better)."""

    name: str
    value: float
    limit: float
    unit: str
    basis: str = ""  # how the limit was had: "Kafka 1,200 MB / 5"

    @property
    def met(self) -> bool | None:
        return None if not (_finite(self.value) and _finite(self.limit)) else self.value <= self.limit

    def as_dict(self) -> dict[str, Any]:
        return {"goal": self.name, "value": self.value, "limit": self.limit, "unit": self.unit, "basis": self.basis,
                "met": self.met}


def cpu_limits(cells: Iterable[Cell], peers: Iterable[str] = KAFKA_PEERS) -> list[Limit]:
    """Broker CPU seconds per GB at most each Kafka profile's, in every cell both ran."""
    limits = []
    for peer in peers:
        for cell in sorted(cells, key=lambda c: (c.kind != "produce", c.size, c.partitions)):
            if OURS in cell.runs and peer in cell.runs:
                limits.append(Limit(f"CPU s/GB {cell.kind} {size_label(cell.size)} x{cell.partitions}p <= {peer}",
                                    cell.median(OURS, "cpu_s_per_gb"), cell.median(peer, "cpu_s_per_gb"), "s/GB"))
    return limits


def share_limits(name: str, values: Mapping[str, float | None], unit: str,
                 peers: Iterable[str] = KAFKA_PEERS, share: float = KAFKA_SHARE_GOAL) -> list[Limit]:
    """pybroker's `values[OURS]` at most `share` of each Kafka profile's (peak RSS, start-to-ready)."""
    ours = _number(values.get(OURS))
    return [Limit(f"{name} <= {peer} / {1 / share:g}", ours, _number(values[peer]) * share, unit,
                  f"{peer} {_number(values[peer]):,.3g} {unit} / {1 / share:g}")
            for peer in peers if peer in values and OURS in values]


def latency_limits(p99_ms: Mapping[str, float], peers: Iterable[str] = KAFKA_PEERS,
                   bound_ms: float = LATENCY_P99_GOAL_MS) -> list[Limit]:
    """End-to-end p99 at most each Kafka profile's and at most `bound_ms`."""
    if OURS not in p99_ms:
        return []
    ours = p99_ms[OURS]
    limits = [Limit(f"end-to-end p99 <= {peer}", ours, p99_ms[peer], "ms") for peer in peers if peer in p99_ms]
    return [*limits, Limit(f"end-to-end p99 <= {bound_ms:g} ms", ours, bound_ms, "ms")]


def _number(value: float | None) -> float:
    return float("nan") if value is None else float(value)

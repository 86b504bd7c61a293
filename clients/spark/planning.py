"""Offset arithmetic for a read: which offset range each Spark task reads, and how much a micro-batch takes.

Pure functions over offsets the driver already fetched (and one small stateful rate limiter), so the
rules can be tested with hypothesis and no broker:

- `batch_ranges` / `stream_ranges`: one `OffsetRange` per topic-partition, with Spark's data-loss rules;
- `split_ranges`: `minPartitions` cuts large ranges into contiguous pieces;
- `pack_ranges`: more ranges than the cluster runs at once share tasks (a Python task's setup is costly);
- `BacklogShares`: `maxOffsetsPerTrigger` split across partitions in proportion to their backlog, never
  more than the limit in total, and never starving a partition with backlog for more than a few batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pybroker.clients.spark.data_loss import report_data_loss
from pybroker.clients.spark.offsets import Offsets, TopicPartition, describe


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one topic-partition: what one Spark task reads. Picklable, as Spark needs."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Offsets in the range; records may be fewer (compaction holes, transaction markers)."""
        return max(0, self.end - self.start)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def _ordered(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(tps)  # named tuples: by topic, then partition number


def batch_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """A batch read's ranges: both bounds resolved for the same partitions; an end before its start is an error."""
    ranges = []
    for tp in _ordered(start):
        if end[tp] < start[tp]:
            raise ValueError(f"the starting offset {start[tp]} of {tp.topic}-{tp.partition} is after its ending "
                             f"offset {end[tp]}: check startingOffsets/endingOffsets (or their timestamps)")
        ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
    return ranges


def stream_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                  earliest_of_new: Mapping[TopicPartition, int], *, fail_on_data_loss: bool) -> list[OffsetRange]:
    """A micro-batch's ranges from Spark's start and end offsets, as Spark's Kafka source plans them.

    Partitions in `end` but not in `start` appeared since the last batch and are read from their earliest
    offset (`earliest_of_new`). Partitions that vanished, and partitions whose end is before their start
    (the topic was deleted and created again), are data loss.
    """
    gone = [tp for tp in start if tp not in end]
    if gone:
        report_data_loss(f"partitions {describe({tp: start[tp] for tp in gone})} are no longer in the "
                         "subscription's topics", fail=fail_on_data_loss)
    ranges = []
    for tp in _ordered(end):
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is None:
            report_data_loss(f"new partition {tp.topic}-{tp.partition} was deleted before it could be read",
                             fail=fail_on_data_loss)
            continue
        if end[tp] < begin:
            report_data_loss(f"partition {tp.topic}-{tp.partition}'s offset went back from {begin} to "
                             f"{end[tp]}", fail=fail_on_data_loss)
            continue
        ranges.append(OffsetRange(tp.topic, tp.partition, begin, end[tp]))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges; with `minPartitions`, cut ranges into about that many contiguous pieces.

    The piece size is total // minPartitions, so there are at least min(minPartitions, total offsets)
    pieces, and larger partitions get more of them.
    """
    kept = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(kept) >= min_partitions:
        return kept
    total = sum(r.size for r in kept)
    piece = max(1, total // min_partitions)
    pieces: list[OffsetRange] = []
    for r in kept:
        count = -(-r.size // piece)
        base, extra = divmod(r.size, count)
        offset = r.start
        for i in range(count):
            length = base + (1 if i < extra else 0)
            pieces.append(OffsetRange(r.topic, r.partition, offset, offset + length))
            offset += length
    return pieces


def pack_ranges(ranges: list[OffsetRange], tasks: int | None) -> list[tuple[OffsetRange, ...]]:
    """The ranges grouped into at most `tasks` Spark tasks of about equal size (None: one task per range).

    Why: every task of a Python data source costs Spark a round of Python worker setup (about a tenth of
    a second on a quiet machine, far more on a busy one), which for small ranges is more than reading them.
    More tasks than the cluster runs at once only queue those costs, so ranges beyond `tasks` (the
    session's default parallelism, or minPartitions if larger) share a task: largest range first into the
    emptiest task (ties to the lower task), each task reading its ranges in topic, partition, offset order.
    """
    if tasks is None or len(ranges) <= tasks:
        return [(r,) for r in ranges]
    if tasks < 1:
        raise ValueError(f"tasks must be at least 1, got {tasks}")
    bins: list[list[OffsetRange]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for r in sorted(ranges, key=lambda r: (-r.size, r.topic, r.partition, r.start)):
        emptiest = min(range(tasks), key=lambda i: (loads[i], i))
        bins[emptiest].append(r)
        loads[emptiest] += r.size
    return [tuple(sorted(b, key=lambda r: (r.topic, r.partition, r.start))) for b in bins if b]


class BacklogShares:
    """`maxOffsetsPerTrigger`: how many offsets each partition may take this micro-batch.

    Each partition gets the whole part of `limit * backlog / total backlog`; the units left over (fewer
    than the number of partitions) go one each to partitions that would otherwise get nothing, those that
    have waited the most batches first, then by largest remainder. So the grants never add up to more than
    the limit, never exceed a partition's backlog, and a partition with backlog waits at most as many
    batches as there are partitions with backlog. The waiting counts live in this object, which lives as
    long as the streaming query's reader (a restart forgets them, which only resets the order).
    """

    def __init__(self) -> None:
        self.waited: dict[TopicPartition, int] = {}

    def allocate(self, backlog: Mapping[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
        if limit < 1:
            raise ValueError(f"the limit must be at least 1, got {limit}")
        pending = {tp: n for tp, n in backlog.items() if n > 0}
        total = sum(pending.values())
        if total <= limit:
            grant = dict(pending)
        else:
            grant, remainder = {}, {}
            for tp, n in pending.items():
                grant[tp], remainder[tp] = divmod(limit * n, total)
            leftover = limit - sum(grant.values())
            order = sorted(pending, key=lambda tp: (grant[tp] > 0, -self.waited.get(tp, 0), -remainder[tp],
                                                    tp.topic, tp.partition))
            for tp in order[:leftover]:
                grant[tp] += 1
        self.waited = {tp: 0 if grant[tp] else self.waited.get(tp, 0) + 1 for tp in pending}
        return {tp: grant.get(tp, 0) for tp in backlog}


def capped_end(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int | None, shares: BacklogShares) -> Offsets:
    """The end offsets of the next micro-batch: `latest`, or less where `limit` caps the backlog.

    A partition whose latest offset is below its start keeps the latest offset, so that planning reports it
    as data loss (as Spark does) rather than this function hiding it.
    """
    if limit is None:
        return dict(latest)
    backlog = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start[tp]}
    grant = shares.allocate(backlog, limit)
    return {tp: start[tp] + grant[tp] if tp in grant else latest[tp] for tp in latest}

"""Offset-range planning: ranges, minPartitions splits, and the maxOffsetsPerTrigger split (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.clients.spark.data_loss import DataLossError
from pybroker.clients.spark.offsets import TopicPartition, from_json_dict, to_json_dict
from pybroker.clients.spark.planning import (
    BacklogShares,
    OffsetRange,
    batch_ranges,
    capped_end,
    pack_ranges,
    split_ranges,
    stream_ranges,
)

TPS = [TopicPartition(t, p) for t in ("a", "b") for p in range(6)]
tp_sets = st.lists(st.sampled_from(TPS), min_size=1, max_size=len(TPS), unique=True)


# -- offsets JSON ---------------------------------------------------------------------------------------
@given(st.dictionaries(st.sampled_from([*TPS, TopicPartition("a", 10), TopicPartition("a", 2)]),
                       st.integers(0, 2**40)))
def test_offset_json_is_canonical_and_round_trips(offsets: dict[TopicPartition, int]) -> None:
    value = to_json_dict(offsets)
    assert json.dumps(value) == json.dumps(value, sort_keys=True), "Spark compares offsets as JSON strings"
    assert from_json_dict(json.loads(json.dumps(value))) == offsets


def test_offset_json_matches_sparks_shape() -> None:
    assert to_json_dict({TopicPartition("t", 1): 5, TopicPartition("t", 0): 3}) == {"t": {"0": 3, "1": 5}}


# -- batch and stream ranges ----------------------------------------------------------------------------
def test_batch_ranges_refuse_an_end_before_the_start() -> None:
    tp = TopicPartition("t", 0)
    assert batch_ranges({tp: 2}, {tp: 5}) == [OffsetRange("t", 0, 2, 5)]
    with pytest.raises(ValueError, match="starting offset 6 of t-0 is after its ending offset 5"):
        batch_ranges({tp: 6}, {tp: 5})


def test_stream_ranges_read_new_partitions_from_their_earliest() -> None:
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    got = stream_ranges({t0: 4}, {t0: 9, t1: 3}, {t1: 1}, fail_on_data_loss=True)
    assert got == [OffsetRange("t", 0, 4, 9), OffsetRange("t", 1, 1, 3)]


@pytest.mark.parametrize(("start", "end", "earliest_of_new"), [
    ({TopicPartition("t", 0): 4, TopicPartition("t", 1): 0}, {TopicPartition("t", 0): 9}, {}),  # partition gone
    ({TopicPartition("t", 0): 4}, {TopicPartition("t", 0): 2}, {}),  # offsets went back: topic recreated
    ({}, {TopicPartition("t", 0): 2}, {}),  # a new partition vanished before its earliest was read
])
def test_stream_ranges_report_data_loss_or_skip(start: dict[TopicPartition, int], end: dict[TopicPartition, int],
                                                earliest_of_new: dict[TopicPartition, int]) -> None:
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        stream_ranges(start, end, earliest_of_new, fail_on_data_loss=True)
    kept = stream_ranges(start, end, earliest_of_new, fail_on_data_loss=False)
    assert all(r.end >= r.start for r in kept)


# -- minPartitions --------------------------------------------------------------------------------------
ranges_strategy = st.lists(st.tuples(st.sampled_from(TPS), st.integers(0, 1000), st.integers(0, 5000)),
                           max_size=8, unique_by=lambda x: x[0]).map(
    lambda rows: [OffsetRange(tp.topic, tp.partition, start, start + size) for tp, start, size in rows])


@given(ranges_strategy, st.one_of(st.none(), st.integers(1, 64)))
def test_split_ranges_cover_each_range_exactly_with_enough_pieces(ranges: list[OffsetRange],
                                                                  min_partitions: int | None) -> None:
    pieces = split_ranges(ranges, min_partitions)
    assert all(p.size > 0 for p in pieces)
    for r in ranges:
        mine = [p for p in pieces if p.topic_partition == r.topic_partition]
        assert [(p.start, p.end) for p in mine] == sorted((p.start, p.end) for p in mine)
        covered = [o for p in mine for o in range(p.start, p.end)]
        assert covered == list(range(r.start, r.end)), "contiguous, in order, no overlap, nothing missed"
    total = sum(r.size for r in ranges)
    nonempty = sum(1 for r in ranges if r.size)
    if min_partitions is None:
        assert len(pieces) == nonempty
    else:
        assert len(pieces) >= min(min_partitions, total)
        assert len(pieces) <= max(nonempty, 2 * min_partitions + nonempty)


def test_min_partitions_splits_bigger_partitions_into_more_pieces() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100)], 10)
    assert [p.partition for p in pieces].count(0) == 9 and [p.partition for p in pieces].count(1) == 1


# -- maxOffsetsPerTrigger -------------------------------------------------------------------------------
backlogs = st.dictionaries(st.sampled_from(TPS), st.integers(0, 10_000), min_size=1)


@given(backlogs, st.integers(1, 5000))
def test_a_grant_never_exceeds_the_limit_or_a_backlog(backlog: dict[TopicPartition, int], limit: int) -> None:
    grant = BacklogShares().allocate(backlog, limit)
    assert set(grant) == set(backlog)
    assert sum(grant.values()) == min(limit, sum(backlog.values())), "takes all it may, and no more"
    assert all(0 <= grant[tp] <= backlog[tp] for tp in backlog)


@given(backlogs, st.integers(1, 5000))
def test_grants_are_proportional_to_backlog(backlog: dict[TopicPartition, int], limit: int) -> None:
    grant = BacklogShares().allocate(backlog, limit)
    total = sum(backlog.values())
    if total > limit:
        for tp, n in backlog.items():
            assert abs(grant[tp] - limit * n / total) < 1 + 1e-9


@settings(max_examples=200)
@given(st.integers(1, 20), st.lists(st.dictionaries(st.sampled_from(TPS), st.integers(0, 50)), min_size=1,
                                    max_size=40), st.dictionaries(st.sampled_from(TPS), st.integers(1, 10_000),
                                                                  min_size=1))
def test_no_partition_with_backlog_starves(limit: int, arrivals: list[dict[TopicPartition, int]],
                                           initial: dict[TopicPartition, int]) -> None:
    """Batch after batch, with new records arriving, a partition with backlog is served before it has waited
    as many batches as the most partitions with backlog at any time it was waiting."""
    shares = BacklogShares()
    backlog = dict(initial)
    waiting: dict[TopicPartition, int] = {}
    peak: dict[TopicPartition, int] = {}  # most partitions pending while tp was waiting
    for batch in range(len(arrivals) + len(TPS) + 1):
        if batch < len(arrivals):
            for tp, n in arrivals[batch].items():
                backlog[tp] = backlog.get(tp, 0) + n
        grant = shares.allocate(backlog, limit)
        assert sum(grant.values()) <= limit
        pending = sum(1 for n in backlog.values() if n > 0)
        for tp, n in list(backlog.items()):
            if n > 0 and grant[tp] == 0:
                waiting[tp] = waiting.get(tp, 0) + 1
                peak[tp] = max(peak.get(tp, 0), pending)
                assert waiting[tp] < peak[tp], f"{tp} waited {waiting[tp]} batches; at most {peak[tp]} pending"
            else:
                waiting.pop(tp, None)
                peak.pop(tp, None)
            backlog[tp] = n - grant[tp]


def test_one_offset_per_batch_still_reaches_a_tiny_partition() -> None:
    big, tiny = TopicPartition("t", 0), TopicPartition("t", 1)
    shares = BacklogShares()
    served = [shares.allocate({big: 1_000_000, tiny: 1}, 1) for _ in range(2)]
    assert {tp for grant in served for tp, n in grant.items() if n} == {big, tiny}


def test_capped_end_applies_the_limit_and_leaves_going_back_to_planning() -> None:
    t0, t1, t2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    start = {t0: 0, t1: 100, t2: 50}
    latest = {t0: 300, t1: 200, t2: 10}  # t2 went back: planning reports it, capping does not hide it
    assert capped_end(start, latest, None, BacklogShares()) == latest
    end = capped_end(start, latest, 40, BacklogShares())
    assert end == {t0: 30, t1: 110, t2: 10}


# -- pack_ranges ---------------------------------------------------------------------------------------
def test_ranges_within_the_parallelism_keep_a_task_each() -> None:
    ranges = [OffsetRange("t", p, 0, 10) for p in range(3)]
    assert pack_ranges(ranges, 4) == [(r,) for r in ranges]
    assert pack_ranges(ranges, None) == [(r,) for r in ranges]


def test_eight_equal_partitions_on_two_cores_make_two_tasks_of_four() -> None:
    tasks = pack_ranges([OffsetRange("t", p, 0, 125_000) for p in range(8)], 2)
    assert [[r.partition for r in task] for task in tasks] == [[0, 2, 4, 6], [1, 3, 5, 7]]


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 1000), min_size=1, max_size=40), tasks=st.integers(1, 10))
def test_packing_keeps_every_range_once_in_at_most_that_many_balanced_tasks(sizes: list[int], tasks: int) -> None:
    ranges = [OffsetRange("t", p, 5, 5 + size) for p, size in enumerate(sizes)]
    packed = pack_ranges(ranges, tasks)
    assert sorted(r.partition for task in packed for r in task) == list(range(len(ranges)))
    assert len(packed) <= max(tasks, 1) and all(packed)
    if len(ranges) > tasks:
        loads = [sum(r.size for r in task) for task in packed]
        assert max(loads) - min(loads) <= max(sizes)  # greedy, largest first: within one range of even
    for task in packed:
        assert list(task) == sorted(task, key=lambda r: (r.topic, r.partition, r.start))

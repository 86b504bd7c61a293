"""The grid runs each cell's targets in a rotated order, so that no target always goes first, and every
target's consume phase reads the same records."""

from __future__ import annotations

from bench.grid import rotated


def test_each_cell_starts_one_target_further_on() -> None:
    names = ["pybroker", "kafka", "kafka-fsync", "null"]
    orders = [rotated(names, turn) for turn in range(5)]
    assert [order[0] for order in orders] == ["pybroker", "kafka", "kafka-fsync", "null", "pybroker"]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert rotated([], 3) == [] and rotated(["one"], 7) == ["one"]


def test_every_target_consumes_the_newest_records() -> None:
    from bench.fleet import consume_slices
    from bench.grid import newest

    starts = newest({0: 100, 1: 30, 2: 70}, 120, 3)
    assert starts == {0: 60, 1: 0, 2: 30}  # 40 from each, a partition holding fewer read whole
    slices = consume_slices({0: 100, 1: 30, 2: 70}, 2, starts)
    assert sorted(r for s in slices for r in s) == [(0, 60, 100), (1, 0, 30), (2, 30, 70)]
    split = consume_slices({0: 100}, 2, {0: 60})
    assert split == [[(0, 60, 80)], [(0, 80, 100)]]

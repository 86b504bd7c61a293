"""The send-buffer probe: a small run splices every byte asked for to a real reading process, with the
socket buffer asked for (doubled by Linux), and its table has one row per size."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import send_buffer_cost
from bench.send_buffer_cost import SendCost, measure, report, write_file

MIB = 1 << 20


@pytest.fixture
def pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(send_buffer_cost, "FILE_BYTES", 4 * MIB)
    path = tmp_path / "pages"
    write_file(path, 4 * MIB)
    return path


@pytest.mark.parametrize("asked", [-1, 131_072])
def test_a_run_sends_it_all_and_reports_both_sides(pages: Path, asked: int) -> None:
    cost = measure(pages, asked, 10 * MIB)  # more than the file: it wraps around
    assert cost.asked == asked
    if asked > 0:
        assert cost.granted == 2 * asked  # Linux's bookkeeping doubles what it keeps
    assert cost.gb_per_s > 0 and cost.waits_per_gb >= 0
    for figure in (cost.sender_user, cost.sender_system, cost.receiver_user, cost.receiver_system):
        assert figure >= 0 and not math.isnan(figure)  # the reader read all of it and reported


def test_the_table_has_a_row_per_size_with_medians() -> None:
    figures = ((1.0, 0.1), (3.0, 0.3), (2.0, 0.2))  # (GB/s, sender system s/GB) of three runs
    runs = {size: [SendCost(size, 2 * size, rate, 0.01, system, 0.0, 0.2, 10.0) for rate, system in figures]
            for size in (65_536, 524_288)}
    header, *rows = report(runs)
    assert "sender user+sys" in header and len(rows) == 2
    assert rows[1].split()[:3] == ["524,288", "1,048,576", "2.00"]
    assert "0.010+0.200" in rows[0]

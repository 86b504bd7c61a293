"""The benchmark's judging and report (`bench/goals.py`, `bench/report.py`) and its Kafka peer's settings
(`bench/kafka_peer.py`): figures in, verdicts and text out. Nothing here is timed or starts a broker."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.goals import (
    KAFKA_PEERS,
    THROUGHPUT_GOALS,
    Ceiling,
    Goal,
    Verdict,
    ceiling_for,
    client_ceiling,
    cpu_limits,
    disk_ceiling,
    judge,
    latency_limits,
    share_limits,
    target_ceiling,
)
from bench.grid import CEILING, DELETE_SOON, Cell, Phase, memory_mb, peak_rss_mb
from bench.kafka_peer import PROFILES, KafkaProcess, jvm_flags
from bench.load import Latency, LatencyWindows
from bench.procfs import descendants
from bench.report import brokers_text, goals_text, grid_text, verdict_text
from tests.kafka_node import kraft_properties

KIB = 1024


def phase(msgs_per_s: float, size: int = KIB, cpu_s: float = 1.0) -> Phase:
    """One second's phase at `msgs_per_s` records of `size` bytes, costing the broker `cpu_s`."""
    return Phase(records=int(msgs_per_s), payload_bytes=int(msgs_per_s) * size, seconds=1.0, cpu_s=cpu_s,
                 rss_mb=50.0)


def cell(kind: str, size: int, partitions: int, **rates: float) -> Cell:
    return Cell(kind, size, partitions, {name.replace("_", "-"): [phase(rate, size)] for name, rate in rates.items()})


def test_goals_cover_the_cells_the_issue_names() -> None:
    fsync_produce = next(g for g in THROUGHPUT_GOALS if g.peer == "kafka-fsync" and g.kind == "produce")
    assert fsync_produce.covers("produce", 10240, 256) and not fsync_produce.covers("produce", 10240, 1024)
    assert not fsync_produce.covers("produce", 100, 1) and not fsync_produce.covers("consume", 1024, 1)
    consume_defaults = next(g for g in THROUGHPUT_GOALS if g.peer == "kafka" and g.kind == "consume")
    assert all(consume_defaults.covers("consume", s, n) for s in (100, 1024, 10240) for n in (1, 16, 256, 1024))
    assert fsync_produce.disk_bound and not consume_defaults.disk_bound
    assert fsync_produce.label == "produce 1 KiB/10 KiB x1/16/256p >= 1.5x kafka-fsync"


def test_the_client_ceiling_is_the_null_broker_unless_a_broker_beat_it() -> None:
    assert client_ceiling(cell("consume", KIB, 1, pybroker=500, kafka=400, null=600)) == (600, False)
    assert client_ceiling(cell("consume", KIB, 1, pybroker=500, kafka=700, null=600)) == (700, True)
    assert math.isnan(client_ceiling(cell("consume", KIB, 1))[0])


def test_the_disk_bounds_produce_only_where_the_goal_says_so() -> None:
    produce = cell("produce", 10 * KIB, 16, pybroker=20_000, null=100_000)
    disk = {16: 307.2}  # MB/s: 30,000 records of 10 KiB a second
    assert disk_ceiling(produce, disk) == pytest.approx(30_000)
    assert ceiling_for(produce, disk, disk_bound=True) == Ceiling(pytest.approx(30_000), "disk")
    assert ceiling_for(produce, disk, disk_bound=False) == Ceiling(100_000, "clients")
    assert target_ceiling(produce, "kafka-fsync", disk).source == "disk"
    assert target_ceiling(produce, "kafka", disk).source == "clients"
    assert math.isnan(disk_ceiling(cell("consume", KIB, 16), disk))


def verdict(ratio_goal: float, ours: float, theirs: float, ceiling: float, source: str = "clients") -> Verdict:
    return Verdict(Goal(34, "kafka-fsync", "produce", ratio_goal), KIB, 1, ours, theirs, ours / theirs,
                   Ceiling(ceiling, source))


def test_a_goal_within_the_ceiling_is_judged_by_the_ratio() -> None:
    assert verdict(1.5, 150, 100, 1000).met is True
    assert verdict(1.5, 149, 100, 1000).met is False
    assert not verdict(1.5, 149, 100, 1000).beyond_ceiling


@pytest.mark.parametrize(("ours", "met"), [(900, True), (899, False), (1000, True)])
def test_a_goal_beyond_the_ceiling_is_met_at_90_percent_of_it(ours: float, met: bool) -> None:
    v = verdict(1.5, ours, 800, 1000, "disk")  # 1.5x the peer is 1,200: beyond the ceiling of 1,000
    assert v.beyond_ceiling and v.met is met
    assert v.share_of_ceiling == pytest.approx(ours / 1000)


def test_a_missing_figure_is_neither_met_nor_missed() -> None:
    assert verdict(1.5, float("nan"), 100, 1000).met is None
    assert verdict(1.5, 100, float("nan"), 1000).met is None


def test_judging_takes_each_goal_in_the_cells_it_covers_against_the_lower_of_goal_and_ceiling() -> None:
    disk = {1: 1000.0, 1024: 1000.0}
    cells = [
        cell("produce", 10 * KIB, 1, pybroker=70_000, kafka=50_000, kafka_fsync=60_000, null=200_000),
        cell("produce", 10 * KIB, 1024, pybroker=10_000, kafka=50_000, kafka_fsync=5_000, null=200_000),
        cell("consume", 100, 1, pybroker=900, kafka=1000, null=1000),
    ]
    verdicts = {(v.goal.peer, v.goal.kind, v.size, v.partitions): v for v in judge(cells, disk)}
    # 1.5 x 60,000 asks for 90,000, the disk takes 97,656 records of 10 KiB a second: by the ratio, missed
    fsync = verdicts["kafka-fsync", "produce", 10 * KIB, 1]
    assert not fsync.beyond_ceiling and fsync.met is False
    assert ("kafka-fsync", "produce", 10 * KIB, 1024) not in verdicts  # 1,024 partitions: not in that goal
    assert verdicts["kafka", "produce", 10 * KIB, 1].met is True
    assert verdicts["kafka", "produce", 10 * KIB, 1024].met is False
    consume = verdicts["kafka", "consume", 100, 1]  # 1x Kafka asks for no more than the ceiling: the ratio
    assert not consume.beyond_ceiling and consume.met is False
    assert not any(peer == "tansu" for peer, *_ in verdicts)  # Tansu did not run: its goals are not judged


def test_a_consume_goal_at_the_clients_ceiling_is_met_near_it() -> None:
    consume = cell("consume", KIB, 16, pybroker=950, kafka_fsync=900, null=1000)
    v = next(v for v in judge([consume], {}) if v.goal.peer == "kafka-fsync")
    assert v.beyond_ceiling and v.ceiling.source == "clients" and v.met is True  # 1,350 asked, 950 of 1,000
    assert verdict_text(v) == "1.06x 95%c yes"


def test_bounds_cpu_rss_start_and_latency() -> None:
    produce = Cell("produce", KIB, 1, {"pybroker": [phase(1000, cpu_s=0.5)], "kafka": [phase(1000, cpu_s=1.0)],
                                       "kafka-fsync": [phase(1000, cpu_s=0.25)]})
    cpu = {lim.name: lim.met for lim in cpu_limits([produce])}
    assert cpu == {"CPU s/GB produce 1 KiB x1p <= kafka": True, "CPU s/GB produce 1 KiB x1p <= kafka-fsync": False}
    rss = share_limits("peak RSS", {"pybroker": 100.0, "kafka": 600.0, "kafka-fsync": 400.0}, "MB")
    assert [(lim.name, lim.met) for lim in rss] == [("peak RSS <= kafka / 5", True),
                                                   ("peak RSS <= kafka-fsync / 5", False)]
    assert share_limits("start-to-ready", {"kafka": 5.0}, "s") == []  # pybroker did not run
    latency = latency_limits({"pybroker": 4.0, "kafka": 3.0, "kafka-fsync": 40.0})
    assert [(lim.name, lim.met) for lim in latency] == [
        ("end-to-end p99 <= kafka", False), ("end-to-end p99 <= kafka-fsync", True), ("end-to-end p99 <= 5 ms", True)]
    assert latency_limits({"pybroker": float("nan")})[0].met is None


def test_the_grid_text_gives_every_target_its_ratio_ceiling_and_share() -> None:
    produce = cell("produce", KIB, 1, pybroker=200_000, kafka=100_000, kafka_fsync=50_000, tansu=250_000,
                   null=300_000)
    text = grid_text([produce], processes=2, repeats=1, disk={1: 102.4})  # the disk: 100,000 records a second
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("    ")}
    assert list(rows) == ["pybroker", "kafka", "kafka-fsync", "tansu", "null"]
    assert "d100,000" in rows["pybroker"] and "200%" in rows["pybroker"]  # pybroker and kafka-fsync fsync
    assert "2.00x" in rows["kafka"] and "c300,000" in rows["kafka"] and "33%" in rows["kafka"]
    assert "4.00x" in rows["kafka-fsync"] and "d100,000" in rows["kafka-fsync"]
    assert "0.80x" in rows["tansu"] and "c300,000" in rows["tansu"]


def test_the_goals_and_brokers_text() -> None:
    cells = [cell("consume", KIB, 1, pybroker=950, kafka_fsync=900, null=1000)]
    limits = share_limits("peak RSS", {"pybroker": 100.0, "kafka": 600.0}, "MB")
    text = goals_text(judge(cells, {}), limits, [1, 16])
    assert "[34] consume >= 1.5x kafka-fsync" in text and "1.06x 95%c yes" in text
    assert "peak RSS <= kafka / 5" in text and "100.00 MB <= 120.00 MB  yes" in text
    latency = LatencyWindows(1000, [Latency(1000, 1.0, [1.0, 2.0, 3.0])])
    table = brokers_text({"pybroker": 0.5, "kafka": 5.0}, {"pybroker": 100.0, "kafka": 600.0},
                         {"pybroker": latency}, {"pybroker": 0.2, "kafka": None}, {"kafka": "defaults"},
                         {"pybroker": 0.45, "kafka": 4.7})
    header, pyb, kafka = table.splitlines()[-3:]
    assert "start CPU" in header
    assert pyb.split()[:5] == ["pybroker", "0.50", "s", "0.45", "s"] and "0.200 s" in pyb
    assert "10.0x" in kafka and "6.0x" in kafka and "4.70 s" in kafka and kafka.rstrip().endswith("defaults")
    without_cpu = brokers_text({"pybroker": 0.5}, {"pybroker": 100.0}, {}, {}, {})
    assert without_cpu.splitlines()[-1].split()[:4] == ["pybroker", "0.50", "s", "-"]


def test_kafka_profiles_and_jvm_flags(tmp_path: Path) -> None:
    assert PROFILES["kafka"] == {} and PROFILES["kafka-fsync"] == {"log.flush.interval.messages": "1"}
    assert set(KAFKA_PEERS) == set(PROFILES)
    flags = jvm_flags("2g")
    assert flags[:2] == ["-Xms2g", "-Xmx2g"] and "-XX:+UseG1GC" in flags
    node = KafkaProcess(tmp_path / "k", "kafka-fsync")
    command = node.command()
    assert command[0] == "java" and command[-2:] == ["kafka.Kafka", str(node.config_path)]
    assert "-Xmx1g" in command and node.log_path.name == "kafka-fsync.out"
    written = dict(line.split("=", 1) for line in node.config_path.read_text().splitlines())
    assert written["log.flush.interval.messages"] == "1"
    assert written["listeners"] == f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
    assert written == {**kraft_properties(node.port, node.controller_port, tmp_path / "k" / "data"),
                       **DELETE_SOON, "log.flush.interval.messages": "1"}


def test_a_broker_s_worker_processes_count_in_its_figures() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in descendants(os.getpid())
        assert peak_rss_mb(os.getpid()) > memory_mb(os.getpid(), "VmHWM")
    finally:
        child.kill()
        child.wait()
    assert CEILING == "null"


def test_a_latency_figure_is_the_median_of_its_windows() -> None:
    """One window's stall (a single pause of the host is the whole p99 of a 10 s window) moves one window,
    not the figure; a window with no samples does not count; notes say which window they are from."""
    steady = [Latency(1000, 10.0, [0.5] * 980 + [2.0] * 20) for _ in range(2)]
    stalled = Latency(1000, 10.0, [0.5] * 850 + [120.0] * 150, note="received 1,000 of 10,000")
    windows = LatencyWindows(1000, [steady[0], stalled, steady[1]])
    assert stalled.percentile(0.99) == 120.0 and steady[0].percentile(0.99) == 2.0
    assert windows.percentile(0.99) == 2.0 and windows.percentile(0.5) == 0.5
    assert windows.samples == 3000 and windows.note == "window 2: received 1,000 of 10,000"
    assert LatencyWindows(1000, [Latency(1000, 1.0), steady[0]]).percentile(0.99) == 2.0
    assert LatencyWindows(1000).percentile(0.99) != LatencyWindows(1000).percentile(0.99)  # NaN: nothing measured

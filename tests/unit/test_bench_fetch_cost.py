"""The benchmark's fetch round trip: its pre-encoded frames are the fetches librdkafka sends for one
partition, and a small run against a real pybroker and the null broker reads whole answers of records."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench import fetch_cost
from bench.fetch_cost import FetchCost, fetch_frames
from pybroker.protocol.frame_codec import decode_request
from tests.integration.brokers import kill_all


def test_each_frame_fetches_one_partition_from_its_own_offset() -> None:
    frames = fetch_frames("t", 1000, 97)
    assert len(frames) == len(range(0, 1000 - 97, 97))
    for i, frame in enumerate(frames):
        (size,) = struct.unpack_from(">i", frame)
        assert size == len(frame) - 4
        header, request = decode_request(bytearray(frame[4:]))
        assert (header.api_key, header.api_version, header.correlation_id) == (1, fetch_cost.FETCH_VERSION, i)
        (topic,) = request.topics
        (partition,) = topic.partitions
        assert (topic.topic, partition.partition, partition.fetch_offset) == ("t", 0, 97 * i)
        assert partition.partition_max_bytes == fetch_cost.PARTITION_MAX_BYTES
        assert request.session_epoch == -1  # no fetch session: every fetch names its partition


def test_figures_per_fetch() -> None:
    cost = FetchCost("pybroker", fetches=500, answer_bytes=1000, seconds=1.0, p50_us=400, p99_us=600,
                     user_s=0.05, system_s=0.1)
    assert cost.per_fetch_us(cost.user_s) == pytest.approx(100)
    assert cost.per_fetch_us(cost.system_s) == pytest.approx(200)


def test_a_small_run_reads_whole_answers_from_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch_cost, "BATCHES", 8)
    monkeypatch.setattr(fetch_cost, "WARM_UP", 5)
    try:
        results = fetch_cost.run(tmp_path, fetches=20)
    finally:
        kill_all()
    assert [r.target for r in results] == ["pybroker", "null broker"]
    for r in results:
        # one whole ~1 MB batch of 10 KiB records per answer, as librdkafka's consumer gets them
        assert r.fetches == 20 and r.answer_bytes > fetch_cost.RECORDS_PER_BATCH * fetch_cost.SIZE
        assert 0 < r.p50_us <= r.p99_us

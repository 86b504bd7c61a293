"""The benchmark's CPU-per-request table: its pre-encoded frames are produce requests a broker takes as
they are (one partition each, a valid batch), and a small run against a real pybroker counts every request
and some broker CPU."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.request_cost import RequestCost, produce_frames, run
from pybroker.protocol.frame_codec import decode_request
from pybroker.protocol.records.batch import crc_ok, iter_batches
from pybroker.protocol.records.record import decode_records
from tests.integration.brokers import kill_all


def test_each_frame_is_one_acks_all_produce_to_its_own_partition() -> None:
    frames = produce_frames("t", 100, 7, 3)
    assert len(frames) == 3
    for partition, frame in enumerate(frames):
        (size,) = struct.unpack_from(">i", frame)
        assert size == len(frame) - 4
        header, request = decode_request(bytearray(frame[4:]))
        assert (header.api_key, header.api_version, header.correlation_id) == (0, 9, partition)
        assert request.acks == -1
        (topic,) = request.topic_data
        (data,) = topic.partition_data
        assert (topic.name, data.index) == ("t", partition)
        ((position, batch),) = list(iter_batches(bytes(data.records)))
        assert crc_ok(bytes(data.records), position, batch)
        records = decode_records(bytes(data.records), position, batch)
        assert [len(r.value) for r in records] == [100] * 7


def test_figures_per_request_and_per_gb() -> None:
    cost = RequestCost(size=1000, records=100, partitions=1, requests=500, seconds=2.0, user_s=0.05, system_s=0.025)
    assert cost.payload_gb == pytest.approx(0.05)
    assert cost.per_request_us(cost.user_s) == pytest.approx(100)
    assert cost.per_gb(cost.system_s) == pytest.approx(0.5)


def test_a_small_run_against_pybroker_counts_every_request(tmp_path: Path) -> None:
    try:
        (cost,) = run(tmp_path, requests=40, cases=((100, 4, 2),))
    finally:
        kill_all()
    assert (cost.requests, cost.partitions) == (40, 2)
    assert cost.seconds > 0 and cost.user_s + cost.system_s > 0

"""AlterReplicaLogDirs through the real server and our codecs: Kafka's per-partition codes, the future
replica in DescribeLogDirs while the copy runs, the move itself, and the hostile requests (paths that are
not log dirs, too many partitions)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import alter_replica_log_dirs as arld
from pybroker.protocol.messages import describe_log_dirs as dld
from tests.unit.broker.conftest import RawClient
from tests.unit.storage.helpers import append, batch

E = ErrorCode


@pytest.fixture
async def two_dirs(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    config = BrokerConfig.load({
        "log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}", "listeners": "PLAINTEXT://127.0.0.1:0",
        "max.partitions.per.request": "4", "offsets.topic.num.partitions": "1"})
    broker = BrokerApp(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


@pytest.fixture
async def raw(two_dirs: BrokerApp) -> AsyncIterator[RawClient]:
    reader, writer = await asyncio.open_connection("127.0.0.1", two_dirs.bound_ports[0])
    client = RawClient(reader, writer)
    try:
        yield client
    finally:
        client.close()


def _request(*moves: tuple[str, str, list[int]]) -> arld.AlterReplicaLogDirsRequest:
    return arld.AlterReplicaLogDirsRequest(dirs=[arld.AlterReplicaLogDir(path=path, topics=[
        arld.AlterReplicaLogDirTopic(name=topic, partitions=partitions)]) for path, topic, partitions in moves])


def _codes(response: arld.AlterReplicaLogDirsResponse) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


@pytest.mark.parametrize("version", [1, 2])
async def test_codes_per_partition(two_dirs: BrokerApp, raw: RawClient, version: int) -> None:
    state = two_dirs.state
    state.topics.create("t", 2, 1, {})
    here = state.logs.dir_of("t", 0)
    assert here is not None
    response = await raw.call(_request(
        (str(here), "t", [0]),                        # already there
        ("/etc", "t", [1]),                           # not a log dir
        (str(here) + "/../" + here.name, "nope", [0]),  # normalised to a log dir; no such topic
        (str(here), "t", [7])), version)              # no such partition
    assert _codes(response) == {("t", 0): E.NONE, ("t", 1): E.LOG_DIR_NOT_FOUND, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                                ("t", 7): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert state.logs.moves.futures() == []


async def test_too_many_partitions_are_refused_whole(two_dirs: BrokerApp, raw: RawClient) -> None:
    state = two_dirs.state
    state.topics.create("t", 5, 1, {})
    target = str(state.logs.dirs[0])
    response = await raw.call(_request((target, "t", [0, 1, 2, 3, 4])), 2)
    assert set(_codes(response).values()) == {E.POLICY_VIOLATION}
    assert state.logs.moves.futures() == []


async def test_the_move_shows_a_future_replica_then_lands(two_dirs: BrokerApp, raw: RawClient) -> None:
    state = two_dirs.state
    state.topics.create("t", 1, 1, {})
    log = state.logs.get_log("t", 0)
    assert log is not None
    for _ in range(40):
        append(log, batch(3, value=b"v" * 1000))
    source = state.logs.dir_of("t", 0)
    target = next(d for d in state.logs.dirs if d != source)
    gate = threading.Event()
    mover = state.logs.moves
    copy = mover._copy_then_swap

    def held(*args: Any) -> bool:
        gate.wait(10)
        return copy(*args)

    mover._copy_then_swap = held
    response = await raw.call(_request((str(target), "t", [0])), 2)
    assert _codes(response) == {("t", 0): E.NONE}
    await asyncio.sleep(0.3)
    described = await raw.call(dld.DescribeLogDirsRequest(topics=[dld.DescribableLogDirTopic(
        topic="t", partitions=[0])]), 4)
    rows = {(r.log_dir, p.is_future_key): p for r in described.results for t in r.topics for p in t.partitions}
    assert set(rows) == {(str(source), False), (str(target), True)}
    assert (rows[(str(target), True)].offset_lag, rows[(str(target), True)].partition_size) == (120, 0)
    gate.set()
    deadline = time.monotonic() + 20
    while state.logs.dir_of("t", 0) != target:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    described = await raw.call(dld.DescribeLogDirsRequest(topics=None), 4)
    rows = {(r.log_dir, p.is_future_key): p for r in described.results for t in r.topics if t.name == "t"
            for p in t.partitions}
    assert set(rows) == {(str(target), False)}
    moved = state.logs.get_log("t", 0)
    assert moved is not None and moved.log_end_offset == 120


async def test_an_append_that_waited_for_the_swap_lands_in_the_moved_log(two_dirs: BrokerApp) -> None:
    """A produce that looked the partition up before the swap and appends after it (its append waited on
    the paused log) goes to the moved log: nothing lost, no error to the client (the partition layer
    follows the move)."""
    from pybroker.broker.partitions.leader_append import _append
    from pybroker.broker.partitions.partition import Partition
    from pybroker.protocol.records.batch import parse_header
    from pybroker.protocol.records.validate import check_produce_records

    state = two_dirs.state
    state.topics.create("t", 1, 1, {})
    stale = state.logs.get_log("t", 0)
    assert stale is not None
    append(stale, batch(3))
    source = state.logs.dir_of("t", 0)
    state.logs.moves.move("t", 0, str(next(d for d in state.logs.dirs if d != source)))
    deadline = time.monotonic() + 20
    while state.logs.moves.busy:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    assert stale.closed
    records = batch(2)
    validated = check_produce_records(records, parse_header(records))
    looked_up = Partition(state.replicas, ("t", 0), stale)  # the partition layer still holds the old log
    appending = _append(looked_up, validated, 1, int(time.time() * 1000))
    assert (appending.outcome.error, appending.outcome.base_offset, appending.done) == (E.NONE, 3, True)
    moved = state.logs.get_log("t", 0)
    assert moved is not None and moved is not stale and moved.log_end_offset == 5


async def test_the_copy_throttle_is_a_dynamic_broker_config(two_dirs: BrokerApp, raw: RawClient) -> None:
    from pybroker.protocol.messages import incremental_alter_configs as iac

    mover = two_dirs.state.logs.moves
    assert not mover.throttler.enabled  # Kafka's default: no limit
    response = await raw.call(iac.IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[iac.AlterableConfig(
            name="replica.alter.log.dirs.io.max.bytes.per.second", config_operation=0, value="1000000")])]), 1)
    assert response.responses[0].error_code == E.NONE
    assert mover.throttler.bytes_per_second == 1_000_000

"""The live metadata log's one hook (broker/live_metadata.py) in a real in-process broker: each store's change is
in `__cluster_metadata-0` when the save returns (topics, client quotas, dynamic broker configs, a share group's
config, a streams group's config, a producer id block), the stores are rewritten from the log at start, and a dir without a live log (an older pybroker's)
gets its stores' image as the first snapshot. Stock clients, kill -9 and a power cut:
tests/integration/test_metadata_log_crash.py."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.dynamic_configs import NODE
from pybroker.broker.security.quota_entities import entity_of
from pybroker.broker.share.group_configs import SET
from pybroker.config.broker_config import BrokerConfig
from pybroker.storage.kraft_metadata import BROKER_RESOURCE, GROUP_RESOURCE, METADATA_DIR, read_kraft_metadata
from pybroker.storage.metadata_log import LIVE_MARK


def _config(data: Path) -> BrokerConfig:
    return BrokerConfig.load({"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0",
                              "offsets.topic.num.partitions": "1"})


@pytest.fixture
async def started(tmp_path: Path) -> AsyncIterator[tuple[BrokerApp, Path]]:
    data = tmp_path / "data"
    broker = BrokerApp(_config(data))
    await broker.start()
    try:
        yield broker, data
    finally:
        await broker.stop()


async def _change_everything(broker: BrokerApp) -> int:
    state = broker.state
    await asyncio.to_thread(state.logs.create_topics, [("live-a", 2, {"retention.ms": "5000"}), ("live-b", 1, {})])
    await asyncio.to_thread(state.logs.delete_topics, ["live-b"])
    quotas = {entity_of([("user", "alice")]): {"producer_byte_rate": 1024.0}}
    await asyncio.to_thread(state.quotas.replace, quotas)
    state.dynamic_configs.replace(NODE, {"log.retention.ms": "7200000"})
    assert state.shares.group_configs.alter("share-g", [("share.auto.offset.reset", SET, "earliest")], False)[1] is None
    streams = state.groups.coordinator.streams
    assert streams.group_configs.alter("share-g", [("streams.num.standby.replicas", SET, "1")], False,
                                       state.groups.coordinator.config)[1] is None
    return state.next_producer_id()


async def test_each_change_is_in_the_log_when_its_save_returns(started: tuple[BrokerApp, Path]) -> None:
    broker, data = started
    producer_id = await _change_everything(broker)
    image = read_kraft_metadata(data)
    topics = image.topics()
    assert "live-a" in topics and "live-b" not in topics and topics["live-a"].num_partitions == 2
    assert topics["live-a"].configs == {"retention.ms": "5000"}
    assert image.quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0}}
    assert image.configs[(BROKER_RESOURCE, "1")] == {"log.retention.ms": "7200000"}
    assert image.next_producer_id > producer_id
    # one GROUP resource holds the share and the streams keys, as Kafka keeps them
    assert image.configs[(GROUP_RESOURCE, "share-g")] == {"share.auto.offset.reset": "earliest",
                                                          "streams.num.standby.replicas": "1"}
    assert not image.problems


async def test_the_stores_are_rewritten_from_the_log_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerApp(_config(data))
    await broker.start()
    try:
        await asyncio.to_thread(broker.state.logs.create_topics, [("early", 1, {})])
        saved = (data / "pybroker-topics.json").read_bytes()
        await _change_everything(broker)
    finally:
        await broker.stop()
    # stale stores: as if a crash came between the log's append and their rewrite
    (data / "pybroker-topics.json").write_bytes(saved)
    (data / "client-quotas.json").unlink()
    (data / "pybroker-group-configs.json").unlink()
    (data / "pybroker-streams-group-configs.json").unlink()
    again = BrokerApp(_config(data))
    await again.start()
    try:
        assert set(again.state.logs.topics()) >= {"early", "live-a"} and "live-b" not in again.state.logs.topics()
        assert again.state.quotas.quotas == {entity_of([("user", "alice")]): {"producer_byte_rate": 1024.0}}
        assert again.state.shares.group_configs.get("share-g", "share.auto.offset.reset") == "earliest"
        assert again.state.groups.coordinator.streams.group_configs.configs == {
            "share-g": {"streams.num.standby.replicas": "1"}}
    finally:
        await again.stop()


async def test_a_dir_without_a_live_log_gets_its_stores_as_the_first_snapshot(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerApp(_config(data))
    await broker.start()
    try:
        await _change_everything(broker)
    finally:
        await broker.stop()
    (data / LIVE_MARK).unlink()  # an older pybroker's dir: its JSON stores are the metadata
    shutil.rmtree(data / METADATA_DIR)
    again = BrokerApp(_config(data))
    await again.start()
    try:
        snapshots = list((data / METADATA_DIR).glob("*.checkpoint"))
        assert len(snapshots) == 1 and (data / LIVE_MARK).exists()
        image = read_kraft_metadata(data)
        assert set(image.topics()) >= {"live-a"} and "live-b" not in image.topics()
        assert image.quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0}}
    finally:
        await again.stop()

"""AlterConfigs and IncrementalAlterConfigs through the real server: topics, this broker and the
cluster default, refusals as INVALID_CONFIG with a message, validate_only, runtime effect, persistence."""

from __future__ import annotations

import json
from pathlib import Path

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig, ConfigSource
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.incremental_alter_configs import AlterableConfig as IncConfig
from pybroker.protocol.messages.incremental_alter_configs import AlterConfigsResource as IncResource
from pybroker.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from pybroker.storage.dynamic_config_store import FILE_NAME
from tests.unit.broker.conftest import RawClient

TOPIC, BROKER = 2, 4


def _alter(resource_type: int, name: str, validate_only: bool = False, **configs: str | None) -> AlterConfigsRequest:
    entries = [AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()]
    return AlterConfigsRequest(resources=[AlterConfigsResource(resource_type=resource_type, resource_name=name,
                                                               configs=entries)], validate_only=validate_only)


def _incremental(resource_type: int, name: str, *ops: tuple[str, int, str | None]) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[IncResource(
        resource_type=resource_type, resource_name=name,
        configs=[IncConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])


async def _describe(client: RawClient, resource_type: int, name: str, key: str) -> tuple[str | None, int]:
    response = await client.call(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=[key])]), 4)
    entry = response.results[0].configs[0]
    return entry.value, entry.config_source


async def test_topic_configs_replace_increment_and_refuse(client: RawClient, app: BrokerApp) -> None:
    app.state.topics.create("cfg", 1, 1, {"retention.ms": "1000"})
    answer = (await client.call(_alter(TOPIC, "cfg", segment_bytes="100000"), 2)).responses[0]
    assert (answer.error_code, answer.error_message) == (0, None)
    assert app.state.topics.get("cfg").configs == {"segment.bytes": "100000"}  # type: ignore[union-attr]
    assert await _describe(client, TOPIC, "cfg", "retention.ms") == ("604800000", ConfigSource.DEFAULT_CONFIG)
    answer = (await client.call(_incremental(TOPIC, "cfg", ("retention.ms", 0, "42"),
                                             ("cleanup.policy", 2, "compact")), 1)).responses[0]
    assert answer.error_code == 0
    assert app.state.topics.get("cfg").configs == {  # type: ignore[union-attr]
        "segment.bytes": "100000", "retention.ms": "42", "cleanup.policy": "delete,compact"}
    log = app.state.logs.get_log("cfg", 0)
    assert log is not None and log.config.retention_ms == 42 and log.config.cleanup_policy == "delete,compact"
    bad = (await client.call(_alter(TOPIC, "cfg", retention_ms="soon"), 1)).responses[0]
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "retention.ms" in bad.error_message
    bad = (await client.call(_incremental(TOPIC, "cfg", ("segment.bytes", 2, "1")), 0)).responses[0]
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "list" in bad.error_message
    bad = (await client.call(_alter(TOPIC, "cfg", no_such_key="1"), 0)).responses[0]
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "no.such.key" in bad.error_message
    missing = (await client.call(_alter(TOPIC, "nope", retention_ms="1"), 0)).responses[0]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    dry = (await client.call(_alter(TOPIC, "cfg", validate_only=True, retention_ms="7"), 0)).responses[0]
    assert dry.error_code == 0 and app.state.topics.get("cfg").configs["retention.ms"] == "42"  # type: ignore[union-attr]


async def test_a_topic_delete_of_a_key_we_do_not_know_is_a_no_op_as_on_kafka(client: RawClient,
                                                                          app: BrokerApp) -> None:
    # MirrorMaker 2 resets the configs its Kafka source reports at their defaults (remote storage, share-group
    # dead-letter queues, ...) with DELETE; Kafka accepts a DELETE of any name and refuses only a SET
    app.state.topics.create("mirrored", 1, 1, {"retention.ms": "1000"})
    answer = (await client.call(_incremental(TOPIC, "mirrored", ("errors.deadletterqueue.group.enable", 1, None),
                                             ("retention.ms", 1, None)), 1)).responses[0]
    assert (answer.error_code, answer.error_message) == (0, None)
    assert app.state.topics.get("mirrored").configs == {}  # type: ignore[union-attr]
    bad = (await client.call(_incremental(TOPIC, "mirrored", ("no.such.key", 0, "1")), 1)).responses[0]
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "no.such.key" in bad.error_message
    node = str(app.state.node_id)  # broker keys stay strict
    bad = (await client.call(_incremental(BROKER, node, ("no.such.key", 1, None)), 1)).responses[0]
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "no.such.key" in bad.error_message


async def test_broker_configs_apply_at_once_and_persist(client: RawClient, app: BrokerApp) -> None:
    node = str(app.state.node_id)
    app.state.topics.create("follows", 1, 1, {})
    answer = (await client.call(_incremental(BROKER, node, ("log.retention.ms", 0, "3600000"),
                                             ("log.cleaner.threads", 0, "2")), 1)).responses[0]
    assert (answer.error_code, answer.error_message) == (0, None)
    log = app.state.logs.get_log("follows", 0)
    assert log is not None and log.config.retention_ms == 3_600_000
    assert await _describe(client, BROKER, node, "log.retention.ms") == ("3600000",
                                                                           ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert await _describe(client, TOPIC, "follows", "retention.ms") == ("3600000",
                                                                           ConfigSource.DYNAMIC_BROKER_CONFIG)
    default = (await client.call(_alter(BROKER, "", log_retention_bytes="123456"), 0)).responses[0]
    assert default.error_code == 0
    assert await _describe(client, BROKER, node, "log.retention.bytes") == (
        "123456", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    saved = json.loads((Path(app.config.log_dirs[0]) / FILE_NAME).read_text())
    assert saved["broker"] == {"log.retention.ms": "3600000", "log.cleaner.threads": "2"}
    assert saved["cluster_default"] == {"log.retention.bytes": "123456"}
    static = (await client.call(_alter(BROKER, node, log_dirs="/elsewhere"), 0)).responses[0]
    assert static.error_code == ErrorCode.INVALID_CONFIG and "dynamically" in static.error_message
    other = (await client.call(_alter(BROKER, "99", log_retention_ms="1"), 0)).responses[0]
    assert other.error_code == ErrorCode.INVALID_CONFIG and "99" in other.error_message
    deleted = (await client.call(_incremental(BROKER, node, ("log.retention.ms", 1, None)), 0)).responses[0]
    assert deleted.error_code == 0 and log.config.retention_ms == 604_800_000


async def test_persisted_broker_configs_load_at_startup(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / FILE_NAME).write_text(json.dumps({"version": 1, "broker": {"log.retention.ms": "5000",
                                                                      "log.dirs": "/not/dynamic"},
                                              "cluster_default": {}}))
    config = BrokerConfig.load({"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0"})
    app = BrokerApp(config)
    await app.start()
    try:
        assert config.get("log.retention.ms") == 5000
        assert "log.dirs" not in config.dynamic_node  # dropped with a warning, not fatal
        info = app.state.topics.create("t", 1, 1, {})
        assert info is not None
        log = app.state.logs.get_log("t", 0)
        assert log is not None and log.config.retention_ms == 5000
    finally:
        await app.stop()

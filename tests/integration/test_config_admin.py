"""Topic and dynamic broker configs changed with stock admin clients, read back, and kept over a restart.

kafka-python's `alter_configs` (both the legacy AlterConfigs and IncrementalAlterConfigs paths) and
confluent-kafka's `incremental_alter_configs`, against one broker that is then restarted.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
from confluent_kafka.admin import ConfigResource as CkResource
from confluent_kafka.admin import ResourceType as CkType
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, kp_admin


def _kp_describe(bootstrap: str, kind: ConfigResourceType, name: str) -> dict[str, dict[str, object]]:
    with kp_admin(bootstrap) as admin:
        result = admin.describe_configs([ConfigResource(kind, name)], config_filter="all")
    section = result["topic" if kind == ConfigResourceType.TOPIC else "broker"]
    return section[name]


def _ck_describe(bootstrap: str, kind: CkType, name: str) -> dict[str, ConfigEntry]:
    admin = ck_admin(bootstrap)  # held until the result is in: a collected client fails its futures
    futures = admin.describe_configs([CkResource(kind, name)], request_timeout=10)
    return next(iter(futures.values())).result(timeout=10)  # type: ignore[no-any-return]


def test_alter_and_describe_round_trip_through_both_clients_and_survive_restart(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory(needs_restart=True)
    topic = new_topic()
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        legacy = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                     configs={"retention.ms": "3600000"})], incremental=False)
        assert legacy == {"topic": {topic: "OK"}}
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                            configs={"segment.bytes": "1048576"})], incremental=True)
    kp = _kp_describe(broker.bootstrap, ConfigResourceType.TOPIC, topic)
    assert kp["segment.bytes"]["value"] == "1048576"
    # the legacy AlterConfigs replaced the whole set: kafka-python filled in what was already set
    assert kp["retention.ms"]["value"] == "3600000"

    admin = ck_admin(broker.bootstrap)
    futures = admin.incremental_alter_configs([
        CkResource(CkType.TOPIC, topic, incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)]),
        CkResource(CkType.BROKER, "1", incremental_configs=[
            ConfigEntry("log.retention.bytes", "987654321", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET)]),
    ], request_timeout=10)
    for future in futures.values():
        future.result(timeout=10)
    with pytest.raises(KafkaException, match=r"retention\.ms"):
        bad = admin.incremental_alter_configs([CkResource(CkType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "forever", incremental_operation=AlterConfigOpType.SET)])],
            request_timeout=10)
        next(iter(bad.values())).result(timeout=10)

    def check() -> None:
        ck = _ck_describe(broker.bootstrap, CkType.TOPIC, topic)
        assert ck["cleanup.policy"].value == "delete,compact"
        assert ck["retention.ms"].value == "604800000" and ck["retention.ms"].is_default
        assert ck["retention.bytes"].value == "987654321"  # follows the dynamic broker config
        brokers = _ck_describe(broker.bootstrap, CkType.BROKER, "1")
        assert brokers["log.cleaner.threads"].value == "2"
        assert brokers["log.cleaner.threads"].source == 2  # DYNAMIC_BROKER_CONFIG
        assert brokers["log.dirs"].is_read_only

    check()
    broker.restart()
    check()

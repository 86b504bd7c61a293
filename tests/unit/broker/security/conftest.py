"""The broker the ACL tests run against: the ACL authorizer on, `User:admin` a super user, nothing allowed by
default."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from tests.unit.broker.security.acl_kit import ADMIN


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    config = BrokerConfig.load({
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "3",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ADMIN,
        "allow.everyone.if.no.acl.found": "false",
        "transaction.two.phase.commit.enable": "true",  # so enable_2pc is judged by its ACL alone
    })
    broker = BrokerApp(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()

"""The console tests' brokers: `app` (plain), `http` (a client of its console, its CSRF token fetched) and
`secured` (SASL/PLAIN with an authorizer and `User:admin` as super user). A module may override `app`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from tests.unit.broker.console.console_http import JAAS, Http, start_broker


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    broker = await start_broker(tmp_path)
    try:
        yield broker
    finally:
        await broker.stop()


@pytest.fixture
async def http(app: BrokerApp) -> Http:
    assert app.console_bound_port is not None
    client = Http(app.console_bound_port)
    await client.login()
    return client


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    broker = await start_broker(tmp_path, **{
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    })
    try:
        yield broker
    finally:
        await broker.stop()

"""The console's schema page API reads the registry the broker serves."""

from __future__ import annotations

import json

from pybroker.broker.app import BrokerApp
from tests.unit.broker.schema_registry.conftest import call

AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


async def test_console_lists_subjects_and_shows_a_schema(registry_app: BrokerApp) -> None:
    registry_port, console_port = registry_app.schema_registry.bound_port, registry_app.console_bound_port
    assert registry_port is not None and console_port is not None
    assert await call(registry_port, "POST", "/subjects/orders-value/versions", {"schema": AVRO}) == (
        200, {"id": 1, "version": 1})
    status, listed = await call(console_port, "GET", "/console/api/schemas")
    assert status == 200 and listed["enabled"]
    assert [(s["subject"], s["versions"][0]["id"], s["versions"][0]["type"]) for s in listed["subjects"]] == [
        ("orders-value", 1, "AVRO")]
    status, shown = await call(console_port, "GET", "/console/api/schema?subject=orders-value&version=1")
    assert status == 200 and json.loads(shown["schema"]) == json.loads(AVRO)
    status, missing = await call(console_port, "GET", "/console/api/schema?subject=orders-value&version=9")
    assert status == 404 and "no version 9" in missing["error"]

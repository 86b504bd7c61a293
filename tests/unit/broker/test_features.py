"""Cluster features in ApiVersions v3+: the table's rows as Kafka writes them, read back by kafka-python."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as TheirApiVersionsResponse

from pybroker.broker import features
from pybroker.broker.app import BrokerApp
from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import supported_versions
from pybroker.broker.handlers import api_versions as handler_module
from pybroker.protocol.api_keys import ApiKey

TV2_SERVED = {ApiKey.PRODUCE: 12, ApiKey.END_TXN: 5, ApiKey.TXN_OFFSET_COMMIT: 5}


def _request(correlation_id: int, version: int) -> bytes:
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, version, correlation_id, 3) + b"raw"
    if version >= 3:  # header v2's tagged fields, then client software name and version (compact), tags
        body += b"\x00" + b"\x04kcc" + b"\x021" + b"\x00"
    return struct.pack(">i", len(body)) + body


async def _exchange(app: BrokerApp, version: int) -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    try:
        writer.write(_request(42, version))
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
        frame = await asyncio.wait_for(reader.readexactly(size), 5)
    finally:
        writer.close()
    (correlation_id,) = struct.unpack_from(">i", frame)
    return correlation_id, TheirApiVersionsResponse.decode(frame[4:], version=version)  # header v0: no tags


def _rows(response: Any) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features or []}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features or []}
    return supported, finalized


def test_a_v3_request_gets_no_supported_feature_with_minimum_zero() -> None:
    assert [f.name for f in features.supported_feature_keys(3)] == ["metadata.version"]
    v4 = {f.name: (f.min_version, f.max_version) for f in features.supported_feature_keys(4)}
    assert v4 == {"metadata.version": (7, 25), "transaction.version": (0, 2)}


def test_transactions_v2_is_finalized_only_when_its_api_versions_are_served() -> None:
    tv = next(f for f in features.FEATURES if f.name == "transaction.version")
    assert features.finalized_level(tv, TV2_SERVED) == 2
    for missing in TV2_SERVED:
        assert features.finalized_level(tv, {**TV2_SERVED, missing: TV2_SERVED[missing] - 1}) == 1
    assert features.finalized_level(tv, {}) == 1  # level 1 (flexible log records) needs no API
    rows = features.finalized_feature_keys(TV2_SERVED)
    assert {(r.name, r.min_version_level, r.max_version_level) for r in rows} == {
        ("metadata.version", 25, 25), ("transaction.version", 2, 2)}


def test_a_level_zero_is_not_listed() -> None:
    table = (features.Feature("x.version", 0, 1, 0), features.Feature("y.version", 0, 0, 0))
    assert features.finalized_feature_keys({}, table) == []
    assert [f.name for f in features.supported_feature_keys(4, table)] == ["x.version"]  # max 0: unsupported


@pytest.mark.parametrize("version", [3, 4])
async def test_raw_api_versions_answers_the_features(app: BrokerApp, version: int) -> None:
    correlation_id, response = await _exchange(app, version)
    assert (correlation_id, response.error_code) == (42, 0)
    supported, finalized = _rows(response)
    assert supported["metadata.version"] == (7, 25)
    assert ("transaction.version" in supported) is (version >= 4)
    assert response.finalized_features_epoch == features.FINALIZED_FEATURES_EPOCH
    served = {k: hi for k, _, hi in supported_versions()}
    tv = next(f for f in features.FEATURES if f.name == "transaction.version")
    assert finalized == {"metadata.version": (25, 25), "transaction.version": (features.finalized_level(tv, served),) * 2}


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_versions_before_3_carry_no_features(app: BrokerApp, version: int) -> None:
    correlation_id, response = await _exchange(app, version)
    assert (correlation_id, response.error_code) == (42, 0)
    assert {a.api_key for a in response.api_keys} >= {ApiKey.API_VERSIONS, ApiKey.PRODUCE}


async def test_with_the_transaction_handlers_served_kafka_python_reads_transactions_v2(
        app: BrokerApp, monkeypatch: pytest.MonkeyPatch) -> None:
    served = [(k, lo, max(hi, TV2_SERVED.get(k, hi))) for k, lo, hi in supported_versions()]
    served += [(k, 0, v) for k, v in TV2_SERVED.items() if k not in {s[0] for s in served}]
    monkeypatch.setattr(handler_module, "supported_versions", lambda: sorted(served))
    for version in (3, 4):
        ctx = RequestContext(app.state, ApiKey.API_VERSIONS, version, 1, "test", "in-process")
        ours = handler_module.handle_api_versions(ctx, handler_module.ApiVersionsRequest())
        theirs = TheirApiVersionsResponse.decode(ours.encode(version), version=version)
        supported, finalized = _rows(theirs)
        assert finalized["transaction.version"] == (2, 2)
        assert theirs.finalized_features_epoch > -1  # the Java producer ignores features at epoch -1
        assert supported.get("transaction.version") == ((0, 2) if version >= 4 else None)

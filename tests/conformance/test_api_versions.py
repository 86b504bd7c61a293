"""ApiVersions: the versions pybroker advertises beside Apache Kafka's, API by API.

The table of differences is printed (run with `-s` to read it). What is asserted is what pybroker
promises: every API it serves is one Kafka serves (the telemetry APIs: when configured), and it never advertises a version Kafka does not know.
Serving fewer versions than Kafka, or an API Kafka has and we do not, is allowed and shown.
"""

from __future__ import annotations

import pytest

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from tests.conformance.conftest import Pair
from tests.kafka_node import kafka_version

# Kafka advertises the client-telemetry APIs (KIP-714) only when a metrics reporter that takes client
# telemetry is configured; pybroker serves them itself, so the stock node lists them and Kafka's does not
ONLY_WITH_A_PLUGIN = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}
# differences found and not yet fixed, each asserted by a strict xfail below so that its fix is noticed
KNOWN_BEYOND = {ApiKey.INIT_PRODUCER_ID: "InitProducerId: pybroker advertises v0-6 (v6: KIP-939's two-phase "
                "commit), Kafka 4.4 with its default config v0-5"}


def _name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"key {key}"




async def test_api_versions_against_kafka(pair: Pair) -> None:
    request = ApiVersionsRequest(client_software_name="conformance", client_software_version="1")
    ours, theirs = await pair.raw(request, 3)
    assert (ours.error_code, theirs.error_code) == (0, 0)
    mine = {k.api_key: (k.min_version, k.max_version) for k in ours.api_keys}
    kafkas = {k.api_key: (k.min_version, k.max_version) for k in theirs.api_keys}
    rows = []
    for key in sorted(set(mine) | set(kafkas)):
        a, b = mine.get(key), kafkas.get(key)
        if a != b:
            rows.append(f"{key:>4} {_name(key):<36} {a or '-'!s:<10} {b or '-'!s:<10}")
    print(f"\nApiVersions: pybroker against Apache Kafka {kafka_version()} (only the APIs that differ)")
    print(f"{'key':>4} {'api':<36} {'pybroker':<10} {'kafka':<10}")
    print("\n".join(rows) or "(none)")
    unknown = sorted(_name(k) for k in mine if k not in kafkas and k not in ONLY_WITH_A_PLUGIN)
    assert not unknown, f"pybroker serves APIs Kafka {kafka_version()} does not: {unknown}"
    beyond = {_name(k): (mine[k], kafkas[k]) for k in mine
              if k in kafkas and k not in KNOWN_BEYOND and mine[k][1] > kafkas[k][1]}
    assert not beyond, f"pybroker advertises versions newer than Kafka's: {beyond}"


@pytest.mark.xfail(strict=True, reason=KNOWN_BEYOND[ApiKey.INIT_PRODUCER_ID])
async def test_init_producer_id_versions(pair: Pair) -> None:
    ours, theirs = await pair.raw(ApiVersionsRequest(), 3)
    key = ApiKey.INIT_PRODUCER_ID
    assert [k.max_version for k in ours.api_keys if k.api_key == key] == \
        [k.max_version for k in theirs.api_keys if k.api_key == key]

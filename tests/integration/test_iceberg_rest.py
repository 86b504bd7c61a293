"""An Iceberg topic on a REST catalog: Apache Iceberg's own REST catalog server (`tests/integration/iceberg_rest.py`),
a broker with `iceberg.catalog.type=rest`, a stock producer, and pyiceberg reading the table through the same
REST catalog (the server's JDBC catalog behind it, the warehouse a local directory both sides see)."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_producer
from tests.integration.iceberg_rest import RestCatalogServer, rest_missing
from tests.integration.iceberg_tables import coordinates, wait_rows
from tests.integration.test_iceberg import make_topic

pytestmark = [pytest.mark.slow, pytest.mark.skipif(rest_missing() is not None, reason=rest_missing() or "")]

RECORDS = 500


@pytest.fixture(scope="session")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCatalogServer]:
    server = RestCatalogServer(tmp_path_factory.mktemp("iceberg-rest")).start()
    try:
        yield server
    finally:
        server.stop()


def test_a_topic_becomes_a_table_in_a_rest_catalog(rest_catalog: RestCatalogServer,
                                                   broker_factory: Callable[..., BrokerProcess],
                                                   new_topic: Callable[..., str]) -> None:
    from pyiceberg.catalog import load_catalog

    broker = broker_factory({"iceberg.catalog.type": "rest", "iceberg.catalog.uri": rest_catalog.uri,
                             "iceberg.warehouse": rest_catalog.warehouse.as_uri()})
    topic = new_topic("rest")
    make_topic(broker.bootstrap, topic, 2)
    producer = ck_producer(broker.bootstrap, acks="all", **{"linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    catalog = load_catalog("rest", type="rest", uri=rest_catalog.uri)
    table = wait_rows(catalog, ("pybroker", topic), RECORDS)
    rows = coordinates(table)
    assert len(rows) == RECORDS and len(set(rows)) == RECORDS
    assert sorted(rows) == sorted((i % 2, i // 2) for i in range(RECORDS))
    assert Path(table.metadata_location.removeprefix("file:")).is_relative_to(rest_catalog.warehouse)


def test_the_rest_catalog_answers_overlapping_requests_from_one_store(rest_catalog: RestCatalogServer) -> None:
    """The fixture's own check: requests that overlap are served from the same database (a second pooled
    connection to SQLite in memory would be another, empty one: HTTP 500 "no such table")."""
    def list_namespaces(_: int) -> int:
        with urllib.request.urlopen(f"{rest_catalog.uri}/v1/namespaces", timeout=30) as answer:
            return int(answer.status)

    with ThreadPoolExecutor(4) as pool:
        assert set(pool.map(list_namespaces, range(40))) == {200}

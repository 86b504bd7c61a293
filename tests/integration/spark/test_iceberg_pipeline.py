"""examples/iceberg_pipeline.py on a small Iceberg topic: Spark reads the table and the topic, and they agree."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from types import ModuleType

from pyspark.sql import SparkSession

from tests.integration.brokers import REPO_ROOT, BrokerProcess
from tests.integration.clients import ck_producer
from tests.integration.iceberg_tables import broker_catalog, wait_rows
from tests.integration.test_iceberg import FAST, make_topic

EXAMPLE = REPO_ROOT / "examples" / "iceberg_pipeline.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("iceberg_pipeline_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spark_reads_the_table_and_the_topic_alike(spark: SparkSession, broker: BrokerProcess,
                                                   new_topic: Callable[..., str]) -> None:
    topic = new_topic("events")
    make_topic(broker.bootstrap, topic, 2, FAST)
    producer = ck_producer(broker.bootstrap, acks="all")
    for i in range(400):
        producer.produce(topic, key=f"user-{i % 7}".encode(), value=b"{}", partition=i % 2)
    assert producer.flush(30) == 0
    wait_rows(broker_catalog(broker.log_dirs[0]), ("pybroker", topic), 400)

    example = _example()
    result = example.compare(spark, example.parse_args(
        ["--bootstrap", broker.bootstrap, "--topic", topic, "--log-dir", str(broker.log_dirs[0])]))
    expected = {f"user-{k}": len(range(k, 400, 7)) for k in range(7)}
    assert result["table"] == result["topic"] == expected
    assert result["covered"] == {0: 200, 1: 200}

"""pybroker's PySpark connector: the `pybroker` format for Spark 4's Python Data Source API.

    from pybroker.clients.spark import register
    register(spark)                      # once per SparkSession
    df = (spark.read.format("pybroker")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

Options, schema and semantics are those of Spark's Kafka source and sink (see README), plus `exactlyOnce` and
`transactionalIdPrefix` for the sink, which is exactly-once where the broker allows two-phase commit
(`exactly_once`). The connector is a Kafka client: kafka-python for reads and at-least-once writes, its own
small client over `pybroker.protocol` for the transactional writes (`wire`, `cluster`, `txn_producer`). It
needs the `spark` extra: `pip install 'pybroker[spark]'`.

Why lazy: the pure modules (`options`, `offsets`, `planning`) import without pyspark, so their tests and
tools need no Spark; only `PyBrokerDataSource` and `register` pull pyspark in, when first used. Nothing
else in `pybroker.broker` imports this package: the broker never loads pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pybroker.clients.spark.datasource import PyBrokerDataSource

__all__ = ["FORMAT", "PyBrokerDataSource", "register"]

FORMAT = "pybroker"


def register(spark: SparkSession) -> None:
    """Make `format("pybroker")` available in this session (Spark reserves `kafka` for its own source)."""
    from pybroker.clients.spark.datasource import for_session

    spark.dataSource.register(for_session(spark.sparkContext.defaultParallelism))


def __getattr__(name: str) -> Any:
    if name == "PyBrokerDataSource":
        from pybroker.clients.spark.datasource import PyBrokerDataSource

        return PyBrokerDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""One local[2] SparkSession for every Spark test, with the pybroker format registered.

Why one: starting Spark's JVM costs several seconds and hundreds of MB, and the machine is small. The
session's Python workers run this very interpreter (PYSPARK_PYTHON), so they import the connector from
the same install as the tests. Spark binds to the loopback only (SPARK_LOCAL_IP). `local[2,2]`: two
threads, and a failed task is tried twice (plain `local[2]` never retries one), so the exactly-once sink's
tests can watch a retried task fence what its first attempt wrote.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed (make install installs it)")

from pyspark.sql import SparkSession  # noqa: E402

from pybroker.clients.spark import register  # noqa: E402
from tests.integration.spark.spark_kafka import spark_kafka_jars  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Spark needs Java 17+: `make test` installs it (openjdk-17-jre-headless) when java is missing")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master("local[2,2]").appName("pybroker-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               # Spark's own `format("kafka")` beside ours, when resolved (test_spark_kafka_format.py)
               .config("spark.driver.extraClassPath", ":".join(str(jar) for jar in spark_kafka_jars()))
               # the driver's sockets to the JVM (collect, ...) wait 15 s to connect by default: a loaded
               # machine took longer (CANNOT_OPEN_SOCKET ... timed out)
               .config("spark.python.authenticate.socketTimeout", "120s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()

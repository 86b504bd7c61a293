"""One local[2] SparkSession for every Spark test, with the pybroker format registered.

Why one: starting Spark's JVM costs several seconds and hundreds of MB, and the machine is small. The
session's Python workers run this very interpreter (PYSPARK_PYTHON), so they import the connector from
the same install as the tests. Spark binds to the loopback only (SPARK_LOCAL_IP). `local[2,2]`: two
threads, and a failed task is tried twice (plain `local[2]` never retries one), so the exactly-once sink's
tests can watch a retried task fence what its first attempt wrote.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed (make install installs it)")

from pyspark.sql import SparkSession  # noqa: E402

from pybroker.clients.spark import register  # noqa: E402

ENV_SPARK_KAFKA = "PYBROKER_SPARK_KAFKA_HOME"


def spark_kafka_jars() -> list[Path]:
    """The jars of Spark's own Kafka connector (`make spark-kafka`) that pyspark does not already ship.

    Empty when they are not resolved (outside `make test`): the tests of `format("kafka")` then skip, or fail
    under `make test`, which sets PYBROKER_SPARK_KAFKA_HOME."""
    home = os.environ.get(ENV_SPARK_KAFKA)
    if not home or not (Path(home) / ".resolved").exists():
        return []
    shipped = {_artifact(jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(jar for jar in (Path(home) / "libs").glob("*.jar") if _artifact(jar.name) not in shipped)


def _artifact(jar_name: str) -> str:
    """"kafka-clients-3.9.2.jar" -> "kafka-clients": a jar's artifact without its version."""
    return re.sub(r"-\d[^-]*\.jar$", "", jar_name)


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
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()

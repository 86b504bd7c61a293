"""Where Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10) comes from for the tests and
the bench: the jars `make spark-kafka` resolved (tests/ecosystem/spark/pom.xml) into a cache outside the tree.

No pytest here: `bench/spark_read.py` puts the same jars on its Spark driver's class path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ENV_SPARK_KAFKA = "PYBROKER_SPARK_KAFKA_HOME"
POM = Path(__file__).resolve().parents[2] / "ecosystem" / "spark" / "pom.xml"


def spark_kafka_home() -> Path:
    configured = os.environ.get(ENV_SPARK_KAFKA)
    if configured:
        return Path(configured)
    version = POM.read_text().split("<spark.version>")[1].split("</spark.version>")[0].strip()
    return Path.home() / ".cache" / "pybroker" / f"spark-kafka-{version}"


def spark_kafka_jars() -> list[Path]:
    """The connector's jars that pyspark does not already ship; empty when they are not resolved."""
    home = spark_kafka_home()
    if not (home / ".resolved").exists():
        return []
    import pyspark

    shipped = {_artifact(jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(jar for jar in (home / "libs").glob("*.jar") if _artifact(jar.name) not in shipped)


def _artifact(jar_name: str) -> str:
    """"kafka-clients-3.9.2.jar" -> "kafka-clients": a jar's artifact without its version."""
    return re.sub(r"-\d[^-]*\.jar$", "", jar_name)

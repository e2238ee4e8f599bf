"""Spark's own Kafka source and sink (``format("kafka")``, ``spark-sql-kafka-0-10``) for the Spark tests, the
example and bench/spark_throughput.py.

The connector's jars are resolved by the JVM harness (tests/jvm/jvm.py, module ``apps/spark``) from Maven
Central into its cache outside the repository (``scripts/setup.sh --test`` warms it, so nothing downloads at
test time). Spark gets only the jars that pyspark does not already ship (the connector, Spark's Kafka token
provider, kafka-clients, commons-pool2): a second scala-library or hadoop-client on the classpath would shadow
pyspark's own.
"""

from __future__ import annotations

import re
from pathlib import Path

MODULE = "apps/spark"
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d+(\.\d+)*([.-][A-Za-z0-9]+)*\.jar$")


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    m = _VERSIONED.match(Path(jar).name)
    return m.group("artifact") if m else Path(jar).stem


def pyspark_artifacts() -> set[str]:
    import pyspark

    return {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def kafka_jars() -> list[str]:
    """The jars to pass as ``spark.jars`` for ``format("kafka")``: the connector's runtime classpath less what
    pyspark ships. Raises the harness's JvmError when Maven or the cache cannot provide them."""
    from harness import jvm

    shipped = pyspark_artifacts()
    return [j for j in jvm.classpath(MODULE) if j.endswith(".jar") and _artifact(j) not in shipped]


def spark_kafka_version() -> str:
    """The spark-sql-kafka-0-10 version on the classpath (from its jar's name)."""
    for j in kafka_jars():
        name = Path(j).name
        if name.startswith("spark-sql-kafka-0-10"):
            return name.rsplit("-", 1)[1].removesuffix(".jar")
    raise LookupError("spark-sql-kafka-0-10 is not on the apps/spark classpath")

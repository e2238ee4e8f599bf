"""Spark data-source tests: one local SparkSession for the whole run, a real broker process.

The broker fixtures (``broker``, ``make_topic``, ``topic``...) are the harness's (tests/harness/fixtures.py).
The suite needs pyspark (``pip install 'moldau[spark]'``) and Java 17; without them it is skipped with the
reason.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from harness.fixtures import (  # the fixtures of this directory
    broker,
    broker_factory,
    fresh_broker,
    kind,
    make_topic,
    topic,
)

# PySpark starts its Python workers with PYSPARK_PYTHON (default: "python3" from PATH). The tests must run
# them in this interpreter, which has moldau, pyspark and pyarrow: when pytest runs as `.venv/bin/python -m
# pytest` with no venv on PATH (CI), PATH's python3 is the system one and every task would fail. A different
# interpreter cannot work anyway (the data source is pickled by reference), so this is not a default.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

_WHY_NOT: str | None = None
try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    _WHY_NOT = f"pyspark/pyarrow not installed ({exc}): pip install 'moldau[spark]'"
if _WHY_NOT is None and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    _WHY_NOT = "no Java runtime: ./scripts/setup.sh installs openjdk-17-jre-headless"


# Spark's own Kafka source and sink (format("kafka")): the connector's jars from the JVM harness's cache
_KAFKA_JARS: list[str] | None = None
_KAFKA_WHY_NOT: str | None = None


def _kafka_jars() -> list[str]:
    global _KAFKA_JARS, _KAFKA_WHY_NOT
    if _KAFKA_JARS is None:
        from harness.sparkkafka import kafka_jars

        try:
            _KAFKA_JARS = kafka_jars()
        except Exception as exc:  # noqa: BLE001 - no Maven, no cache: the format("kafka") tests say why
            _KAFKA_JARS = []
            _KAFKA_WHY_NOT = f"spark-sql-kafka-0-10 not resolved ({exc}): ./scripts/setup.sh --test warms it"
    return _KAFKA_JARS


@pytest.fixture(scope="session")
def kafka_format(spark: Any) -> str:
    """The name of Spark's own Kafka source and sink, when its jars are on the session's classpath."""
    if _KAFKA_WHY_NOT is not None:
        if os.environ.get("CI"):
            pytest.fail(_KAFKA_WHY_NOT)
        pytest.skip(_KAFKA_WHY_NOT)
    return "kafka"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if _WHY_NOT is not None:
        if os.environ.get("CI"):
            pytest.fail(_WHY_NOT)
        pytest.skip(_WHY_NOT)
    from pyspark.sql import SparkSession

    import moldau.spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    builder = SparkSession.builder
    jars = _kafka_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = (
        builder.master("local[2]")
        .appName("moldau-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    moldau.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def bootstrap(broker: Any) -> str:
    return broker.bootstrap


@pytest.fixture(scope="module")
def schema_registry(broker: Any) -> Iterator[Any]:
    """moldau's schema registry (the harness's RegistryThread) against the session broker, with a state
    topic of its own; ``.url`` is its base URL."""
    import uuid

    from harness.registryutil import RegistryThread

    r = RegistryThread(broker.bootstrap, topic=f"_schemas-spark-{uuid.uuid4().hex[:8]}").start()
    try:
        yield r
    finally:
        r.stop()

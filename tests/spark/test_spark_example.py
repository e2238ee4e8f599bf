"""The example pipeline (examples/clickstream.py): its windows equal a pure-Python count of the events."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "examples" / "clickstream.py"
_spec = importlib.util.spec_from_file_location("clickstream_example", _PATH)
assert _spec is not None and _spec.loader is not None
cs = importlib.util.module_from_spec(_spec)
sys.modules["clickstream_example"] = cs
_spec.loader.exec_module(cs)


def test_events_are_deterministic_and_late_within_the_watermark():
    a = list(cs.events(2000, seed=3))
    assert a == list(cs.events(2000, seed=3))
    assert a[-1]["page"] == cs.END_PAGE
    running_max = 0
    for e in a[:-1]:
        assert e["ts_ms"] > running_max - 60_000  # never later than the 1-minute watermark allows
        running_max = max(running_max, e["ts_ms"])
    assert sum(cs.expected_counts(iter(a)).values()) == 2000


@pytest.mark.parametrize("fmt", [
    "moldau",
    # Spark's own Kafka connector as the job's source and sink (examples/clickstream.py --format kafka)
    pytest.param("kafka", marks=[
        pytest.mark.skipif(not os.environ.get("MOLDAU_JVM_FULL"), reason="only with MOLDAU_JVM_FULL=1"),
        pytest.mark.timeout(900)]),
    # examples/clickstream.py --registry: Avro through moldau's schema registry
    pytest.param("registry", marks=pytest.mark.skipif(
        not os.environ.get("MOLDAU_REGISTRY_FULL"), reason="only with MOLDAU_REGISTRY_FULL=1")),
])
def test_clickstream_pipeline_matches_pure_python(spark, bootstrap, topic, tmp_path, request, fmt):
    if fmt == "kafka":
        request.getfixturevalue("kafka_format")  # skips (fails in CI) without the connector's jars
    registry = request.getfixturevalue("schema_registry").url if fmt == "registry" else None
    if registry:
        fmt = "moldau"
    clicks, counts = topic + "-clicks", topic + "-counts"
    cs.create_topics(bootstrap, 4, clicks, counts)
    n = 6_000
    assert cs.generate(bootstrap, n, seed=9, clicks=clicks, registry=registry) == n + 1
    out = str(tmp_path / "out")
    q = cs.start_job(spark, bootstrap, out, str(tmp_path / "cp"), max_offsets=2_500, clicks=clicks,
                     counts=counts, fmt=fmt, registry=registry)
    q.awaitTermination(300)
    assert q.exception() is None
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    if fmt == "moldau":
        assert sizes == [2_500, 2_500, 1_001]
    else:  # Spark's own source splits the limit over the partitions by their share, rounding each down
        assert sum(sizes) == 6_001 and len(sizes) == 3 and max(sizes) <= 2_500, sizes
    report = cs.verify(spark, bootstrap, out, n, 9, counts=counts, registry=registry)
    assert report["windows"] > 10
    assert report["parquet_matches"], report
    assert report["topic_matches"], report

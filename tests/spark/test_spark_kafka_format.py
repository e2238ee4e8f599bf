"""Spark's own Kafka source and sink (``format("kafka")``, spark-sql-kafka-0-10) reading and writing moldau.

The connector is Spark's, run unchanged: its consumers fetch, its AdminClient lists offsets, its producers
write. Every test checks what Spark saw against what a Python client wrote or reads (exact bytes, partitions,
offsets), and, where both apply, against ``format("moldau")`` on the same topic.

The default run has the batch read; everything else is part of the whole JVM matrix::

    MOLDAU_JVM_FULL=1 .venv/bin/python -m pytest -q tests/spark/test_spark_kafka_format.py
    MOLDAU_TEST_BROKER=cluster MOLDAU_JVM_FULL=1 \
        .venv/bin/python -m pytest -q tests/spark/test_spark_kafka_format.py
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.kafkautil import produce_confluent
from harness.spark_helpers import produce_values, random_records, read_values, reader, rows_by_position

# Spark's start (in the first test's setup) and its JVM jobs are slow on a loaded 2-core machine
pytestmark = pytest.mark.timeout(900)
full_only = pytest.mark.skipif(not os.environ.get("MOLDAU_JVM_FULL"),
                               reason="whole JVM matrix only: MOLDAU_JVM_FULL=1 runs it")

COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def kafka_reader(spark: Any, fmt: str, bootstrap: str, stream: bool = False, **options: str) -> Any:
    r = (spark.readStream if stream else spark.read).format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def test_batch_read_exact_records(spark: Any, kafka_format: str, bootstrap: str, make_topic: Any) -> None:
    """Spark's Kafka source reads every record confluent-kafka wrote (compressed, with headers, null keys
    and values) at its partition and offset, the same rows format("moldau") reads; startingOffsets and
    endingOffsets as JSON select an exact range."""
    topic = make_topic(3)
    records = random_records(900, 3, seed=24)
    delivered = produce_confluent(bootstrap, topic, records, conf={"compression.type": "lz4"})
    assert len(delivered) == 900
    # per partition, offsets follow the produce order
    sent: dict[tuple[int, int], dict[str, Any]] = {}
    counts = [0, 0, 0]
    for rec in records:
        sent[(rec["partition"], counts[rec["partition"]])] = rec
        counts[rec["partition"]] += 1
    df = kafka_reader(spark, kafka_format, bootstrap, subscribe=topic, includeHeaders="true",
                      startingOffsets="earliest", endingOffsets="latest").load()
    assert df.columns == COLUMNS + ["headers"]
    got = rows_by_position(df.collect())
    assert len(got) == 900
    for m in delivered:
        r = got[(m.partition(), m.offset())]
        assert (r["topic"], r["key"], r["value"]) == (topic, m.key(), m.value())
        assert r["key"] == sent[(m.partition(), m.offset())]["key"]
        # no headers: null (not an empty array)
        got_headers = None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]]
        assert got_headers == (sent[(m.partition(), m.offset())].get("headers") or None)
        assert r["timestampType"] == 0
        assert round(r["timestamp"].replace(tzinfo=UTC).timestamp() * 1000) == m.timestamp()[1]
    # the same rows through moldau's own source
    ours = rows_by_position(reader(spark, bootstrap, subscribe=topic, includeHeaders="true").load().collect())
    assert ours.keys() == got.keys()
    diffs = [(k, col, ours[k][col], got[k][col]) for k in got for col in COLUMNS + ["headers"]
             if ours[k][col] != got[k][col]]
    assert not diffs, f"{len(diffs)} fields differ between format('moldau') and format('kafka'): {diffs[:5]}"
    # an exact range per partition: [10, 50) of partition 0, [0, 5) of partition 2 (-2: earliest), nothing
    # of partition 1 (Spark refuses -1, latest, as a batch query's start)
    ranged = kafka_reader(spark, kafka_format, bootstrap, subscribe=topic,
                          startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": -2}}),
                          endingOffsets=json.dumps({topic: {"0": 50, "1": 0, "2": 5}})).load()
    pos = sorted((r["partition"], r["offset"]) for r in ranged.select("partition", "offset").collect())
    assert pos == [(0, o) for o in range(10, 50)] + [(2, o) for o in range(5)]


@full_only
def test_batch_write_then_read_back(spark: Any, kafka_format: str, bootstrap: str, make_topic: Any) -> None:
    """df.write.format("kafka") with key, value, partition and headers columns: confluent-kafka reads every
    row at the partition Spark chose, and Spark's source reads them back."""
    topic = make_topic(4)
    rows = [(f"k{i}".encode(), f"value-{i:05d}".encode(), i % 4, [("n", str(i).encode())])
            for i in range(2000)]
    df = spark.createDataFrame(rows, "key binary, value binary, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    (df.write.format(kafka_format).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("includeHeaders", "true").save())
    values = read_values(bootstrap, topic, 4, "read_uncommitted")
    assert sorted(values) == sorted(r[1] for r in rows)
    back = kafka_reader(spark, kafka_format, bootstrap, subscribe=topic, includeHeaders="true").load()
    seen = {(r["partition"], r["value"], r["headers"][0]["value"]) for r in back.collect()}
    assert seen == {(p, v, h[0][1]) for _k, v, p, h in rows}


def _transactional_fill(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Committed and aborted transactions interleaved on every partition; returns the committed values."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-kafka-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    committed: list[bytes] = []
    for t in range(6):
        p.begin_transaction()
        batch = [f"t{t}-{i:03d}".encode() for i in range(60)]
        for i, v in enumerate(batch):
            p.produce(topic, v, partition=i % partitions)
        p.flush(30)  # librdkafka's abort purges what it has not sent yet: the aborted records must be written
        if t % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += batch
    return committed


@full_only
def test_read_committed_batch_and_stream(spark: Any, kafka_format: str, bootstrap: str, make_topic: Any,
                                         tmp_path: Path) -> None:
    """kafka.isolation.level=read_committed: Spark's source skips aborted records and control batches, in a
    batch query and in a stream (the offsets past the markers are gaps it must step over)."""
    topic = make_topic(3)
    committed = _transactional_fill(bootstrap, topic, 3)
    df = kafka_reader(spark, kafka_format, bootstrap, subscribe=topic,
                      **{"kafka.isolation.level": "read_committed"}).load()
    assert sorted(r["value"] for r in df.select("value").collect()) == sorted(committed)
    uncommitted = kafka_reader(spark, kafka_format, bootstrap, subscribe=topic).load()
    assert uncommitted.count() == 360  # read_uncommitted: the aborted records too, never the markers
    sink = f"rc_{uuid.uuid4().hex[:8]}"
    q = (kafka_reader(spark, kafka_format, bootstrap, stream=True, subscribe=topic,
                      startingOffsets="earliest", **{"kafka.isolation.level": "read_committed"}).load()
         .select("value").writeStream.format("memory").queryName(sink)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    assert sorted(r["value"] for r in spark.sql(f"select value from {sink}").collect()) == sorted(committed)


@full_only
def test_stream_with_checkpoint_and_max_offsets(spark: Any, kafka_format: str, bootstrap: str,
                                                make_topic: Any, tmp_path: Path) -> None:
    """readStream.format("kafka") -> writeStream.format("kafka") with a checkpoint: maxOffsetsPerTrigger
    bounds every micro-batch; a second run of the same query resumes from the checkpoint and copies only
    the new records: every input record is in the output exactly once."""
    src, dst = make_topic(4), make_topic(2)
    produce_values(bootstrap, src, 1000, 4)
    ckpt = tmp_path / "ckpt"

    def run() -> Any:
        q = (kafka_reader(spark, kafka_format, bootstrap, stream=True, subscribe=src,
                          startingOffsets="earliest", maxOffsetsPerTrigger="300").load()
             .selectExpr("key", "value").writeStream.format(kafka_format)
             .option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        q.awaitTermination(300)
        assert q.exception() is None
        return q

    q1 = run()
    rows1 = [p["numInputRows"] for p in q1.recentProgress if p["numInputRows"]]
    assert sum(rows1) == 1000 and max(rows1) <= 300 and len(rows1) >= 4, rows1
    produce_values(bootstrap, src, 500, 4, start=1000)
    q2 = run()
    rows2 = [p["numInputRows"] for p in q2.recentProgress if p["numInputRows"]]
    assert sum(rows2) == 500 and max(rows2) <= 300, rows2
    out = read_values(bootstrap, dst, 2, "read_uncommitted")
    assert sorted(out) == sorted(b"v%07d" % i for i in range(1500))
    # a third run finds nothing new
    q3 = run()
    assert sum(p["numInputRows"] for p in q3.recentProgress) == 0


@full_only
def test_kafka_source_into_moldau_sink_and_back(spark: Any, kafka_format: str, bootstrap: str,
                                                make_topic: Any, tmp_path: Path) -> None:
    """The two connectors side by side in one stream: format("kafka") in, format("moldau") out with
    transactions (exactly once), and format("moldau") in, format("kafka") out."""
    a, b, c = make_topic(3), make_topic(3), make_topic(3)
    produce_values(bootstrap, a, 600, 3)
    q = (kafka_reader(spark, kafka_format, bootstrap, stream=True, subscribe=a, startingOffsets="earliest")
         .load().selectExpr("key", "value")
         .writeStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", b).option("deliveryGuarantee", "exactly-once")
         .option("checkpointLocation", str(tmp_path / "c1")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    q = (reader(spark, bootstrap, stream=True, subscribe=b, startingOffsets="earliest").load()
         .selectExpr("key", "value")
         .writeStream.format(kafka_format).option("kafka.bootstrap.servers", bootstrap).option("topic", c)
         .option("checkpointLocation", str(tmp_path / "c2")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    deadline = time.monotonic() + 30
    while True:
        out = read_values(bootstrap, c, 3, "read_committed")
        if len(out) >= 600 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(out) == sorted(b"v%07d" % i for i in range(600))


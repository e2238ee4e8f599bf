"""Batch and streaming writes through format("moldau"), read back with confluent-kafka."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from harness.kafkautil import read_all_confluent
from harness.spark_helpers import produce_values, reader

_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])


def _by_value(msgs):
    return {m.value: m for m in msgs}


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_batch_write_then_read_back_with_confluent(spark, bootstrap, make_topic, arrow):
    t1 = make_topic(3)
    t2 = make_topic(2)
    rows = []
    for i in range(600):
        rows.append((
            None if i % 5 == 0 else b"key-%d" % i,
            b"value-%d" % i,
            t1 if i % 2 == 0 else t2,
            (i % 3 if i % 2 == 0 else None),
            [("h1", b"x%d" % i), ("nil", None)] if i % 4 == 0 else [],
        ))
    df = spark.createDataFrame(rows, _SCHEMA).repartition(3)
    df.write.format("moldau").mode("append").option("kafka.bootstrap.servers", bootstrap).option(
        "moldau.arrow", arrow
    ).save()

    got1 = _by_value(read_all_confluent(bootstrap, t1, 3))
    got2 = _by_value(read_all_confluent(bootstrap, t2, 2))
    assert len(got1) == 300 and len(got2) == 300
    for key, value, topic, partition, headers in rows:
        m = (got1 if topic == t1 else got2)[value]
        assert m.key == key
        if partition is not None:
            assert m.partition == partition
        assert list(m.headers or []) == headers


def test_topic_option_overrides_column_and_strings_are_written_as_utf8(spark, bootstrap, make_topic):
    target = make_topic(1)
    df = spark.createDataFrame([("k%d" % i, "välue-%d" % i, "ignored-topic") for i in range(50)],
                               "key string, value string, topic string")
    df.write.format("moldau").mode("append").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", target
    ).save()
    got = read_all_confluent(bootstrap, target, 1)
    assert sorted(m.value for m in got) == sorted(("välue-%d" % i).encode() for i in range(50))
    assert {m.key for m in got} == {b"k%d" % i for i in range(50)}


def test_write_schema_is_checked(spark, bootstrap):
    w = spark.createDataFrame([(b"x",)], "payload binary").write.format("moldau").mode("append") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", "t")
    with pytest.raises(Exception, match="'value' not found"):
        w.save()
    w = spark.createDataFrame([(b"x",)], "value binary").write.format("moldau").mode("append") \
        .option("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(Exception, match="topic option required"):
        w.save()
    w = spark.createDataFrame([(b"x",)], "value binary").write.format("moldau").mode("append") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", "t").option("subscribe", "t")
    with pytest.raises(Exception, match="'subscribe' is not supported by the moldau sink"):
        w.save()


def test_streaming_write_pipeline_topic_to_topic(spark, bootstrap, make_topic, tmp_path):
    src = make_topic(4)
    dst = make_topic(2)
    produce_values(bootstrap, src, 5_000, 4)
    df = reader(spark, bootstrap, stream=True, subscribe=src, startingOffsets="earliest",
                maxOffsetsPerTrigger="2000").load()
    out = df.selectExpr("key", "concat(value, cast('!' as binary)) as value")
    q = (out.writeStream.format("moldau").option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [2000, 2000, 1000]
    got = read_all_confluent(bootstrap, dst, 2)
    assert len(got) == 5_000
    assert sorted(m.value for m in got) == sorted(b"v%07d!" % i for i in range(5_000))
    assert {m.key for m in got} == {b"k%d" % i for i in range(5_000)}

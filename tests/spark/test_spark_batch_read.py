"""Batch reads through format("moldau") against a real broker (data written by confluent-kafka)."""

from __future__ import annotations

import json
import time
from datetime import UTC

import pytest

from harness.kafkautil import produce_confluent
from harness.spark_helpers import produce_values, random_records, reader, rows_by_position


def test_batch_read_exact_bytes_written_by_confluent(spark, bootstrap, make_topic):
    topic = make_topic(12)
    records = random_records(3000, 12)
    delivered = produce_confluent(bootstrap, topic, records, conf={"compression.type": "lz4"})
    # per partition, offsets follow the produce order: the n-th record sent to a partition has offset n
    sent: dict[tuple[int, int], dict] = {}
    counts = [0] * 12
    for rec in records:
        sent[(rec["partition"], counts[rec["partition"]])] = rec
        counts[rec["partition"]] += 1
    df = reader(spark, bootstrap, subscribe=topic, includeHeaders="true").load()
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    got = rows_by_position(df.collect())
    assert len(got) == len(delivered) == 3000
    assert {p for p, _o in got} == set(range(12))
    for m in delivered:
        r = got[(m.partition(), m.offset())]
        assert r["topic"] == topic
        assert r["key"] == m.key()
        assert r["value"] == m.value()
        assert r["key"] == sent[(m.partition(), m.offset())]["key"]
        # no headers: null, as in Spark's own Kafka source
        got_headers = None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]]
        assert got_headers == (sent[(m.partition(), m.offset())].get("headers") or None)
        ts_type, ts = m.timestamp()
        assert r["timestampType"] == 0 == ts_type - 1  # confluent: 1 = CreateTime
        assert int(r["timestamp"].replace(tzinfo=UTC).timestamp() * 1000) == ts or \
            round(r["timestamp"].timestamp() * 1000) == ts


def test_tuple_path_reads_the_same_rows(spark, bootstrap, make_topic):
    topic = make_topic(3)
    produce_confluent(bootstrap, topic, random_records(400, 3, seed=11))
    arrow = reader(spark, bootstrap, subscribe=topic, includeHeaders="true").load().collect()
    rows = (
        reader(spark, bootstrap, subscribe=topic, includeHeaders="true", **{"moldau.arrow": "false"})
        .load()
        .collect()
    )
    assert len(arrow) == 400
    assert rows_by_position(arrow) == rows_by_position(rows)


def test_starting_and_ending_offsets_json(spark, bootstrap, make_topic):
    topic = make_topic(3)
    produce_values(bootstrap, topic, 300, 3)  # 100 per partition
    start = json.dumps({topic: {"0": 10, "1": -2, "2": 50}})
    end = json.dumps({topic: {"0": 20, "1": 5, "2": -1}})
    df = reader(spark, bootstrap, subscribe=topic, startingOffsets=start, endingOffsets=end).load()
    got = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
    want = sorted(
        [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)] + [(2, o) for o in range(50, 100)]
    )
    assert got == want


def test_assign_and_subscribe_pattern(spark, bootstrap, make_topic):
    a = make_topic(2)
    b = make_topic(2)
    produce_values(bootstrap, a, 20, 2)
    produce_values(bootstrap, b, 20, 2)
    df = reader(spark, bootstrap, assign=json.dumps({a: [1], b: [0]})).load()
    assert sorted({(r["topic"], r["partition"]) for r in df.collect()}) == sorted([(a, 1), (b, 0)])
    assert df.count() == 20
    common = a[: a.rindex("-")]  # both topics share the test-name prefix
    df = reader(spark, bootstrap, subscribePattern=common.replace(".", r"\.") + "-.*").load()
    assert {r["topic"] for r in df.select("topic").distinct().collect()} == {a, b}


def test_min_partitions_splits_large_ranges(spark, bootstrap, make_topic):
    topic = make_topic(2)
    produce_values(bootstrap, topic, 2000, 2)
    df = reader(spark, bootstrap, subscribe=topic, minPartitions="6").load()
    assert df.rdd.getNumPartitions() == 6
    offsets = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
    assert offsets == sorted((p, o) for p in range(2) for o in range(1000))
    df = reader(spark, bootstrap, subscribe=topic, maxRecordsPerPartition="300").load()
    assert df.rdd.getNumPartitions() == 8  # ceil(1000 / 300) per partition
    assert df.count() == 2000


def test_starting_timestamp(spark, bootstrap, make_topic):
    topic = make_topic(2)
    base = int(time.time() * 1000) - 3_600_000  # recent: retention deletes older records
    produce_confluent(bootstrap, topic, ({"value": b"%d" % i, "partition": i % 2, "timestamp": base + i * 10}
                                         for i in range(100)))
    df = reader(spark, bootstrap, subscribe=topic, startingTimestamp=str(base + 500)).load()
    assert sorted(int(r["value"]) for r in df.collect()) == list(range(50, 100))
    by_ts = json.dumps({topic: {"0": base + 900, "1": base}})
    df = reader(spark, bootstrap, subscribe=topic, startingOffsetsByTimestamp=by_ts).load()
    assert sorted(int(r["value"]) for r in df.collect()) == sorted(
        [i for i in range(90, 100) if i % 2 == 0] + [i for i in range(100) if i % 2 == 1])


@pytest.mark.parametrize("options, message", [
    ({"bogusOption": "1"}, "'bogusoption' is not supported"),
    ({"kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not supported"),
    ({"kafka.no.such.setting": "1"}, "no.such.setting"),
    ({"startingOffsets": "latest"}, "'startingOffsets' must not be 'latest'"),
    ({"endingOffsets": "earliest"}, "'endingOffsets' must not be 'earliest'"),
    ({"maxOffsetsPerTrigger": "10"}, "only valid in streaming"),
])
def test_unsupported_options_refused_by_name(spark, bootstrap, options, message):
    r = reader(spark, bootstrap, subscribe="whatever", **options)
    with pytest.raises(Exception, match=message):
        r.load().collect()


def test_fixed_schema_and_one_subscription(spark, bootstrap):
    with pytest.raises(Exception, match="exactly one of"):
        reader(spark, bootstrap, subscribe="a", assign='{"a":[0]}').load().collect()
    with pytest.raises(Exception, match="fixed schema"):
        reader(spark, bootstrap, subscribe="a").schema("value string").load().collect()
    q = (reader(spark, bootstrap, stream=True, subscribe="a", endingOffsets="latest").load()
         .writeStream.format("noop").trigger(availableNow=True).start())
    with pytest.raises(Exception, match="not valid in streaming"):
        q.awaitTermination(60)

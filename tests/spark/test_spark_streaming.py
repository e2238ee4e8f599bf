"""Structured Streaming reads through format("moldau"): checkpoints, restarts, rate limits, triggers."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import NewPartitions

from harness.kafkautil import admin, produce_confluent
from harness.spark_helpers import produce_values, reader


def _run_available_now(spark, bootstrap, topic, out, checkpoint, trigger=None, **options):
    df = reader(spark, bootstrap, stream=True, subscribe=topic, **options).load()
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(**(trigger or {"availableNow": True}))
        .start()
    )
    q.awaitTermination(180)
    assert not q.isActive
    if q.exception() is not None:
        raise q.exception()
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] or p["sources"]]


def _assert_exactly(spark, out, partitions, per_partition):
    rows = spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    seen = sorted((r["partition"], r["offset"]) for r in rows)
    want = sorted((p, o) for p in range(partitions) for o in range(per_partition))
    assert len(seen) == len(set(seen)), "duplicates"
    assert seen == want, "gaps or extra rows"
    return rows


def test_available_now_checkpoint_restart_no_duplicates_no_gaps(spark, bootstrap, make_topic, tmp_path):
    topic = make_topic(4)
    produce_values(bootstrap, topic, 100_000, 4)
    out, cp = tmp_path / "out", tmp_path / "cp"
    sizes = _run_available_now(spark, bootstrap, topic, out, cp, startingOffsets="earliest",
                               maxOffsetsPerTrigger="40000")
    assert [s for s in sizes if s] == [40000, 40000, 20000]  # maxOffsetsPerTrigger honoured
    rows = _assert_exactly(spark, out, 4, 25_000)
    assert sorted(int(r["value"][1:]) for r in rows) == list(range(100_000))

    produce_values(bootstrap, topic, 8_000, 4, prefix=b"w", start=100_000)
    # the checkpoint is the only truth: startingOffsets is ignored on restart
    sizes = _run_available_now(spark, bootstrap, topic, out, cp, startingOffsets="latest")
    assert sum(sizes) == 8_000
    _assert_exactly(spark, out, 4, 27_000)
    # nothing new: another run reads nothing
    assert sum(_run_available_now(spark, bootstrap, topic, out, cp)) == 0


def test_max_offsets_per_trigger_uneven_partitions(spark, bootstrap, make_topic, tmp_path):
    topic = make_topic(3)
    produce_confluent(
        bootstrap,
        topic,
        ({"value": b"%d" % i, "partition": 0 if i < 700 else (1 if i < 950 else 2)} for i in range(1000)),
    )
    sizes = _run_available_now(spark, bootstrap, topic, tmp_path / "out", tmp_path / "cp",
                               startingOffsets="earliest", maxOffsetsPerTrigger="300")
    sizes = [s for s in sizes if s]
    assert sizes == [300, 300, 300, 100]
    assert spark.read.parquet(str(tmp_path / "out")).count() == 1000


def _wait(cond, timeout=90.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_processing_time_trigger_stop_and_restart(spark, bootstrap, make_topic, tmp_path):
    topic = make_topic(4)
    produce_values(bootstrap, topic, 100, 4, prefix=b"old")  # before the query starts: not read (latest)
    out, cp = tmp_path / "out", tmp_path / "cp"

    def start():
        df = reader(spark, bootstrap, stream=True, subscribe=topic, maxOffsetsPerTrigger="25000").load()
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(cp))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def rows_read(q):
        return sum(p["numInputRows"] for p in q.recentProgress)

    q = start()
    try:
        _wait(lambda: q.lastProgress is not None, what="the first trigger")  # fixes the initial offsets
        produce_values(bootstrap, topic, 60_000, 4, prefix=b"new")
        _wait(lambda: rows_read(q) >= 25_000, what="the first batches")
    finally:
        q.stop()
    first = rows_read(q)
    assert all(p["numInputRows"] <= 25_000 for p in q.recentProgress)
    produce_values(bootstrap, topic, 40_000, 4, prefix=b"new", start=60_000)
    q = start()
    try:
        _wait(lambda: rows_read(q) >= 100_000 - first, what="the rest after the restart")
    finally:
        q.stop()
    rows = _assert_exactly_range(spark, out, 4, 25, 25_025)
    assert sorted(int(r["value"][3:]) for r in rows) == list(range(100_000))


def _assert_exactly_range(spark, out, partitions, lo, hi):
    rows = spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    seen = sorted((r["partition"], r["offset"]) for r in rows)
    assert len(seen) == len(set(seen)), "duplicates"
    assert seen == sorted((p, o) for p in range(partitions) for o in range(lo, hi)), "gaps or extra rows"
    return rows


def test_new_partitions_are_picked_up(spark, bootstrap, make_topic, tmp_path):
    topic = make_topic(2)
    produce_values(bootstrap, topic, 100, 2)
    out, cp = tmp_path / "out", tmp_path / "cp"
    assert sum(_run_available_now(spark, bootstrap, topic, out, cp, startingOffsets="earliest")) == 100
    ac = admin(bootstrap)
    ac.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    time.sleep(0.5)
    produce_values(bootstrap, topic, 200, 4, start=100)
    assert sum(_run_available_now(spark, bootstrap, topic, out, cp)) == 200
    got = spark.read.parquet(str(out)).select("partition", "offset").collect()
    by_p: dict[int, list[int]] = {}
    for r in got:
        by_p.setdefault(r["partition"], []).append(r["offset"])
    assert sorted(by_p) == [0, 1, 2, 3]
    assert sorted(by_p[2]) == list(range(50)) and sorted(by_p[3]) == list(range(50))
    assert sorted(by_p[0]) == list(range(100)) and sorted(by_p[1]) == list(range(100))


@pytest.mark.moldau_only("DeleteRecords")
def test_deleted_offsets_follow_fail_on_data_loss(spark, bootstrap, make_topic, tmp_path):
    topic = make_topic(1)
    produce_values(bootstrap, topic, 50, 1)
    out, cp = tmp_path / "out", tmp_path / "cp"
    assert sum(_run_available_now(spark, bootstrap, topic, out, cp, startingOffsets="earliest")) == 50
    produce_values(bootstrap, topic, 50, 1, start=50)
    ac = admin(bootstrap)
    res = ac.delete_records([CTP(topic, 0, 80)])
    for f in res.values():
        f.result(30)
    with pytest.raises(Exception, match="failOnDataLoss"):
        _run_available_now(spark, bootstrap, topic, out, cp)
    sizes = _run_available_now(spark, bootstrap, topic, out, cp, failOnDataLoss="false")
    assert sum(sizes) == 20
    offsets = sorted(r["offset"] for r in spark.read.parquet(str(out)).select("offset").collect())
    assert offsets == list(range(50)) + list(range(80, 100))


def test_offsets_are_spark_kafka_json(spark, bootstrap, make_topic, tmp_path):
    topic = make_topic(2)
    produce_values(bootstrap, topic, 10, 2)
    cp = tmp_path / "cp"
    # Trigger.Once: everything in one batch, whatever maxOffsetsPerTrigger says (ReadAllAvailable)
    sizes = _run_available_now(spark, bootstrap, topic, tmp_path / "out", cp, trigger={"once": True},
                               startingOffsets="earliest", maxOffsetsPerTrigger="3")
    assert [s for s in sizes if s] == [10]
    files = sorted((cp / "offsets").iterdir(), key=lambda p: p.name)
    last = [ln for ln in files[-1].read_text().splitlines() if ln.startswith("{")][-1]
    assert json.loads(last) == {topic: {"0": 5, "1": 5}}

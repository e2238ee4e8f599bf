"""Exactly-once streaming writes and read_committed reads through format("moldau"), in local Spark against
a real broker; results read back with confluent-kafka consumers (read_committed / read_uncommitted)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer as CProducer

from moldau.client import Admin

from harness.spark_helpers import produce_values, read_values, reader


def _expected(n: int, suffix: bytes = b"") -> list[bytes]:
    return [b"v%07d" % i + suffix for i in range(n)]


def _dupes(values: list[bytes]) -> dict[bytes, int]:
    return {v: c for v, c in Counter(values).items() if c > 1}


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_exactly_once_stream_topic_to_topic(spark, bootstrap, make_topic, tmp_path, arrow):
    src = make_topic(4)
    dst = make_topic(3)
    produce_values(bootstrap, src, 3_000, 4)
    df = reader(spark, bootstrap, stream=True, subscribe=src, startingOffsets="earliest",
                maxOffsetsPerTrigger="1000").load()
    q = (df.selectExpr("key", "value").writeStream.format("moldau")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
         .option("deliveryGuarantee", "exactly-once").option("moldau.arrow", arrow)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [1000, 1000, 1000]
    got = read_values(bootstrap, dst, 3, "read_committed")
    assert sorted(got) == _expected(3_000)
    # every task's transaction committed the batch marker of its last micro-batch
    with Admin(bootstrap_servers=bootstrap) as admin:
        for task in range(4):
            offsets = admin.list_consumer_group_offsets(f"moldau-spark-{q.id}-{task}")
            assert [(tp.topic, tp.partition, om.offset) for tp, om in offsets.items()] == [(dst, 0, 2)]
            assert f'"query":"{q.id}"' in next(iter(offsets.values())).metadata


def test_failed_micro_batch_is_replayed_exactly_once(spark, bootstrap, make_topic, tmp_path):
    """Batch 1 fails in one task (a UDF raises once) after other tasks of the batch wrote their rows in
    open transactions; the query stops. Restarted from the checkpoint, batch 1 is replayed: the earlier
    attempts' transactions are aborted (by the driver, or fenced by the replay), and every input is in the
    output once. Then the last batch is replayed once more as if the driver had died after committing the
    transactions but before Spark's commit log was written: its tasks find their markers and write nothing."""
    from pyspark.sql.functions import col, udf
    from pyspark.sql.types import BinaryType

    src = make_topic(4)
    dst = make_topic(2)
    n = 4_000
    produce_values(bootstrap, src, n, 4)
    flag = str(tmp_path / "failed-once")
    fail_on = b"v%07d" % 1_996  # batch 1 (offsets 250..499 of each partition), last row of partition 0

    def once(v):  # (no type hints: PySpark would try to infer a pandas UDF from them)
        if bytes(v) == fail_on and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("injected failure in micro-batch 1")
        return bytes(v)

    boom = udf(once, BinaryType())
    cp = tmp_path / "cp"

    def run() -> object:
        df = reader(spark, bootstrap, stream=True, subscribe=src, startingOffsets="earliest",
                    maxOffsetsPerTrigger="1000").load()
        q = (df.select(col("key"), boom(col("value")).alias("value")).writeStream.format("moldau")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
             .option("checkpointLocation", str(cp)).trigger(availableNow=True).start())
        with contextlib.suppress(Exception):  # inspected through q.exception()
            q.awaitTermination(180)
        return q

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        q1 = run()
        assert q1.exception() is not None and "injected failure" in str(q1.exception())
        assert os.path.exists(flag)
        assert sorted(f for f in os.listdir(cp / "commits") if f.isdigit()) == ["0"]  # batch 1 not committed
        q2 = run()
        assert q2.exception() is None, q2.exception()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert q1.id == q2.id  # the query id (and so the transactional ids) survive the restart
    committed = read_values(bootstrap, dst, 2, "read_committed")
    assert not _dupes(committed)
    assert sorted(committed) == _expected(n)
    everything = read_values(bootstrap, dst, 2, "read_uncommitted")
    assert len(everything) >= n  # plus whatever the failed attempt had sent before it was aborted

    # the driver "died" after committing batch 3's transactions, before the commit log entry
    last = max(int(f) for f in os.listdir(cp / "commits") if f.isdigit())
    assert last == 3
    os.remove(cp / "commits" / str(last))
    crc = cp / "commits" / f".{last}.crc"
    if crc.exists():
        crc.unlink()
    q3 = run()
    assert q3.exception() is None
    assert [p["batchId"] for p in q3.recentProgress if p["numInputRows"]] == [3]  # replayed
    assert sorted(read_values(bootstrap, dst, 2, "read_committed")) == _expected(n)
    assert len(read_values(bootstrap, dst, 2, "read_uncommitted")) == len(everything)  # nothing sent at all


def test_reader_read_committed_skips_aborted_and_stops_at_open_transactions(spark, bootstrap, make_topic):
    t = make_topic(2)
    plain = CProducer({"bootstrap.servers": bootstrap})
    txp = CProducer({"bootstrap.servers": bootstrap, "transactional.id": "spark-reader-" + uuid.uuid4().hex})
    txp.init_transactions(10)

    def send(p: CProducer, prefix: str, count: int) -> list[bytes]:
        vals = [f"{prefix}-{i}".encode() for i in range(count)]
        for i, v in enumerate(vals):
            p.produce(t, v, partition=i % 2)
        p.flush(10)
        return vals

    def txn(prefix: str, count: int, commit: bool) -> list[bytes]:
        txp.begin_transaction()
        vals = send(txp, prefix, count)
        (txp.commit_transaction if commit else txp.abort_transaction)(10)
        return vals

    visible = send(plain, "plain", 10) + txn("c1", 40, True)
    aborted = txn("a1", 30, False)
    visible += txn("c2", 20, True) + send(plain, "plain2", 10)
    aborted += txn("a2", 5, False)
    # a transaction left open: read_committed ends at its first offset (the last stable offset)
    opener = CProducer({"bootstrap.servers": bootstrap, "transactional.id": "spark-open-" + uuid.uuid4().hex,
                        "transaction.timeout.ms": 60000})
    opener.init_transactions(10)
    opener.begin_transaction()
    pending = send(opener, "open", 6) + send(plain, "late", 4)
    try:
        def values(iso: str, arrow: str) -> list[bytes]:
            df = reader(
                spark, bootstrap, subscribe=t, **{"kafka.isolation.level": iso, "moldau.arrow": arrow}
            ).load()
            return [bytes(r.value) for r in df.select("value").collect()]

        for arrow in ("true", "false"):
            got = values("read_committed", arrow)
            assert sorted(got) == sorted(visible), arrow
            got = values("read_uncommitted", arrow)
            assert sorted(got) == sorted(visible + aborted + pending), arrow
    finally:
        opener.abort_transaction(10)

"""Spark data source throughput: format("moldau") against an in-memory source and against Spark's own Kafka
source and sink (format("kafka"), spark-sql-kafka-0-10) on the same topic, in one run.

Fills a 4-partition topic with N records of 100 bytes (confluent-kafka), then, in local Spark:

* reads it with ``spark.read.format("moldau")`` into the ``noop`` sink, Arrow path (default) and tuple
  path (``moldau.arrow=false``);
* reads it with ``readStream ... trigger(availableNow=True)`` into ``noop``, both paths;
* reads the same row shape (Spark's Kafka schema, 100-byte values, 4 partitions) from an in-memory Python
  data source that yields ready Arrow batches: the floor of PySpark's Python data source path, the
  baseline the moldau source is compared with;
* writes N rows (100-byte values) with ``df.write.format("moldau")``, Arrow writer and row writer, next to
  a Python Arrow sink that drops the same rows (the floor of PySpark's Python data source write path);
* the same reads and writes through Spark's own Kafka source and sink, ``format("kafka")``, on the same topic
  and the same broker (its jars from the JVM harness's cache, tests/jvm/apps/spark; ``--no-kafka`` leaves
  them out);
* streams the topic into another topic (``readStream ... writeStream.format("moldau")``, availableNow, 10
  micro-batches by default, ``--stream-batches``) at least once and exactly once (transactions), Arrow writer and row writer, next to the
  same stream into ``noop``.

Each measurement is repeated (default 2) and the best rows/s is kept (the machine is shared). Streaming
figures are wall time from start() to the end of the query (a new query pays for its planning and for
PySpark's driver-side source process) and, on a second line, the time inside the micro-batches (Spark's
``durationMs.addBatch``).

    python bench/spark_throughput.py                      # starts a moldau broker
    python bench/spark_throughput.py -n 200000 --repeat 1
    python bench/spark_throughput.py --bootstrap 127.0.0.1:9092
    python bench/spark_throughput.py --only stream-write       # sections: read, write, stream-write

Prints a table and, last, one JSON document. Never asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)
sys.path.insert(0, str(ROOT / "src"))

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

PARTITIONS = 4
VALUE_SIZE = 100


class MemorySource(DataSource):
    """Spark's Kafka row shape from memory: each task yields one prebuilt Arrow batch over and over."""

    @classmethod
    def name(cls) -> str:
        return "moldau_bench_memory"

    def schema(self) -> str:
        return ("key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
                "timestampType int")

    def reader(self, schema: Any) -> DataSourceReader:
        return MemoryReader(int(self.options["rows"]))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return DiscardWriter()


class DiscardWriter(DataSourceArrowWriter):
    """The writers' baseline: takes the Arrow batches and drops them."""

    def write(self, iterator: Any) -> WriterCommitMessage:
        for _batch in iterator:
            pass
        return WriterCommitMessage()


class MemoryReader(DataSourceReader):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Any:
        import numpy as np
        import pyarrow as pa

        from moldau.spark.arrow import arrow_schema

        per = self.rows // PARTITIONS
        chunk = 10_000
        n = min(chunk, per)
        values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            np.arange(0, (n + 1) * VALUE_SIZE, VALUE_SIZE, dtype=np.int32)), pa.py_buffer(os.urandom(n * VALUE_SIZE))])
        batch = pa.RecordBatch.from_arrays([
            pa.nulls(n, pa.binary()), values, pa.array(["bench"] * n, pa.string()),
            pa.array(np.full(n, partition.value, np.int32)), pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.full(n, 1_700_000_000_000_000, np.int64)).cast(pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(n, np.int32))], schema=arrow_schema(False))
        done = 0
        while done < per:
            take = min(n, per - done)
            yield batch if take == n else batch.slice(0, take)
            done += take


def fill_topic(bootstrap: str, n: int) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "bench-spark-" + uuid.uuid4().hex[:8]
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    time.sleep(0.5)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(VALUE_SIZE)
    for i in range(n):
        while True:
            try:
                p.produce(name, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return name


def timed(fn: Callable[[], Any], rows: int, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best = dt if best is None or dt < best else best
    assert best is not None
    return {"seconds": round(best, 3), "rows_per_s": round(rows / best)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--stream-batches", type=int, default=10, help="micro-batches of the stream-write section")
    ap.add_argument("--no-kafka", action="store_true", help="leave out Spark's own format(\"kafka\")")
    ap.add_argument("--only", default="read,write,stream-write",
                    help="comma-separated sections to run: read, write, stream-write")
    args = ap.parse_args()

    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        from harness.brokerproc import BrokerProcess

        base = Path(tempfile.mkdtemp(prefix="bench-spark-"))
        broker = BrokerProcess("moldau", base / "data", settings={}, log_dir=base)
        broker.start()
        bootstrap = broker.bootstrap
    try:
        run(bootstrap, args)
    finally:
        if broker is not None:
            broker.close()


def run(bootstrap: str, args: argparse.Namespace) -> None:
    from pyspark.sql import SparkSession

    import moldau.spark

    n = args.n
    t = time.perf_counter()
    topic = fill_topic(bootstrap, n)
    fill_s = time.perf_counter() - t
    builder = SparkSession.builder
    kafka = not args.no_kafka
    if kafka:
        from harness.sparkkafka import kafka_jars, spark_kafka_version

        builder = builder.config("spark.jars", ",".join(kafka_jars()))
    spark = (builder.master(args.master).appName("moldau-spark-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    moldau.spark.register(spark)
    spark.dataSource.register(MemorySource)
    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-cp-"))

    def kafka_batch_read() -> None:
        (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
         .load().write.format("noop").mode("overwrite").save())

    def kafka_stream_read() -> None:
        q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp / uuid.uuid4().hex))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        got = sum(p["numInputRows"] for p in q.recentProgress)
        assert got == n, f"format('kafka') streaming read {got} rows, expected {n}"

    def kafka_write() -> None:
        dst = "bench-spark-out-" + uuid.uuid4().hex[:8]
        (rows_to_write().write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).save())

    def batch_read(arrow: bool) -> Callable[[], None]:
        def go() -> None:
            (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("moldau.arrow", str(arrow).lower()).load().write.format("noop").mode("overwrite").save())
        return go

    batch_ms: dict[bool, list[int]] = {True: [], False: []}

    def stream_read(arrow: bool) -> Callable[[], None]:
        def go() -> None:
            q = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("moldau.arrow", str(arrow).lower()).load()
                 .writeStream.format("noop").option("checkpointLocation", str(tmp / uuid.uuid4().hex))
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            got = sum(p["numInputRows"] for p in q.recentProgress)
            assert got == n, f"streaming read {got} rows, expected {n}"
            batch_ms[arrow].append(sum(p["durationMs"].get("addBatch", 0) for p in q.recentProgress))
        return go

    def memory() -> None:
        (spark.read.format("moldau_bench_memory").option("rows", str(n)).load()
         .write.format("noop").mode("overwrite").save())

    def rows_to_write() -> Any:
        return spark.range(0, n, 1, PARTITIONS).selectExpr(
            f"cast(lpad(cast(id as string), {VALUE_SIZE}, 'x') as binary) as value")

    def write(arrow: bool) -> Callable[[], None]:
        def go() -> None:
            dst = "bench-spark-out-" + uuid.uuid4().hex[:8]
            (rows_to_write().write.format("moldau").mode("append").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", dst).option("moldau.arrow", str(arrow).lower()).save())
        return go

    def discard() -> None:
        rows_to_write().write.format("moldau_bench_memory").mode("append").save()

    stream_write_ms: dict[str, list[int]] = {}

    def stream_write(label: str, sink: str, **options: str) -> Callable[[], None]:
        def go() -> None:
            w = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", str(max(n // args.stream_batches, 1))).load()
                 .selectExpr("key", "value").writeStream.format(sink)
                 .option("checkpointLocation", str(tmp / uuid.uuid4().hex)))
            if sink in ("moldau", "kafka"):
                w = w.option("kafka.bootstrap.servers", bootstrap).option("topic", "bench-spark-stream-" + uuid.uuid4().hex[:8])
            for k, v in options.items():
                w = w.option(k, v)
            q = w.trigger(availableNow=True).start()
            q.awaitTermination()
            got = sum(p["numInputRows"] for p in q.recentProgress)
            assert got == n, f"streaming write read {got} rows, expected {n}"
            stream_write_ms.setdefault(label, []).append(
                sum(p["durationMs"].get("addBatch", 0) for p in q.recentProgress))
        return go

    # warm up the JVM and the Python workers
    (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
     .option("endingOffsets", json.dumps({topic: {str(p): 1000 for p in range(PARTITIONS)}})).load()
     .write.format("noop").mode("overwrite").save())
    memory()
    if kafka:
        kafka_batch_read()

    sections = {x.strip() for x in args.only.split(",") if x.strip()}
    results: dict[str, dict] = {}
    results["in-memory Python source (Arrow), baseline"] = timed(memory, n, args.repeat)
    if "read" in sections:
        results["moldau batch read, Arrow"] = timed(batch_read(True), n, args.repeat)
        results["moldau batch read, tuples"] = timed(batch_read(False), n, args.repeat)
        results["moldau streaming availableNow, Arrow"] = timed(stream_read(True), n, args.repeat)
        results["moldau streaming availableNow, tuples"] = timed(stream_read(False), n, args.repeat)
        for arrow, label in ((True, "Arrow"), (False, "tuples")):
            ms = min(batch_ms[arrow])
            results[f"  (same, time inside micro-batches, {label})"] = {"seconds": round(ms / 1000, 3),
                                                                        "rows_per_s": round(n / (ms / 1000))}
        if kafka:
            results["Spark's Kafka source (format kafka) batch read"] = timed(kafka_batch_read, n, args.repeat)
            results["Spark's Kafka source (format kafka) streaming availableNow"] = timed(
                kafka_stream_read, n, args.repeat)
    if "write" in sections:
        results["Python Arrow sink that drops the rows, baseline"] = timed(discard, n, args.repeat)
        results["moldau batch write, Arrow writer"] = timed(write(True), n, args.repeat)
        results["moldau batch write, row writer"] = timed(write(False), n, args.repeat)
        if kafka:
            results["Spark's Kafka sink (format kafka) batch write"] = timed(kafka_write, n, args.repeat)
    if "stream-write" in sections:
        runs = [
            ("stream topic -> noop (baseline)", "noop", {}),
            *([("stream -> kafka (Spark's Kafka sink, at least once)", "kafka", {})] if kafka else []),
            ("stream -> moldau, Arrow, at-least-once", "moldau", {"deliveryGuarantee": "at-least-once"}),
            ("stream -> moldau, Arrow, exactly-once", "moldau", {"deliveryGuarantee": "exactly-once"}),
            ("stream -> moldau, rows, at-least-once", "moldau",
             {"deliveryGuarantee": "at-least-once", "moldau.arrow": "false"}),
            ("stream -> moldau, rows, exactly-once", "moldau",
             {"deliveryGuarantee": "exactly-once", "moldau.arrow": "false"}),
        ]
        for label, sink, options in runs:
            results[label] = timed(stream_write(label, sink, **options), n, args.repeat)
            ms = min(stream_write_ms[label])
            results[f"  (same, inside micro-batches) {label.split(' -> ', 1)[-1]}"] = {
                "seconds": round(ms / 1000, 3), "rows_per_s": round(n / (ms / 1000))}
    spark.stop()

    base = results["in-memory Python source (Arrow), baseline"]["rows_per_s"]
    print(f"\n{n} records of {VALUE_SIZE} bytes, {PARTITIONS} partitions, {args.master}, noop sink "
          f"(topic filled in {fill_s:.1f} s)\n")
    width = max(50, *(len(k) for k in results))
    print(f"{'measurement':<{width}} {'seconds':>8} {'rows/s':>10} {'vs baseline':>12}")
    for name, r in results.items():
        print(f"{name:<{width}} {r['seconds']:>8.2f} {r['rows_per_s']:>10,} {r['rows_per_s'] / base:>11.2f}x")
    print(json.dumps({"records": n, "value_bytes": VALUE_SIZE, "partitions": PARTITIONS, "master": args.master,
                      "spark_sql_kafka": spark_kafka_version() if kafka else None, "results": results}, indent=1))


if __name__ == "__main__":
    main()

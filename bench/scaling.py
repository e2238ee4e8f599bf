#!/usr/bin/env python3
"""One broker process against two as one deployment: two producers, then two consumers, on one machine.

    .venv/bin/python bench/scaling.py                          # 1 KiB, 150,000 records per client, 5 repeats
    .venv/bin/python bench/scaling.py --size 100 --records 300000 --repeat 5

Two local ZooKeeper-coordinated deployments (``moldau.broker.cluster.local.LocalCluster``, what ``moldau
cluster up`` starts) run side by side for the whole run: A with one broker process, B with two. Each run
creates one topic of two partitions (RF=1) on one of them; on B the controller's round-robin assignment puts
one partition on each broker, so each broker process leads one partition (checked, and recorded). Two
producer processes (confluent-kafka, acks=1, linger.ms=5, idempotence off) each write N records of the
given size to their own partition at the same time; then two consumer processes each read their partition
from offset 0 (``assign``, no group) until N records are in. Throughput is 2N over the span from the first
client's start to the last client's end. The broker processes' CPU (user + sys from /proc, all brokers of
the deployment) during each phase is given per MB of values. Runs alternate A and B (ABBA...) so that the
machine's changing load hits both alike; the table shows medians and B / A. The 1-minute load average is
recorded before every phase: on a shared 2-core machine the clients (four processes) and the brokers
compete for the same two cores, so the ratio understates what two brokers gain on an idle machine with
cores to spare. JSON goes to --out or bench/results/scaling-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
CLIENTS = 2  # producers, and consumers


def cpu_seconds(pid: int) -> float:
    """user + sys CPU seconds of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def produce_worker(
    bootstrap: str,
    topic: str,
    partition: int,
    n: int,
    size: int,
    extra: dict[str, str],
    barrier: Any,
    out: Any,
) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
            **extra,
        }
    )
    p.list_topics(topic, timeout=10)  # connected before the clock starts
    value = b"x" * size
    failed = []

    def cb(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    barrier.wait()
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=partition, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(300)
    t1 = time.perf_counter()
    c = os.times()
    out.put((partition, t0, t1, len(failed) + left, c.user + c.system))


def consume_worker(
    bootstrap: str,
    topic: str,
    partition: int,
    n: int,
    size: int,
    extra: dict[str, str],
    barrier: Any,
    out: Any,
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-scaling-{partition}",  # required by librdkafka; assign() uses no group
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 52428800,
            **extra,
        }
    )
    c.list_topics(topic, timeout=10)
    barrier.wait()
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, partition, 0)])
    got = 0
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    t1 = time.perf_counter()
    c.close()
    ct = os.times()
    out.put((partition, t0, t1, n - got, ct.user + ct.system))


def phase(
    ctx: Any, target: Any, deployment: Any, topic: str, n: int, size: int, extra: dict[str, str]
) -> dict[str, Any]:
    """Run CLIENTS client processes of ``target`` against the topic's partitions 0..CLIENTS-1."""
    barrier = ctx.Barrier(CLIENTS + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(deployment.bootstrap, topic, i, n, size, extra, barrier, out))
        for i in range(CLIENTS)
    ]
    for p in procs:
        p.start()
    pids = [b.proc.pid for b in deployment.brokers if b.proc is not None]
    load = os.getloadavg()[0]
    barrier.wait(60)
    before = [cpu_seconds(pid) for pid in pids]
    results = [out.get(timeout=400) for _ in procs]
    cpu = [cpu_seconds(pid) - b for pid, b in zip(pids, before)]
    for p in procs:
        p.join(30)
    missing = sum(r[3] for r in results)
    if missing:
        raise RuntimeError(f"{target.__name__}: {missing} records failed or not read")
    span = max(r[2] for r in results) - min(r[1] for r in results)
    mb = CLIENTS * n * size / 1e6
    return {
        "records_per_s": CLIENTS * n / span,
        "mb_per_s": mb / span,
        "seconds": span,
        "broker_cpu_s": cpu,
        "broker_cpu_ms_per_mb": sum(cpu) * 1000 / mb,
        # cores busy: a broker process near 1.0 is the limit; far below, the clients (or the machine) are
        "busiest_broker_cores": max(cpu) / span,
        "client_cores": sum(r[4] for r in results) / span,
        "client_cpu_ms_per_mb": sum(r[4] for r in results) * 1000 / mb,
        "loadavg_1min_before": load,
    }


def run_once(ctx: Any, name: str, deployment: Any, topic: str, n: int, size: int, a: Any) -> dict[str, Any]:
    from harness.clusterutil import admin, create_topic, partitions, wait_until

    bs = deployment.bootstrap
    create_topic(bs, topic, partitions=CLIENTS, rf=1)
    leaders = wait_until(
        lambda: (
            (ps := partitions(bs, topic))
            and all(p.leader > 0 for p in ps.values())
            and {i: p.leader for i, p in ps.items()}
        ),
        30,
        f"{topic}'s leaders",
    )
    run: dict[str, Any] = {"deployment": name, "brokers": len(deployment.brokers), "leaders": leaders}
    run["produce"] = phase(ctx, produce_worker, deployment, topic, n, size, settings(a.producer_set))
    run["consume"] = phase(ctx, consume_worker, deployment, topic, n, size, settings(a.consumer_set))
    a = admin(bs)
    a.delete_topics([topic], operation_timeout=30)[topic].result(60)
    dirs = [os.path.join(b.data_dir, f"{topic}-{i}") for b in deployment.brokers for i in range(CLIENTS)]
    deadline = time.monotonic() + 60
    while any(os.path.exists(d) for d in dirs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return run


def settings(pairs: list[str]) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in pairs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=150_000, help="records per client (default 150000)")
    ap.add_argument("--size", type=int, default=1024, help="value size in bytes (default 1024)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per deployment (default 5)")
    ap.add_argument("--first-port", type=int, default=0, help="broker ports from here (default: free ports)")
    ap.add_argument(
        "--producer-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka producer setting (e.g. batch.num.messages=10: many small requests)",
    )
    ap.add_argument(
        "--consumer-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka consumer setting (e.g. fetch.max.bytes=65536)",
    )
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from moldau.broker.cluster.local import LocalCluster

    ctx = mp.get_context("spawn")  # the parent holds librdkafka threads (admin clients): no fork
    folder = tempfile.mkdtemp(prefix="moldau-bench-scaling-")
    configs = ["offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1"]
    fp = a.first_port
    deployments = {
        "one": LocalCluster(os.path.join(folder, "one"), 1, broker_configs=configs, first_port=fp),
        "two": LocalCluster(
            os.path.join(folder, "two"), 2, broker_configs=configs, first_port=fp + 1 if fp else 0
        ),
    }
    runs: list[dict[str, Any]] = []
    try:
        for d in deployments.values():
            d.start()
        from harness.clusterutil import admin, wait_until

        for name, d in deployments.items():
            wait_until(
                lambda d=d: len(admin(d.bootstrap).list_topics(timeout=5).brokers) == len(d.brokers),
                30,
                f"deployment {name} to see its brokers",
            )
        # warm-up, not counted: first topics, page cache, the clients' imports
        for name, d in deployments.items():
            run_once(ctx, name, d, f"bench-scaling-warmup-{name}", max(a.records // 10, 1000), a.size, a)
        for r in range(a.repeat):
            order = ["one", "two"] if r % 2 == 0 else ["two", "one"]
            for name in order:
                run = run_once(
                    ctx, name, deployments[name], f"bench-scaling-{name}-{r}", a.records, a.size, a
                )
                run["repeat"] = r
                runs.append(run)
                print(
                    f"{name:4} run {r}: produce {run['produce']['records_per_s']:9.0f} rec/s"
                    f" ({run['produce']['broker_cpu_ms_per_mb']:.2f} broker CPU ms/MB,"
                    f" load {run['produce']['loadavg_1min_before']:.1f})"
                    f"  consume {run['consume']['records_per_s']:9.0f} rec/s"
                    f" ({run['consume']['broker_cpu_ms_per_mb']:.2f} ms/MB,"
                    f" load {run['consume']['loadavg_1min_before']:.1f})  leaders {run['leaders']}",
                    flush=True,
                )
    finally:
        for d in deployments.values():
            d.stop(graceful=False)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{a.size} B values, {CLIENTS} x {a.records} records per phase, medians of {a.repeat}:")
    print(
        f"{'phase':8} {'1 broker rec/s':>15} {'2 brokers rec/s':>16} {'2/1':>6}"
        f" {'CPU ms/MB 1':>12} {'CPU ms/MB 2':>12} {'busiest 1':>10} {'busiest 2':>10}"
        f" {'clients ms/MB':>14} {'load':>6}"
    )
    medians: dict[str, Any] = {}
    for ph in ("produce", "consume"):
        m = {}
        for name in deployments:
            these = [x[ph] for x in runs if x["deployment"] == name]
            m[name] = {
                k: statistics.median(x[k] for x in these)
                for k in (
                    "records_per_s",
                    "mb_per_s",
                    "broker_cpu_ms_per_mb",
                    "client_cpu_ms_per_mb",
                    "busiest_broker_cores",
                    "client_cores",
                    "loadavg_1min_before",
                )
            }
        m["ratio"] = m["two"]["records_per_s"] / m["one"]["records_per_s"]
        medians[ph] = m
        load = statistics.median([m["one"]["loadavg_1min_before"], m["two"]["loadavg_1min_before"]])
        print(
            f"{ph:8} {m['one']['records_per_s']:15.0f} {m['two']['records_per_s']:16.0f} {m['ratio']:5.2f}x"
            f" {m['one']['broker_cpu_ms_per_mb']:12.2f} {m['two']['broker_cpu_ms_per_mb']:12.2f}"
            f" {m['one']['busiest_broker_cores']:10.2f} {m['two']['busiest_broker_cores']:10.2f}"
            f" {m['one']['client_cpu_ms_per_mb']:14.2f} {load:6.1f}"
        )
    print(
        "busiest: CPU cores used by the busiest broker process during the phase (1.0: that process is the"
        " limit); clients ms/MB: the four client processes' CPU"
    )
    import confluent_kafka

    doc = {
        "size": a.size,
        "producer_set": a.producer_set,
        "consumer_set": a.consumer_set,
        "records_per_client": a.records,
        "clients": CLIENTS,
        "runs": runs,
        "medians": medians,
        "cpus": os.cpu_count(),
        "client": f"confluent-kafka {confluent_kafka.version()[0]}",
        "librdkafka": confluent_kafka.libversion()[0],
        "loadavg_after": os.getloadavg(),
    }
    out = a.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)),
        "results",
        f"scaling-{time.strftime('%Y%m%d-%H%M%S')}.json",
    )
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\nJSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

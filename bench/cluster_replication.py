#!/usr/bin/env python3
"""Produce throughput on a local three-broker cluster, in one run: RF=1 acks=1, RF=3 acks=1, RF=3 acks=all.

    .venv/bin/python bench/cluster_replication.py                  # 100 B and 1 KiB, 3 repeats
    .venv/bin/python bench/cluster_replication.py --brokers moldau,kafka   # and 3 Apache Kafka brokers
    .venv/bin/python bench/cluster_replication.py --records 100000 --sizes 100 --repeat 3

One cluster (ZooKeeper and three ``moldau broker`` processes, ``moldau.broker.cluster.local``) serves every
case; each (case, size, repeat) gets its own 1-partition topic (min.insync.replicas 2 for acks=all), deleted
once measured so that every run starts from the same state; ``--warmup`` records (default 100,000 of 512 B,
RF=3, acks=all) go to each cluster first, not counted (a JVM's JIT, first topics). ``--brokers
moldau,kafka`` (the default) measures the same cases on three Apache Kafka brokers too (KRaft combined
mode, one controller quorum, from tests/jvm's jars: ``brokerproc.KafkaCluster``), one cluster after the
other in the same run, and prints moldau / Kafka. Client:
confluent-kafka, linger.ms=5, idempotence off, values of N bytes; time from the first produce() to flush()
with every delivery report in. The table gives medians and the ratio to RF=1 acks=1 (Kreps 2014 measured
three-way synchronous replication at 0.51x of no replication on Kafka).

Wall throughput on a shared machine moves with whatever else runs, so each run also records the CPU time
(user + sys, from /proc/<pid>/stat) each broker process spent: the topic's leader, its followers, and the
other brokers, as milliseconds per MB of values produced. CPU per MB is the cost of replication itself and
is far less sensitive to outside load than wall time. JSON goes to --out or
bench/results/cluster-replication-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")

CASES = [("rf1-acks1", 1, "1"), ("rf3-acks1", 3, "1"), ("rf3-acksall", 3, "all")]


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * size
    failed = []

    def cb(err, _msg):
        if err is not None:
            failed.append(err)

    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(300)
    took = time.perf_counter() - t0
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[0]}")
    return took


def cpu_seconds(pid: int) -> float:
    """user + sys CPU seconds of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15 of stat)


def delete_topic(cluster: Any, topic: str) -> None:
    """Delete a measured topic and wait until every broker removed its files, so each run starts from the
    same state (no page cache of earlier runs' data left to write back, no idle partitions piling up)."""
    from harness.clusterutil import admin

    client = admin(cluster.bootstrap)  # kept alive until the result is in
    client.delete_topics([topic], operation_timeout=30)[topic].result(60)
    dirs = [os.path.join(b.data_dir, f"{topic}-0") for b in cluster.brokers]
    deadline = time.monotonic() + 60
    while any(os.path.exists(d) for d in dirs) and time.monotonic() < deadline:
        time.sleep(0.1)


def warm_up(bootstrap: str, topic: str) -> None:
    """One acks=all record: the leader serves the topic (else a clear error instead of a stalled run)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    p.produce(topic, value=b"warm-up")
    if p.flush(40) != 0:
        raise RuntimeError(f"{topic}: the warm-up record was not acknowledged within 30 s")


def wait_replicated(bootstrap: str, topic: str, n: int, timeout: float = 120.0) -> None:
    """Until the leader's high watermark (ListOffsets latest) reaches ``n``."""
    from confluent_kafka import Consumer, TopicPartition

    from harness.clusterutil import QUIET

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "logger": QUIET})
    deadline = time.monotonic() + timeout
    try:
        while c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: not replicated within {timeout:.0f} s")
            time.sleep(0.02)
    finally:
        c.close()


def leader_of(bootstrap: str, topic: str) -> int:
    from harness.clusterutil import partitions

    return int(partitions(bootstrap, topic)[0].leader)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--records", type=int, default=0, help="records per run (default 1000000 of 100 B, 300000 of 1 KiB)"
    )
    ap.add_argument("--sizes", default="100,1024", help="value sizes in bytes (default 100,1024)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--warmup", type=int, default=100_000,
                    help="records (512 B, RF=3, acks=all) produced on each cluster first, not counted")
    ap.add_argument("--brokers", default="moldau,kafka",
                    help="clusters to measure, comma separated: moldau, kafka (default both)")
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))  # tests/harness
    sizes = [int(x) for x in a.sizes.split(",")]
    kinds = [k for k in a.brokers.split(",") if k.strip()]
    runs = []
    for kind in kinds:
        runs += run_cluster(kind, sizes, a)
    print()
    print(
        f"{'broker':7} {'case':12} {'size':>6} {'rec/s':>10} {'MB/s':>7} {'vs rf1-acks1':>13}"
        f" {'leader ms/MB':>13} {'others ms/MB':>13} {'all ms/MB':>10}"
    )
    summary: dict[str, Any] = {}
    for kind in kinds:
        for size in sizes:
            base = None
            for name, _rf, _acks in CASES:
                these = [x for x in runs if x["case"] == name and x["size"] == size and x["broker"] == kind]
                med = statistics.median(x["records_per_s"] for x in these)
                base = base or med
                cpu_l = statistics.median(x["leader_cpu_ms_per_mb"] for x in these)
                cpu_o = statistics.median(x["other_cpu_ms_per_mb"] for x in these)
                cpu_all = statistics.median(x["brokers_cpu_ms_per_mb"] for x in these)
                summary[f"{kind}/{name}/{size}"] = {
                    "records_per_s": med,
                    "ratio": med / base,
                    "leader_cpu_ms_per_mb": cpu_l,
                    "other_cpu_ms_per_mb": cpu_o,
                    "brokers_cpu_ms_per_mb": cpu_all,
                }
                print(
                    f"{kind:7} {name:12} {size:6} {med:10.0f} {med * size / 1e6:7.1f} {med / base:12.2f}x"
                    f" {cpu_l:13.2f} {cpu_o:13.2f} {cpu_all:10.2f}"
                )
    if "moldau" in kinds and "kafka" in kinds:
        print()
        print("moldau / kafka (records/s; all brokers' CPU ms per MB):")
        for size in sizes:
            for name, _rf, _acks in CASES:
                mo, ka = summary[f"moldau/{name}/{size}"], summary[f"kafka/{name}/{size}"]
                ratio = mo["records_per_s"] / ka["records_per_s"]
                summary[f"ratio/{name}/{size}"] = {"records_per_s": ratio,
                                                   "brokers_cpu_ms_per_mb": mo["brokers_cpu_ms_per_mb"]
                                                   / ka["brokers_cpu_ms_per_mb"]}
                print(f"  {name:12} {size:6} B  throughput {ratio:5.2f}x  CPU per MB "
                      f"{mo['brokers_cpu_ms_per_mb']:.1f} vs {ka['brokers_cpu_ms_per_mb']:.1f} ms")
    import confluent_kafka

    doc = {
        "runs": runs,
        "medians": summary,
        "client": f"confluent-kafka {confluent_kafka.version()[0]}",
        "librdkafka": confluent_kafka.libversion()[0],
        "loadavg_after": os.getloadavg(),
    }
    out = a.out or os.path.join(
        os.path.dirname(__file__), "results", f"cluster-replication-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\nJSON: {out}")
    return 0


def run_cluster(kind: str, sizes: list[int], a: Any) -> list[dict[str, Any]]:
    """Every case, size and repeat on one three-broker cluster of ``kind`` (moldau or kafka)."""
    from moldau.broker.cluster.local import LocalCluster

    from harness.clusterutil import create_topic, fully_replicated, wait_until

    folder = tempfile.mkdtemp(prefix=f"moldau-bench-cluster-{kind}-")
    cluster: Any
    if kind == "kafka":
        from harness.brokerproc import KafkaCluster

        cluster = KafkaCluster(folder, 3)
    else:
        cluster = LocalCluster(folder, 3, broker_configs=["offsets.topic.replication.factor=3"])
    runs: list[dict[str, Any]] = []
    try:
        cluster.start()
        bs = cluster.bootstrap
        for b in cluster.brokers:  # every broker knows the others and the controller
            what = f"broker {b.node_id} to see the cluster"
            wait_until(lambda addr=b.address: fully_replicated_ok(addr), 30, what)
        if a.warmup:
            # not counted: the first topics, the JVM's JIT (Kafka) and the page cache warm up alike
            warm = f"bench-warmup-{kind}"
            create_topic(bs, warm, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
            wait_until(lambda: fully_replicated(bs, warm, 3), 30, warm)
            warm_up(bs, warm)
            produce(bs, warm, a.warmup, 512, "all")
            delete_topic(cluster, warm)
        for size in sizes:
            n = a.records or (1_000_000 if size <= 100 else 300_000)
            for r in range(a.repeat):
                order = CASES if r % 2 == 0 else list(reversed(CASES))
                for name, rf, acks in order:
                    topic = f"bench-{name}-{size}-{r}"
                    create_topic(
                        bs, topic, partitions=1, rf=rf, configs={"min.insync.replicas": str(min(2, rf))}
                    )
                    wait_until(lambda t=topic, rf=rf: fully_replicated(bs, t, rf), 30, topic)
                    leader = wait_until(lambda t=topic: max(leader_of(bs, t), 0), 30, f"{topic}'s leader")
                    warm_up(bs, topic)
                    pids = {b.node_id: b.proc.pid for b in cluster.brokers if b.proc is not None}
                    load_before = os.getloadavg()[0]
                    before = {i: cpu_seconds(pid) for i, pid in pids.items()}
                    t_own = os.times()
                    t0 = time.perf_counter()
                    took = produce(bs, topic, n, size, acks)
                    t_prod = os.times()
                    # the brokers' CPU is counted until every replica has every record (the leader's high
                    # watermark is the smallest log end offset of the ISR): acks=1 returns before that
                    wait_replicated(bs, topic, n + 1)  # and the warm-up record
                    replicated = time.perf_counter() - t0
                    cpu = {i: cpu_seconds(pid) - before[i] for i, pid in pids.items()}
                    producer_cpu = (t_prod.user + t_prod.system) - (t_own.user + t_own.system)
                    delete_topic(cluster, topic)
                    mb = n * size / 1e6
                    leader_cpu = cpu[leader]
                    others = sorted(v for i, v in cpu.items() if i != leader)
                    # RF=3: both others follow the leader; RF=1: they are idle (background work only)
                    runs.append(
                        {
                            "broker": kind,
                            "case": name,
                            "size": size,
                            "records": n,
                            "seconds": took,
                            "records_per_s": n / took,
                            "mb_per_s": n * size / took / 1e6,
                            "replicated_s": replicated,
                            "producer_cpu_ms_per_mb": producer_cpu * 1000 / mb,
                            "leader": leader,
                            "loadavg_1min_before": load_before,
                            "cpu_s": {str(i): v for i, v in cpu.items()},
                            "leader_cpu_ms_per_mb": leader_cpu * 1000 / mb,
                            "other_cpu_ms_per_mb": sum(others) * 1000 / mb,
                            "brokers_cpu_ms_per_mb": sum(cpu.values()) * 1000 / mb,
                        }
                    )
                    print(
                        f"{kind:7} {name:12} {size:5} B  {n / took:10.0f} rec/s  {mb / took:7.1f} MB/s"
                        "  CPU ms/MB:"
                        f" leader {leader_cpu * 1000 / mb:5.2f}, others {sum(others) * 1000 / mb:5.2f},"
                        f" producer {producer_cpu * 1000 / mb:5.2f}",
                        flush=True,
                    )
    finally:
        cluster.stop(graceful=False)
        shutil.rmtree(folder, ignore_errors=True)
    return runs


def fully_replicated_ok(bootstrap: str) -> bool:
    from harness.clusterutil import admin

    md = admin(bootstrap).list_topics(timeout=5)
    return len(md.brokers) == 3 and md.controller_id > 0


if __name__ == "__main__":
    sys.exit(main())

"""How long the moldau console takes to render its big pages on a large cluster.

Starts a moldau broker (the integration tests' harness) on a temporary data dir, creates ``--topics`` topics
of ``--partitions`` partitions each (default 100 x 100 = 10,000 partitions), writes a few records to some of
them, commits offsets for ``--groups`` consumer groups (default 1,000; each on one topic's partitions), then
serves the console in this process and times HTTP GETs of:

* the topic list, first page, sorted by name: with the console's default settings (a request a second), with
  a cold snapshot for each request (metadata, start and end offsets of every partition, log sizes, retention
  of every topic) and warm (snapshot cached);
* the topic list sorted by size, page 50 (warm);
* a topic page (100 partitions, its configs), from the cached snapshot and cold (that topic asked alone);
* the message browser, newest 50 records over all 100 partitions of a topic holding 2,000 records;
* the consumer group list (1,000 groups, first page);
* a group page (its members, committed offsets and lag of 100 partitions, the lag plot's data).

Each figure is the median of ``--repeat`` requests (min and max shown). The console's sampler runs with its
default interval during the measurement, as in real use.

    .venv/bin/python bench/console_render.py                 # 10,000 partitions, 1,000 groups (~2-4 min)
    .venv/bin/python bench/console_render.py --topics 10 --partitions 10 --groups 50 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)


def timed_get(url: str) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=300) as resp:
        body = resp.read()
        status = resp.status
    return time.perf_counter() - t0, status, len(body)


def measure(url: str, repeat: int, pause: float = 0.0) -> dict[str, Any]:
    times = []
    size = 0
    for _ in range(repeat):
        time.sleep(pause)
        dt, status, size = timed_get(url)
        if status != 200:
            raise SystemExit(f"{url}: HTTP {status}")
        times.append(dt)
    return {
        "median_ms": statistics.median(times) * 1000,
        "min_ms": min(times) * 1000,
        "max_ms": max(times) * 1000,
        "bytes": size,
    }


def populate(bootstrap: str, topics: int, partitions: int, groups: int) -> list[str]:
    import moldau

    names = [f"bench-{i:04d}" for i in range(topics)]
    t0 = time.monotonic()
    with moldau.Admin(bootstrap_servers=bootstrap, request_timeout_ms=300_000) as admin:
        for i in range(0, topics, 10):
            admin.create_topics([moldau.NewTopic(n, partitions) for n in names[i : i + 10]], timeout=300)
        print(
            f"created {topics} topics x {partitions} partitions in {time.monotonic() - t0:.1f} s", flush=True
        )
        with moldau.Producer(bootstrap_servers=bootstrap, linger_ms=20) as p:
            for n in names[: min(topics, 10)]:
                for part in range(partitions):
                    for _ in range(20):
                        p.send(n, b"x" * 100, partition=part)
            p.flush()
        t0 = time.monotonic()
        for g in range(groups):
            topic = names[g % topics]
            admin.alter_consumer_group_offsets(
                f"bench-group-{g:04d}", {moldau.TopicPartition(topic, p): 0 for p in range(partitions)}
            )
        print(f"committed offsets of {groups} groups in {time.monotonic() - t0:.1f} s", flush=True)
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()

    from moldau.console import ConsoleServer, ConsoleSettings

    from harness.brokerproc import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="moldau-console-bench-") as tmp:
        broker = BrokerProcess(
            "moldau",
            Path(tmp) / "data",
            log_dir=Path(tmp),
            settings={"group.initial.rebalance.delay.ms": "0"},
        )
        broker.start()
        try:
            names = populate(broker.bootstrap, args.topics, args.partitions, args.groups)
            settings = ConsoleSettings(
                {"bootstrap.servers": broker.bootstrap, "request.timeout.ms": 120000},
                host="127.0.0.1",
                port=0,
            )
            server = ConsoleServer(settings)
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, daemon=True)
            thread.start()
            asyncio.run_coroutine_threadsafe(server.start(), loop).result(300)
            base = server.url
            try:
                results: dict[str, Any] = {}
                view = server.console.view
                timed_get(base + "/topics")  # the broker's first ListOffsets over every partition (warm-up)
                # the console's defaults (cache 2 s, stale snapshot served up to 30 s while a fresh one is
                # taken, the sampler refreshing it every 5 s); one request a second
                results["topic list, default settings"] = measure(base + "/topics", args.repeat, pause=1.0)
                view.cache_ttl, view.stale_ttl = 0.0, 0.0
                results["topic list, cold snapshot"] = measure(base + "/topics", args.repeat)
                view.cache_ttl = 3600.0
                timed_get(base + "/topics")
                results["topic list, warm"] = measure(base + "/topics", args.repeat)
                results["topic list by size, page 50, warm"] = measure(
                    base + "/topics?sort=size&dir=desc&page=50", args.repeat
                )
                results[f"topic page ({args.partitions} partitions)"] = measure(
                    base + f"/topics/{names[0]}", args.repeat
                )
                results[f"messages, newest 50 of {args.partitions} partitions"] = measure(
                    base + f"/topics/{names[0]}/messages", args.repeat
                )
                view.cache_ttl = 0.0
                results["topic page, cold (that topic alone)"] = measure(
                    base + f"/topics/{names[0]}", args.repeat
                )
                view.cache_ttl = 3600.0
                results[f"group list ({args.groups} groups)"] = measure(base + "/groups", args.repeat)
                results[f"group page ({args.partitions} partitions)"] = measure(
                    base + "/groups/bench-group-0000", args.repeat
                )
            finally:
                asyncio.run_coroutine_threadsafe(server.stop(), loop).result(60)
                loop.call_soon_threadsafe(loop.stop)
        finally:
            broker.close()
    print(
        f"\n{args.topics * args.partitions:,} partitions in {args.topics} topics, {args.groups:,} groups; "
        f"median of {args.repeat} requests\n"
    )
    print(f"{'page':44} {'median':>9} {'min':>9} {'max':>9} {'HTML':>9}")
    for k, v in results.items():
        times = f"{v['median_ms']:8.0f}ms {v['min_ms']:8.0f}ms {v['max_ms']:8.0f}ms"
        print(f"{k:44} {times} {v['bytes'] / 1024:8.0f}K")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Client throughput: moldau's client against confluent-kafka, kafka-python and aiokafka, one broker, one run.

Every client produces N records of 100 bytes (no key, no compression, each client's default batching,
acks=all where the client allows it) to a fresh 1-partition topic, and consumes N records from a topic
filled beforehand (assign() from offset 0). Each measurement is repeated (default 3) and the median
records/s is reported, with the ratio to confluent-kafka.

    python bench/client_throughput.py                       # starts a broker (MOLDAU_TEST_BROKER kind)
    python bench/client_throughput.py --broker tansu -n 200000
    python bench/client_throughput.py --bootstrap 127.0.0.1:9092

Prints a table and, last, one JSON document. Never asserted by tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "src"))

VALUE = b"v" * 100


# ----------------------------------------------------------------------------------------------------
# topics


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "bench-" + uuid.uuid4().hex[:10]
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        md = a.list_topics(name, timeout=5).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return name
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} not ready")


def fill_topic(bootstrap: str, n: int) -> str:
    from confluent_kafka import Producer

    topic = create_topic(bootstrap)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    return topic


# ----------------------------------------------------------------------------------------------------
# producers: each returns elapsed seconds for n records, all acknowledged


def produce_moldau_sync(bootstrap: str, topic: str, n: int) -> float:
    from moldau.client import Producer

    with Producer(bootstrap_servers=bootstrap) as p:
        p.send(topic, VALUE).result(30)  # connections, metadata, producer id
        t0 = time.perf_counter()
        send = p.send
        for _ in range(n):
            send(topic, VALUE)
        p.flush()
        return time.perf_counter() - t0


def produce_moldau_async(bootstrap: str, topic: str, n: int) -> float:
    from moldau.client import AsyncProducer

    async def main() -> float:
        async with AsyncProducer(bootstrap_servers=bootstrap) as p:
            await p.send_and_wait(topic, VALUE)
            t0 = time.perf_counter()
            send = p.send
            for _ in range(n):
                await send(topic, VALUE)
            await p.flush()
            return time.perf_counter() - t0

    return _run_async(main())


def produce_confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, VALUE)
    p.flush(30)
    t0 = time.perf_counter()
    produce = p.produce
    for _ in range(n):
        while True:
            try:
                produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.001)
    remaining = p.flush(120)
    dt = time.perf_counter() - t0
    assert remaining == 0
    return dt


def produce_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    p.send(topic, VALUE).get(30)
    t0 = time.perf_counter()
    send = p.send
    for _ in range(n):
        send(topic, VALUE)
    p.flush()
    dt = time.perf_counter() - t0
    p.close()
    return dt


def produce_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaProducer

    async def main() -> float:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await p.start()
        try:
            await p.send_and_wait(topic, VALUE)
            t0 = time.perf_counter()
            send = p.send
            for _ in range(n):
                await send(topic, VALUE)
            await p.flush()
            return time.perf_counter() - t0
        finally:
            await p.stop()

    return _run_async(main())


# ----------------------------------------------------------------------------------------------------
# consumers: each returns elapsed seconds to read n records from offset 0 of partition 0


def consume_moldau_sync(bootstrap: str, topic: str, n: int) -> float:
    from moldau.client import Consumer, TopicPartition

    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        t0 = time.perf_counter()
        got = 0
        while got < n:
            got += len(c.poll(5.0))
        return time.perf_counter() - t0


def consume_moldau_async(bootstrap: str, topic: str, n: int) -> float:
    from moldau.client import AsyncConsumer, TopicPartition

    async def main() -> float:
        async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, 0)])
            t0 = time.perf_counter()
            got = 0
            while got < n:
                got += len(await c.poll(5.0))
            return time.perf_counter() - t0

    return _run_async(main())


def consume_confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex[:8],
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    t0 = time.perf_counter()
    got = 0
    while got < n:
        msgs = c.consume(num_messages=10000, timeout=5.0)
        got += sum(1 for m in msgs if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    return dt


def consume_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    t0 = time.perf_counter()
    got = 0
    while got < n:
        for recs in c.poll(timeout_ms=5000, max_records=10000).values():
            got += len(recs)
    dt = time.perf_counter() - t0
    c.close()
    return dt


def consume_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> float:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            t0 = time.perf_counter()
            got = 0
            while got < n:
                for recs in (await c.getmany(timeout_ms=5000, max_records=10000)).values():
                    got += len(recs)
            return time.perf_counter() - t0
        finally:
            await c.stop()

    return _run_async(main())


def _run_async(coro: Any) -> float:
    try:
        import uvloop

        return uvloop.run(coro)  # the same loop the moldau sync facade uses
    except ImportError:  # pragma: no cover
        return asyncio.run(coro)


CLIENTS: dict[str, tuple[Callable[[str, str, int], float], Callable[[str, str, int], float]]] = {
    "moldau (sync)": (produce_moldau_sync, consume_moldau_sync),
    "moldau (async)": (produce_moldau_async, consume_moldau_async),
    "confluent-kafka": (produce_confluent, consume_confluent),
    "kafka-python": (produce_kafka_python, consume_kafka_python),
    "aiokafka": (produce_aiokafka, consume_aiokafka),
}


# ----------------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--broker", choices=["moldau", "tansu"], default=os.environ.get("MOLDAU_TEST_BROKER", "moldau"))
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of: " + ", ".join(CLIENTS))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    names = [c.strip() for c in args.clients.split(",") if c.strip()]
    for name in names:
        if name not in CLIENTS:
            ap.error(f"unknown client {name!r}")

    proc = None
    tmp = None
    if args.bootstrap:
        bootstrap, kind = args.bootstrap, "external"
    else:
        from brokerproc import BrokerProcess

        tmp = tempfile.TemporaryDirectory(prefix="moldau-bench-")
        settings = {"group.initial.rebalance.delay.ms": "0"} if args.broker == "moldau" else {}
        proc = BrokerProcess(args.broker, Path(tmp.name) / "data", settings=settings, log_dir=Path(tmp.name))
        proc.start()
        bootstrap, kind = proc.bootstrap, args.broker
    try:
        n = args.records
        print(f"broker: {kind} at {bootstrap}; {n} records of {len(VALUE)} bytes; median of {args.repeat}",
              file=sys.stderr)
        source = fill_topic(bootstrap, n)
        results: dict[str, dict[str, Any]] = {}
        for name in names:
            produce, consume = CLIENTS[name]
            runs: dict[str, list[float]] = {"produce": [], "consume": []}
            for _ in range(args.repeat):
                topic = create_topic(bootstrap)
                runs["produce"].append(n / produce(bootstrap, topic, n))
                runs["consume"].append(n / consume(bootstrap, source, n))
            results[name] = {op: {"median": statistics.median(v), "runs": [round(x) for x in v]}
                             for op, v in runs.items()}
            print(f"  {name}: produce {results[name]['produce']['median']:,.0f}/s, "
                  f"consume {results[name]['consume']['median']:,.0f}/s", file=sys.stderr)
        base = results.get("confluent-kafka")
        for name, r in results.items():
            for op in ("produce", "consume"):
                r[op]["vs_confluent"] = round(r[op]["median"] / base[op]["median"], 3) if base else None
        print()
        print(f"{'client':<18} {'produce rec/s':>14} {'vs confluent':>13} {'consume rec/s':>14} {'vs confluent':>13}")
        for name, r in results.items():
            p, c = r["produce"], r["consume"]
            print(f"{name:<18} {p['median']:>14,.0f} {p['vs_confluent'] or 0:>13.2f} {c['median']:>14,.0f} "
                  f"{c['vs_confluent'] or 0:>13.2f}")
        print()
        doc = {
            "benchmark": "client_throughput",
            "broker": kind,
            "records": n,
            "record_bytes": len(VALUE),
            "repeat": args.repeat,
            "partitions": 1,
            "results": {k: {op: {"median_records_per_s": round(v[op]["median"]), "runs": v[op]["runs"],
                                 "vs_confluent": v[op]["vs_confluent"]} for op in ("produce", "consume")}
                        for k, v in results.items()},
        }
        print(json.dumps(doc, indent=2))
    finally:
        if proc is not None:
            proc.close()
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()

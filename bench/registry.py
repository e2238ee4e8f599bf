"""Schema registry: registrations and lookups per second against moldau's registry, with a real HTTP client
(aiohttp, keep-alive connections, ``--concurrency`` requests in flight).

No peer registry runs here: Confluent's is a JVM service outside Maven Central and Karapace is not on PyPI;
instead, in the same run, the same load goes to the standalone ``moldau registry`` process and to the
registry inside the broker process (``schema.registry.listener``), and registrations are measured with the
compatibility level NONE (no check) and FULL_TRANSITIVE (every version checked both ways).

* register: N Avro record schemas, each a new version of one subject (every one adds a field with a
  default, so each is FULL compatible with all before it): a produce with acks=all and its read-back each;
* distinct: N schemas under N subjects;
* lookups: M ``GET /schemas/ids/{id}`` of random ids, then M ``POST /subjects/{s}`` (schema to version);
* serde: ``--records`` Avro records serialized and deserialized in Confluent's framing by
  ``moldau.registry.serde`` and by confluent-kafka's AvroSerializer/AvroDeserializer (its peer here), against
  the same registry, in this process;

    python bench/registry.py                   # N=300, M=5000, concurrency 8 (~1 min)
    python bench/registry.py -n 1000 -m 20000 --out results.json

Prints a table and JSON (also to bench/results/registry-<time>.json or ``--out``). Nothing here is asserted
by tests.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)
sys.path.insert(0, str(ROOT / "src"))

CT = "application/vnd.schemaregistry.v1+json"


def schema(name: str, fields: int) -> str:
    fs = [{"name": "id", "type": "long"}] + [
        {"name": f"f{i}", "type": "string", "default": ""} for i in range(fields)
    ]
    return json.dumps({"type": "record", "name": name, "namespace": "bench", "fields": fs})


async def _run(url: str, requests: list[tuple[str, str, Any]], concurrency: int) -> float:
    import aiohttp

    queue = list(reversed(requests))
    async with aiohttp.ClientSession(headers={"Content-Type": CT}) as s:

        async def worker() -> None:
            while queue:
                method, path, body = queue.pop()
                async with s.request(method, url + path, json=body) as r:
                    await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"{method} {path}: {r.status} {await r.text()}")

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0


def measure(url: str, n: int, m: int, concurrency: int, tag: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for level in ("NONE", "FULL_TRANSITIVE"):
        subject = f"{tag}-{level.lower()}-{uuid.uuid4().hex[:6]}"
        asyncio.run(_run(url, [("PUT", f"/config/{subject}", {"compatibility": level})], 1))
        # versions of one subject are registered one at a time (each is checked against those before it)
        reqs = [
            ("POST", f"/subjects/{subject}/versions", {"schema": schema(f"V{subject[-6:]}", i)})
            for i in range(n)
        ]
        out[f"register_{level.lower()}_per_s"] = n / asyncio.run(_run(url, reqs, 1))
    reqs = [
        (
            "POST",
            f"/subjects/{tag}-d{i}-{uuid.uuid4().hex[:4]}/versions",
            {"schema": schema(f"D{i}x{tag}", 1)},
        )
        for i in range(n)
    ]
    out["register_distinct_per_s"] = n / asyncio.run(_run(url, reqs, concurrency))
    ids = [r for r in range(1, n + 1)]
    reqs = [("GET", f"/schemas/ids/{random.choice(ids)}", None) for _ in range(m)]
    out["get_by_id_per_s"] = m / asyncio.run(_run(url, reqs, concurrency))
    subj = f"{tag}-lookup-{uuid.uuid4().hex[:6]}"
    asyncio.run(_run(url, [("POST", f"/subjects/{subj}/versions", {"schema": schema("L" + tag, 3)})], 1))
    reqs = [("POST", f"/subjects/{subj}", {"schema": schema("L" + tag, 3)}) for _ in range(m)]
    out["lookup_per_s"] = m / asyncio.run(_run(url, reqs, concurrency))
    return out


def serde_round_trip(url: str, records: int) -> dict[str, float]:
    """Serialize then deserialize ``records`` Avro records (Confluent framing) with moldau.registry.serde and
    with confluent-kafka's AvroSerializer/AvroDeserializer, against the same registry, one thread each."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CKDeserializer
    from confluent_kafka.schema_registry.avro import AvroSerializer as CKSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from moldau.registry.serde import AvroDeserializer, AvroSerializer, RegistryClient

    sch = json.dumps(
        {
            "type": "record",
            "name": "Click",
            "namespace": "bench",
            "fields": [
                {"name": "user", "type": "string"},
                {"name": "n", "type": "long"},
                {"name": "page", "type": "string"},
                {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            ],
        }
    )
    values = [
        {
            "user": f"user-{i % 100}",
            "n": i,
            "page": "/p/" + str(i % 7),
            "ts": datetime.datetime.fromtimestamp(1.7e9 + i, datetime.UTC),
        }
        for i in range(records)
    ]
    topic = f"serde-{uuid.uuid4().hex[:6]}"
    out: dict[str, float] = {}
    client = RegistryClient(url)
    ser, de = AvroSerializer(client, sch, topic=topic), AvroDeserializer(client)
    de(ser(values[0]))  # registration and the first fetch outside the timing
    t0 = time.perf_counter()
    for v in values:
        de(ser(v))
    out["moldau_serde_round_trips_per_s"] = records / (time.perf_counter() - t0)
    ck = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    cser, cde = CKSerializer(ck, sch), CKDeserializer(ck)
    cde(cser(values[0], ctx), ctx)
    t0 = time.perf_counter()
    for v in values:
        cde(cser(v, ctx), ctx)
    out["confluent_kafka_round_trips_per_s"] = records / (time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=300, help="registrations per measurement (default 300)")
    ap.add_argument("-m", type=int, default=5000, help="lookups per measurement (default 5000)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--records", type=int, default=50000, help="serializer round trips (default 50000)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from harness.brokerproc import BrokerProcess, free_port
    from harness.registryutil import RegistryProcess, call

    base = Path(tempfile.mkdtemp(prefix="moldau-bench-registry-"))
    port = free_port()
    broker = BrokerProcess(
        "moldau",
        base / "data",
        log_dir=base,
        settings={"schema.registry.listener": f"127.0.0.1:{port}", "group.initial.rebalance.delay.ms": "0"},
    )
    results: dict[str, Any] = {"n": args.n, "m": args.m, "concurrency": args.concurrency}
    try:
        broker.start()
        embedded = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                call(embedded, "GET", "/subjects")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        standalone = RegistryProcess(broker.bootstrap, "_schemas_bench").wait_ready()
        try:
            results["standalone"] = measure(standalone.url, args.n, args.m, args.concurrency, "sa")
        finally:
            standalone.stop()
        results["in_broker"] = measure(embedded, args.n, args.m, args.concurrency, "ib")
        results["serde"] = serde_round_trip(embedded, args.records)
    finally:
        broker.close()
    keys = list(results["standalone"])
    print(f"{'per second':28} {'moldau registry':>16} {'in the broker':>14}")
    for k in keys:
        print(f"{k:28} {results['standalone'][k]:16,.0f} {results['in_broker'][k]:14,.0f}")
    for k, v in results["serde"].items():
        print(f"{k:34} {v:10,.0f}")
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"registry-{int(time.time())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

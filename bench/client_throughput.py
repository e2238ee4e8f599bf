"""Client throughput: moldau's client against confluent-kafka, kafka-python, aiokafka and Kafka's Java client,
one broker, one run.

The matrix of issue 4: produce and consume N records (default 1,000,000) of 100 bytes and of 1 KiB, with
acks=1 and acks=all, by every client against the same broker (a moldau broker started here, or
``--bootstrap``), the median of ``--repeat`` runs (default 3), printed as records/s, MB/s and the client's
CPU µs per record, followed by moldau's ratio to each peer next to the issue's target:

    producer >= 5x kafka-python, >= 2x aiokafka, >= 0.8x confluent-kafka (issue 27; issue 4 asked 0.5x)
    consumer >= 1x aiokafka, >= 0.5x confluent-kafka

The producer's bulk forms are measured when named in ``--clients`` (produce only): ``moldau-many``
(``Producer.send_many`` of a list of the N values), ``moldau-arrow`` (``Producer.send_arrow`` of an N-row
pyarrow table with one binary column ``value``) and ``confluent-arrow`` (confluent-kafka's produce loop over
the same table's rows: ``to_pylist()`` of the column and ``produce()`` per row, on the clock); target:
moldau-arrow >= 1x confluent-arrow (issue 27). The list or table is made before the clock starts.

    python bench/client_throughput.py                        # the full matrix (~15-25 min on 2 cores)
    python bench/client_throughput.py --quick                # 100k records, 1 run each (~1-2 min)
    python bench/client_throughput.py -n 200000 --sizes 100 --acks 1 --clients moldau-sync,confluent-kafka
    python bench/client_throughput.py --bootstrap 127.0.0.1:9092 --out results.json
    python bench/client_throughput.py --ops produce --clients \
        moldau-sync,moldau-async,confluent-kafka,moldau-many,moldau-arrow,confluent-arrow

Kafka's Java client (``kafka-java``: kafka-clients of tests/jvm's Kafka version, the program
``tests/jvm/clients/.../Perf.java`` run by the JVM harness, 1 GiB heap) is measured the same way; its CPU
is the JVM's process CPU time over the measured part (JIT compilation included). moldau's ratio to it is
printed without a target.

Fairness: every client runs in a fresh subprocess (no shared interpreter state, GC heap or event-loop
policy); each uses its own default batching and buffering, with acks set as asked and idempotence at
its default (moldau, as the Java client: on for acks=all, off for acks=1; the peers: off). Produce: a
fresh 1-partition topic, values of N bytes, no key, no compression; the time runs from the first send
(after a warm-up record has been acknowledged: connection, metadata, producer id) until flush() returns
with every record acknowledged. Consume: a 1-partition topic filled beforehand (by confluent-kafka)
is read from offset 0 with assign(); the time runs from the first poll until N records were received; the
loop reads every record's value (``len(value)``) and asks for at most ``--max-poll`` (default 500, Kafka's
max.poll.records) records per call, the same for every client. The order of the clients rotates between
repeats. Produced topics are deleted after each run.

JSON with every run, the medians and the ratios goes to bench/results/client_throughput-<time>.json (or
``--out``). Nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)
sys.path.insert(0, str(ROOT / "src"))

CLK_TCK = os.sysconf("SC_CLK_TCK")
CLIENTS = ["moldau-sync", "moldau-async", "confluent-kafka", "kafka-python", "aiokafka", "kafka-java",
           "moldau-many", "moldau-arrow", "confluent-arrow"]
#: what runs when --clients is not given (the bulk forms are asked for by name)
DEFAULT_CLIENTS = CLIENTS[:6]
#: produce only: send_many / send_arrow, and confluent-kafka's produce loop over the same Arrow table
PRODUCE_ONLY = ["moldau-many", "moldau-arrow", "confluent-arrow"]
#: peers without a target: moldau's ratio to them is printed as it is
UNTARGETED = ["kafka-java"]
MOLDAU = ["moldau-sync", "moldau-async", "moldau-many", "moldau-arrow"]
# (operation, peer, target ratio moldau / peer, the moldau clients it applies to (None: all))
TARGETS: list[tuple[str, str, float, list[str] | None]] = [
    ("produce", "kafka-python", 5.0, None),
    ("produce", "aiokafka", 2.0, None),
    ("produce", "confluent-kafka", 0.8, None),  # issue 27 (issue 4 asked for 0.5)
    ("produce", "confluent-arrow", 1.0, ["moldau-arrow"]),
    ("consume", "aiokafka", 1.0, None),
    ("consume", "confluent-kafka", 0.5, None),
]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _run_async(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)  # the loop the moldau sync facade uses too
    except ImportError:  # pragma: no cover
        import asyncio

        return asyncio.run(coro)


# ----------------------------------------------------------------------------------------------------
# producers: each returns (elapsed seconds, client CPU seconds) for n records, all acknowledged


def produce_moldau_sync(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    from moldau.client import Producer

    with Producer(bootstrap_servers=bootstrap, acks=acks) as p:
        p.send(topic, value).result(30)  # connections, metadata, producer id
        t0, c0 = time.perf_counter(), _cpu()
        send = p.send
        for _ in range(n):
            send(topic, value)
        p.flush()
        return time.perf_counter() - t0, _cpu() - c0


def produce_moldau_async(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    from moldau.client import AsyncProducer

    async def main() -> tuple[float, float]:
        async with AsyncProducer(bootstrap_servers=bootstrap, acks=acks) as p:
            await p.send_and_wait(topic, value)
            t0, c0 = time.perf_counter(), _cpu()
            send = p.send
            for _ in range(n):
                await send(topic, value)
            await p.flush()
            return time.perf_counter() - t0, _cpu() - c0

    return _run_async(main())


def produce_confluent(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    p.produce(topic, value)
    p.flush(30)
    t0, c0 = time.perf_counter(), _cpu()
    produce = p.produce
    for _ in range(n):
        try:
            produce(topic, value)
        except BufferError:  # local queue full (queue.buffering.max.*): serve delivery reports, retry
            while True:
                p.poll(0.001)
                try:
                    produce(topic, value)
                    break
                except BufferError:
                    pass
    remaining = p.flush(300)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    assert remaining == 0, f"{remaining} records not delivered"
    return dt, cpu


def produce_moldau_many(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    """Producer.send_many over a list of the n values (made before the clock starts)."""
    from moldau.client import Producer

    records = [value] * n
    with Producer(bootstrap_servers=bootstrap, acks=acks) as p:
        p.send(topic, value).result(30)
        t0, c0 = time.perf_counter(), _cpu()
        res = p.send_many(topic, records)
        p.flush()
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        assert res.result(0) == n
        return dt, cpu


def _arrow_table(n: int, value: bytes) -> Any:
    """A table with one binary column ``value`` of n rows (distinct objects: as read from a file)."""
    import pyarrow as pa

    return pa.table({"value": pa.array([value] * n, pa.binary())})


def produce_moldau_arrow(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    """Producer.send_arrow of an n-row table (made before the clock starts)."""
    from moldau.client import Producer

    table = _arrow_table(n, value)
    with Producer(bootstrap_servers=bootstrap, acks=acks) as p:
        p.send(topic, value).result(30)
        t0, c0 = time.perf_counter(), _cpu()
        res = p.send_arrow(topic, table)
        p.flush()
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        assert res.result(0) == n
        return dt, cpu


def produce_confluent_arrow(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    """confluent-kafka's produce loop over the rows of the same table: the column to Python (to_pylist,
    the cheapest way there) and produce() per row, all on the clock."""
    from confluent_kafka import Producer

    table = _arrow_table(n, value)
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    p.produce(topic, value)
    p.flush(30)
    t0, c0 = time.perf_counter(), _cpu()
    produce = p.produce
    for v in table.column("value").to_pylist():
        try:
            produce(topic, v)
        except BufferError:
            while True:
                p.poll(0.001)
                try:
                    produce(topic, v)
                    break
                except BufferError:
                    pass
    remaining = p.flush(300)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    assert remaining == 0, f"{remaining} records not delivered"
    return dt, cpu


def produce_kafka_python(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=-1 if acks == "all" else int(acks))
    p.send(topic, value).get(30)
    t0, c0 = time.perf_counter(), _cpu()
    send = p.send
    for _ in range(n):
        send(topic, value)
    p.flush()
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    p.close()
    return dt, cpu


def produce_aiokafka(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> tuple[float, float]:
    from aiokafka import AIOKafkaProducer

    async def main() -> tuple[float, float]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=-1 if acks == "all" else int(acks))
        await p.start()
        try:
            await p.send_and_wait(topic, value)
            t0, c0 = time.perf_counter(), _cpu()
            send = p.send
            for _ in range(n):
                await send(topic, value)
            await p.flush()
            return time.perf_counter() - t0, _cpu() - c0
        finally:
            await p.stop()

    return _run_async(main())


# ----------------------------------------------------------------------------------------------------
# consumers: each returns (elapsed seconds, client CPU seconds) to read n records from offset 0 of
# partition 0, looking at every record's value


def consume_moldau_sync(bootstrap: str, topic: str, n: int, max_poll: int) -> tuple[float, float]:
    from moldau.client import Consumer, TopicPartition

    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                  max_poll_records=max_poll) as c:
        c.assign([TopicPartition(topic, 0)])
        t0, c0 = time.perf_counter(), _cpu()
        got = nbytes = 0
        while got < n:
            for r in c.poll(5.0):
                nbytes += len(r.value)
                got += 1
        return time.perf_counter() - t0, _cpu() - c0


def consume_moldau_async(bootstrap: str, topic: str, n: int, max_poll: int) -> tuple[float, float]:
    from moldau.client import AsyncConsumer, TopicPartition

    async def main() -> tuple[float, float]:
        async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, max_poll_records=max_poll) as c:
            c.assign([TopicPartition(topic, 0)])
            t0, c0 = time.perf_counter(), _cpu()
            got = nbytes = 0
            while got < n:
                for r in await c.poll(5.0):
                    nbytes += len(r.value)
                    got += 1
            return time.perf_counter() - t0, _cpu() - c0

    return _run_async(main())


def consume_confluent(bootstrap: str, topic: str, n: int, max_poll: int) -> tuple[float, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex[:8],
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    t0, c0 = time.perf_counter(), _cpu()
    got = nbytes = 0
    while got < n:
        for m in c.consume(num_messages=max_poll, timeout=5.0):
            if m.error() is None:
                nbytes += len(m.value())
                got += 1
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    c.close()
    return dt, cpu


def consume_kafka_python(bootstrap: str, topic: str, n: int, max_poll: int) -> tuple[float, float]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    t0, c0 = time.perf_counter(), _cpu()
    got = nbytes = 0
    while got < n:
        for recs in c.poll(timeout_ms=5000, max_records=max_poll).values():
            for r in recs:
                nbytes += len(r.value)
                got += 1
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    c.close()
    return dt, cpu


def consume_aiokafka(bootstrap: str, topic: str, n: int, max_poll: int) -> tuple[float, float]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> tuple[float, float]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            t0, c0 = time.perf_counter(), _cpu()
            got = nbytes = 0
            while got < n:
                for recs in (await c.getmany(timeout_ms=5000, max_records=max_poll)).values():
                    for r in recs:
                        nbytes += len(r.value)
                        got += 1
            return time.perf_counter() - t0, _cpu() - c0
        finally:
            await c.stop()

    return _run_async(main())


PRODUCERS: dict[str, Callable[..., tuple[float, float]]] = {
    "moldau-sync": produce_moldau_sync,
    "moldau-async": produce_moldau_async,
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
    "moldau-many": produce_moldau_many,
    "moldau-arrow": produce_moldau_arrow,
    "confluent-arrow": produce_confluent_arrow,
}
CONSUMERS: dict[str, Callable[..., tuple[float, float]]] = {
    "moldau-sync": consume_moldau_sync,
    "moldau-async": consume_moldau_async,
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


# ----------------------------------------------------------------------------------------------------
# topics (confluent-kafka's admin client: independent of the client under test)


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


def delete_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([name])[name].result(30)
    except Exception as exc:  # noqa: BLE001 - only disk space is at stake
        logging.warning("could not delete %s: %s", name, exc)


def fill_topic(bootstrap: str, n: int, size: int) -> str:
    from confluent_kafka import Producer

    topic = create_topic(bootstrap)
    value = b"v" * size
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0
    return topic


# ----------------------------------------------------------------------------------------------------
# one measurement in a fresh interpreter


def worker(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.WARNING)
    if args.op == "produce":
        dt, cpu = PRODUCERS[args.client](args.bootstrap, args.topic, args.records, b"v" * args.size,
                                         args.acks_value)
    else:
        dt, cpu = CONSUMERS[args.client](args.bootstrap, args.topic, args.records, args.max_poll)
    print(json.dumps({"seconds": dt, "cpu_seconds": cpu}))


def java_client_command(bootstrap: str, op: str, topic: str, n: int, size: int, acks: str,
                        max_poll: int) -> list[str]:
    """Kafka's Java client (tests/jvm module ``clients``, program ``Perf``) doing one measurement."""
    from harness import jvm

    return list(jvm.java_command("clients", "moldau.jvm.Perf", [
        "--bootstrap", bootstrap, "--op", op, "--topic", topic, "--records", str(n), "--size", str(size),
        "--acks", acks, "--max-poll", str(max_poll)], heap="1g"))


def measure(bootstrap: str, op: str, client: str, topic: str, n: int, size: int, acks: str, max_poll: int,
            timeout: float) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--worker", "--op", op, "--client", client, "--bootstrap", bootstrap,
           "--topic", topic, "-n", str(n), "--size", str(size), "--acks-value", acks,
           "--max-poll", str(max_poll)]
    if client == "kafka-java":
        cmd = java_client_command(bootstrap, op, topic, n, size, acks, max_poll)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{op} {client} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["records_per_s"] = n / res["seconds"]
    res["mb_per_s"] = n * size / res["seconds"] / 1e6
    res["cpu_us_per_record"] = res["cpu_seconds"] / n * 1e6
    return res


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process (the broker), from /proc."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": sys.version.split()[0]}
    try:
        import confluent_kafka

        out["confluent-kafka"] = confluent_kafka.__version__
        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:  # pragma: no cover
        pass
    try:
        import kafka
        import kafka.record.util as kru

        out["kafka-python"] = kafka.__version__
        out["kafka-python crc32c"] = kru.crc32c_c is not None
    except ImportError:  # pragma: no cover
        pass
    try:
        import aiokafka

        out["aiokafka"] = aiokafka.__version__
    except ImportError:  # pragma: no cover
        pass
    try:
        from harness import jvm

        out["kafka-java"] = f"kafka-clients {jvm.KAFKA_VERSION} (Java)"
    except Exception:  # noqa: BLE001 - pragma: no cover
        pass
    try:
        import uvloop

        out["uvloop"] = uvloop.__version__
    except ImportError:  # pragma: no cover
        pass
    return out


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--records", type=int, default=1_000_000)
    ap.add_argument("--sizes", default="100,1024", help="record value sizes in bytes (comma-separated)")
    ap.add_argument("--acks", default="1,all", help="producer acks settings (comma-separated: 0, 1, all)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    ap.add_argument("--clients", default=",".join(DEFAULT_CLIENTS),
                    help="comma-separated subset of: " + ", ".join(CLIENTS) + " (default: the first six)")
    ap.add_argument("--ops", default="produce,consume", help="produce, consume or both")
    ap.add_argument("--max-poll", type=int, default=500, help="records per poll()/consume()/getmany() call")
    ap.add_argument("--quick", action="store_true",
                    help="100,000 records, 1 run (a smoke run in ~1-2 minutes)")
    ap.add_argument("--bootstrap", help="use a running broker instead of starting a moldau broker")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="broker setting (own broker)")
    ap.add_argument("--out", help="JSON output path (default bench/results/client_throughput-<time>.json)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds allowed for one measurement")
    # internal: one measurement in a subprocess
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--op", help=argparse.SUPPRESS)
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--acks-value", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    logging.basicConfig(level=logging.WARNING)
    if args.quick:
        args.records, args.repeat = 100_000, 1
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for c in clients:
        if c not in CLIENTS:
            ap.error(f"unknown client {c!r}")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    acks_list = [a.strip() for a in args.acks.split(",") if a.strip()]
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    n = args.records

    proc = tmp = None
    if args.bootstrap:
        bootstrap, kind, broker_pid = args.bootstrap, "external", None
    else:
        from harness.brokerproc import BrokerProcess

        tmp = tempfile.TemporaryDirectory(prefix="moldau-client-bench-")
        settings = {"group.initial.rebalance.delay.ms": "0"}
        for kv in args.set:
            k, _, v = kv.partition("=")
            settings[k] = v
        proc = BrokerProcess("moldau", Path(tmp.name) / "data", settings=settings, log_dir=Path(tmp.name))
        proc.start()
        bootstrap, kind, broker_pid = proc.bootstrap, "moldau", proc.pid
    versions = _versions()
    print(f"broker: {kind} at {bootstrap}; {n:,} records; sizes {sizes}; acks {acks_list}; median of "
          f"{args.repeat}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), file=sys.stderr)
    # results[op][size][acks or "-"][client] = {"runs": [...], medians...}
    results: dict[str, Any] = {}
    started = time.time()
    try:
        cases: list[tuple[str, int, str]] = []
        for size in sizes:
            if "produce" in ops:
                cases += [("produce", size, a) for a in acks_list]
            if "consume" in ops:
                cases.append(("consume", size, "-"))
        for op, size, acks in cases:
            source = fill_topic(bootstrap, n, size) if op == "consume" else None
            case_clients = [c for c in clients if op == "produce" or c not in PRODUCE_ONLY]
            runs: dict[str, list[dict[str, float]]] = {c: [] for c in case_clients}
            for rep in range(args.repeat):
                order = case_clients[rep % len(case_clients):] + case_clients[:rep % len(case_clients)]
                for client in order:
                    topic = source or create_topic(bootstrap)
                    b0 = cpu_seconds(broker_pid)
                    res = measure(bootstrap, op, client, topic, n, size, acks, args.max_poll, args.timeout)
                    res["broker_cpu_seconds"] = cpu_seconds(broker_pid) - b0
                    runs[client].append(res)
                    if source is None:
                        delete_topic(bootstrap, topic)
                    print(f"  {op:<7} {size:>5} B acks={acks:<3} {client:<16} "
                          f"{res['records_per_s']:>12,.0f} rec/s {res['mb_per_s']:>8.1f} MB/s  "
                          f"cpu {res['cpu_us_per_record']:5.2f} us/rec", file=sys.stderr)
            if source is not None:
                delete_topic(bootstrap, source)
            case = results.setdefault(op, {}).setdefault(str(size), {}).setdefault(acks, {})
            for client, rs in runs.items():
                case[client] = {
                    "records_per_s": _median(rs, "records_per_s"),
                    "mb_per_s": _median(rs, "mb_per_s"),
                    "cpu_us_per_record": _median(rs, "cpu_us_per_record"),
                    "broker_cpu_seconds": _median(rs, "broker_cpu_seconds"),
                    "runs": rs,
                }
    finally:
        if proc is not None:
            proc.close()
        if tmp is not None:
            tmp.cleanup()

    # ---- table
    checks = []
    lines = []
    hdr = (f"{'op':<8}{'size':>6} {'acks':<5}{'client':<17}{'records/s':>12}{'MB/s':>9}{'cpu us/rec':>11}"
           "   ratios (moldau / peer, target)")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for op, by_size in results.items():
        for size, by_acks in by_size.items():
            for acks, by_client in by_acks.items():
                for client, r in by_client.items():
                    ratio_txt = ""
                    if client in MOLDAU:
                        parts = []
                        for t_op, peer, target, only in TARGETS:
                            if t_op != op or peer not in by_client or (only is not None and client not in only):
                                continue
                            ratio = r["records_per_s"] / by_client[peer]["records_per_s"]
                            ok = ratio >= target
                            checks.append({"op": op, "size": int(size), "acks": acks, "client": client,
                                           "peer": peer, "ratio": round(ratio, 3), "target": target,
                                           "met": ok})
                            verdict = f"{'>=' if ok else '<'}{target:g} {'ok' if ok else 'MISSED'}"
                            parts.append(f"{ratio:.2f}x {peer} ({verdict})")
                        for peer in UNTARGETED:
                            if peer in by_client:
                                ratio = r["records_per_s"] / by_client[peer]["records_per_s"]
                                checks.append({"op": op, "size": int(size), "acks": acks, "client": client,
                                               "peer": peer, "ratio": round(ratio, 3), "target": None,
                                               "met": None})
                                parts.append(f"{ratio:.2f}x {peer}")
                        ratio_txt = "; ".join(parts)
                    lines.append(f"{op:<8}{size:>6} {acks:<5}{client:<17}{r['records_per_s']:>12,.0f}"
                                 f"{r['mb_per_s']:>9.1f}{r['cpu_us_per_record']:>11.2f}   {ratio_txt}")
            lines.append("")
    print()
    print("\n".join(lines))
    met = sum(1 for c in checks if c["met"])
    print(f"targets met: {met} of {sum(1 for c in checks if c['target'] is not None)}")
    doc = {
        "benchmark": "client_throughput",
        "broker": kind,
        "records": n,
        "sizes": sizes,
        "acks": acks_list,
        "repeat": args.repeat,
        "max_poll": args.max_poll,
        "partitions": 1,
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "wall_seconds": round(time.time() - started, 1),
        "versions": versions,
        "results": results,
        "targets": checks,
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"client_throughput-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print(f"JSON: {out}")


if __name__ == "__main__":
    main()

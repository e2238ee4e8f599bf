"""``moldau perf produce|consume``: load generators and meters (kafka-producer-perf-test,
kafka-consumer-perf-test).

perf produce: records of ``--record-size`` bytes (random letters, like Kafka's tool), optionally capped at
``--throughput`` records/s; latency = time from send() to the broker's acknowledgement.
perf consume: reads ``--messages`` records; latency = arrival time minus the record's timestamp (end to
end when the producer runs at the same time, e.g. next to ``perf produce``).
Both print a live progress line on stderr and a summary: records/s, MB/s, latency avg/p50/p95/p99/p99.9/max.
"""

from __future__ import annotations

import argparse
import random
import signal
import string
import sys
import time
from functools import partial
from typing import Any

from .common import (
    UsageError,
    add_command,
    add_connection_args,
    add_json_arg,
    add_subcommands,
    client_config,
    err,
    print_json,
    run_command,
)

EXAMPLES = """\
  moldau perf produce bench --num-records 1000000 --record-size 100
  moldau perf produce bench --num-records 100000 --record-size 1024 --throughput 20000 --acks 1 \\
      --compression lz4
  moldau perf consume bench --messages 1000000
  moldau perf consume bench --messages 100000 --group perf-1 --json
"""


def register(sub: Any) -> None:
    p = add_command(sub, "perf", help="producer and consumer performance tests",
                    description="Load generators with throughput and latency figures, like "
                                "kafka-producer-perf-test and kafka-consumer-perf-test.", examples=EXAMPLES)
    cmds = add_subcommands(p, "perf_command")

    pp = cmds.add_parser("produce", help="produce records as fast as allowed and measure",
                         examples="  moldau perf produce bench -n 1000000 -s 100 --throughput -1\n")
    pp.add_argument("topic", metavar="TOPIC")
    pp.add_argument("-n", "--num-records", type=int, required=True, help="records to send")
    pp.add_argument("-s", "--record-size", type=int, default=100, help="value size in bytes (default 100)")
    pp.add_argument("--throughput", type=float, default=-1,
                    help="cap in records/s (default -1: no cap)")
    pp.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all", help="acks (default all)")
    pp.add_argument("-z", "--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    pp.add_argument("--batch-size", type=int, help="producer batch.size (default 16384)")
    pp.add_argument("--linger-ms", type=int, help="producer linger.ms (default 5)")
    pp.add_argument("--key-size", type=int, default=0, help="key size in bytes (default 0: no key)")
    pp.add_argument("--report-interval", type=float, default=5.0,
                    help="seconds between progress lines when stderr is not a terminal (default 5)")
    add_json_arg(pp)
    add_connection_args(pp)
    pp.set_defaults(func=run_command(cmd_produce))

    pc = cmds.add_parser("consume", help="consume records as fast as possible and measure",
                         examples="  moldau perf consume bench --messages 1000000\n")
    pc.add_argument("topic", metavar="TOPIC")
    pc.add_argument("-m", "--messages", type=int, required=True, help="records to consume")
    pc.add_argument("-g", "--group", help="consume in this group (default: no group, from the beginning)")
    pc.add_argument("--timeout", type=float, default=10.0,
                    help="give up when no record arrives for SECONDS (default 10)")
    pc.add_argument("--fetch-max-bytes", type=int, help="consumer fetch.max.bytes")
    pc.add_argument("--report-interval", type=float, default=5.0,
                    help="seconds between progress lines when stderr is not a terminal (default 5)")
    add_json_arg(pc)
    add_connection_args(pc)
    pc.set_defaults(func=run_command(cmd_consume))


# ---------------------------------------------------------------------------------------------- stats

def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values) + 0.5)) - 1))
    return sorted_values[idx]


def latency_summary(lat_ms: list[float]) -> dict[str, float]:
    s = sorted(lat_ms)
    avg = sum(s) / len(s) if s else 0.0
    return {"avg_ms": round(avg, 3), "p50_ms": round(percentile(s, 0.50), 3),
            "p95_ms": round(percentile(s, 0.95), 3), "p99_ms": round(percentile(s, 0.99), 3),
            "p99_9_ms": round(percentile(s, 0.999), 3), "max_ms": round(s[-1] if s else 0.0, 3)}


class _Live:
    """A progress line on stderr: rewritten in place on a terminal, one line per interval otherwise."""

    def __init__(self, interval: float) -> None:
        self.tty = sys.stderr.isatty()
        self.interval = 0.5 if self.tty else max(interval, 0.1)
        self.last = time.monotonic()
        self.window_start = self.last
        self.window_count = 0
        self.window_bytes = 0
        self.shown = False

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.interval

    def show(self, text: str) -> None:
        self.last = time.monotonic()
        if self.tty:
            sys.stderr.write("\r\x1b[K" + text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()
        self.shown = True

    def end(self) -> None:
        if self.tty and self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


class _ProduceStats:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error: str | None = None
        self.window_lat: list[float] = []

    def done(self, t0: float, fut: Any) -> None:
        lat = (time.perf_counter() - t0) * 1000.0
        if fut.exception() is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = str(fut.exception())
            return
        self.latencies.append(lat)
        self.window_lat.append(lat)


# ---------------------------------------------------------------------------------------------- produce

def cmd_produce(args: argparse.Namespace) -> int:
    from moldau.client import Producer

    if args.num_records < 1:
        raise UsageError("--num-records must be at least 1")
    if args.record_size < 0 or args.key_size < 0:
        raise UsageError("--record-size and --key-size must be >= 0")
    acks = "all" if args.acks in ("all", "-1") else args.acks
    conf = client_config(args, "producer")
    conf["acks"] = acks  # idempotence follows (off for acks 0/1 unless set), as in the Java producer
    conf["compression.type"] = args.compression
    if args.batch_size is not None:
        conf["batch.size"] = args.batch_size
    if args.linger_ms is not None:
        conf["linger.ms"] = args.linger_ms
    rnd = random.Random(42)
    payload = "".join(rnd.choice(string.ascii_uppercase) for _ in range(args.record_size)).encode()
    key = ("".join(rnd.choice(string.ascii_uppercase) for _ in range(args.key_size)).encode()
           if args.key_size else None)
    stats = _ProduceStats()
    live = _Live(args.report_interval)
    stop = {"now": False}

    def on_sigint(signum: int, frame: Any) -> None:
        if stop["now"]:
            raise KeyboardInterrupt
        stop["now"] = True

    prev = signal.signal(signal.SIGINT, on_sigint)
    sent = 0
    try:
        with Producer(config=conf) as producer:
            producer.partitions_for(args.topic)  # metadata first: not part of the measurement
            t_start = time.perf_counter()
            target = args.throughput if args.throughput and args.throughput > 0 else None
            window_sent = 0
            window_t = time.monotonic()
            send = producer.send
            topic = args.topic
            for i in range(args.num_records):
                if stop["now"]:
                    break
                t0 = time.perf_counter()
                fut = send(topic, payload, key=key)
                fut.add_done_callback(partial(stats.done, t0))
                sent += 1
                window_sent += 1
                if target is not None:
                    ahead = sent / target - (time.perf_counter() - t_start)
                    if ahead > 0.002:
                        time.sleep(ahead)
                if (i & 1023) == 0 and live.due():
                    now = time.monotonic()
                    el = max(now - window_t, 1e-9)
                    wl = stats.window_lat
                    stats.window_lat = []
                    avg = sum(wl) / len(wl) if wl else 0.0
                    live.show(
                        f"{sent:,} records sent, {window_sent / el:,.1f} records/sec "
                        f"({window_sent * args.record_size / el / 1048576:.2f} MB/sec), {avg:.1f} ms avg "
                        f"latency, {max(wl) if wl else 0.0:.1f} ms max latency"
                    )
                    window_sent = 0
                    window_t = now
            producer.flush()
            elapsed = time.perf_counter() - t_start
    finally:
        signal.signal(signal.SIGINT, prev or signal.SIG_DFL)
        live.end()
    ok = len(stats.latencies)
    summary = {"topic": args.topic, "records": sent, "acknowledged": ok, "errors": stats.errors,
               "record_size": args.record_size, "seconds": round(elapsed, 3),
               "records_per_sec": round(sent / elapsed, 1) if elapsed > 0 else 0.0,
               "mb_per_sec": round(sent * args.record_size / elapsed / 1048576, 3) if elapsed > 0 else 0.0,
               **latency_summary(stats.latencies), "acks": acks, "compression": args.compression}
    if args.json:
        print_json(summary)
    else:
        print(f"{sent:,} records sent, {summary['records_per_sec']:,.1f} records/sec "
              f"({summary['mb_per_sec']:.2f} MB/sec), {summary['avg_ms']:.2f} ms avg latency, "
              f"{summary['max_ms']:.2f} ms max latency, {summary['p50_ms']:.2f} ms 50th, "
              f"{summary['p95_ms']:.2f} ms 95th, {summary['p99_ms']:.2f} ms 99th, "
              f"{summary['p99_9_ms']:.2f} ms 99.9th.")
    if stats.errors:
        err(f"moldau perf: error: {stats.errors} records failed; first error: {stats.first_error}")
        return 1
    return 0


# ---------------------------------------------------------------------------------------------- consume

def cmd_consume(args: argparse.Namespace) -> int:
    from moldau.client import Consumer, TopicPartition

    if args.messages < 1:
        raise UsageError("--messages must be at least 1")
    conf = client_config(args, "consumer", **{"auto.offset.reset": "earliest", "enable.auto.commit": "false",
                                              "allow.auto.create.topics": "false"})
    if args.fetch_max_bytes is not None:
        conf["fetch.max.bytes"] = args.fetch_max_bytes
    if args.group:
        conf["group.id"] = args.group
    live = _Live(args.report_interval)
    stop = {"now": False}

    def on_sigint(signum: int, frame: Any) -> None:
        if stop["now"]:
            raise KeyboardInterrupt
        stop["now"] = True

    prev = signal.signal(signal.SIGINT, on_sigint)
    count = 0
    nbytes = 0
    lat: list[float] = []
    try:
        with Consumer(config=conf) as c:
            if args.topic not in c.topics(timeout=10.0):
                from .common import CliError

                raise CliError(f"topic {args.topic!r} does not exist")
            t_start = time.perf_counter()
            wall_start = time.time()
            if args.group:
                c.subscribe([args.topic])
            else:
                tps = [TopicPartition(args.topic, p) for p in c.partitions_for(args.topic)]
                c.assign(tps)
                c.seek_to_beginning(*tps)
            first_record_t: float | None = None
            last_record = time.monotonic()
            window_count = 0
            window_bytes = 0
            window_t = time.monotonic()
            while count < args.messages and not stop["now"]:
                recs = c.poll(timeout=0.2, max_records=min(args.messages - count, 10000))
                now_ms = time.time() * 1000.0
                if recs:
                    if first_record_t is None:
                        first_record_t = time.perf_counter()
                    last_record = time.monotonic()
                    for r in recs:
                        n = (len(r.value) if r.value is not None else 0) + (
                            len(r.key) if r.key is not None else 0
                        )
                        nbytes += n
                        window_bytes += n
                        if r.timestamp >= 0:
                            lat.append(max(now_ms - r.timestamp, 0.0))
                    count += len(recs)
                    window_count += len(recs)
                elif time.monotonic() - last_record > args.timeout:
                    break
                if live.due():
                    now = time.monotonic()
                    el = max(now - window_t, 1e-9)
                    live.show(f"{count:,} records consumed, {window_count / el:,.1f} records/sec "
                              f"({window_bytes / el / 1048576:.2f} MB/sec)")
                    window_count = window_bytes = 0
                    window_t = now
            elapsed = time.perf_counter() - t_start
            wall_end = time.time()
            if args.group and count:
                c.commit()
    finally:
        signal.signal(signal.SIGINT, prev or signal.SIG_DFL)
        live.end()
    fetch_elapsed = (time.perf_counter() - first_record_t) if first_record_t is not None else 0.0
    fetch_elapsed = min(fetch_elapsed, elapsed) if first_record_t is not None else 0.0
    mb = nbytes / 1048576
    summary = {"topic": args.topic, "records": count, "bytes": nbytes, "seconds": round(elapsed, 3),
               "records_per_sec": round(count / elapsed, 1) if elapsed > 0 else 0.0,
               "mb_per_sec": round(mb / elapsed, 3) if elapsed > 0 else 0.0,
               "start_time": wall_start, "end_time": wall_end,
               "first_record_wait_ms": round((elapsed - fetch_elapsed) * 1000, 1),
               **latency_summary(lat), "latency": "end to end (arrival - record timestamp)"}
    if args.json:
        print_json(summary)
    else:
        print(f"{count:,} records consumed ({mb:.2f} MB) in {elapsed:.2f} s, "
              f"{summary['records_per_sec']:,.1f} records/sec ({summary['mb_per_sec']:.2f} MB/sec); "
              f"end-to-end latency {summary['avg_ms']:.1f} ms avg, {summary['p50_ms']:.1f} ms 50th, "
              f"{summary['p95_ms']:.1f} ms 95th, {summary['p99_ms']:.1f} ms 99th, "
              f"{summary['p99_9_ms']:.1f} ms 99.9th, {summary['max_ms']:.1f} ms max.")
    if count < args.messages and not stop["now"]:
        err(f"moldau perf: warning: only {count} of {args.messages} records arrived within "
            f"--timeout {args.timeout:g} s")
        return 1
    return 0

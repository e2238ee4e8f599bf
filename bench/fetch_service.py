"""Fetch service time: how long a broker takes to answer one Fetch of a full partition, from a raw socket.

A client-bound figure (``bench/throughput.py``'s consume rate through librdkafka) says little about the
broker's own fetch path once the client is the bottleneck: on a 2-core machine librdkafka's consumer can even
go slower when its fetches are answered sooner (its fetcher thread then competes with the application thread
for the cores). This bench measures the broker alone: it fills a 1-partition topic with confluent-kafka
(acks=1, linger.ms=5, as bench/throughput.py), then walks the whole partition with Fetch v11 requests
(``partition_max_bytes`` 1 MiB, ``max_bytes`` 50 MiB, one request at a time on one connection, TCP_NODELAY),
each timed from the request's first byte sent to the response's last byte received, into a buffer allocated
once (no decoding on the clock). The walk is repeated ``--passes`` times (the page cache warm after the first
pass for every broker alike); each broker's runs are interleaved with the others'. Reported: the median and
p90 time of one fetch, the bytes per fetch and MB/s over the walk (bytes / time on the clock), medians of the
runs, and moldau's ratio to each peer (time: lower is better).

    python bench/fetch_service.py                              # moldau and Apache Kafka, 100 B and 1 KiB
    python bench/fetch_service.py --brokers moldau --sizes 100 --repeat 5
    MOLDAU_SENDFILE=0 python bench/fetch_service.py --brokers moldau   # moldau without zero-copy fetch

Prints a table and writes JSON to bench/results/fetch_service-<time>.json (gitignored). Never asserted by
tests."""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)
sys.path.insert(0, str(ROOT / "bench"))

from throughput import create_topic, produce, start_broker, write_results  # noqa: E402

from moldau.protocol import frame  # noqa: E402
from moldau.protocol import messages as m  # noqa: E402

from harness.brokerproc import BrokerProcess  # noqa: E402

FETCH_VERSION = 11  # topic names (v13+ takes topic ids), no tagged fields to resolve
PARTITION_MAX_BYTES = 1 << 20
DEFAULT_RECORDS = {100: 1_000_000, 1024: 250_000}


class RawFetcher:
    """One connection; ``fetch(offset)`` returns (seconds on the clock, response bytes, next offset)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.topic = topic
        self.corr = 0
        self.buf = bytearray(64 << 20)

    def fetch(self, offset: int) -> tuple[float, int, int]:
        self.corr += 1
        req = m.FetchRequest.new(
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[m.FetchRequest.FetchTopic(topic=self.topic, partitions=[m.FetchRequest.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=PARTITION_MAX_BYTES)])])
        data = frame.encode_request(1, FETCH_VERSION, self.corr, "fetch-service-bench", req)
        view = memoryview(self.buf)
        sock = self.sock
        got = 0
        need = -1
        t0 = time.perf_counter()
        sock.sendall(data)
        while got < need or need < 0:
            k = sock.recv_into(view[got:])
            if not k:
                raise RuntimeError("the broker closed the connection")
            got += k
            if need < 0 and got >= 4:
                need = 4 + struct.unpack_from(">i", self.buf, 0)[0]
        elapsed = time.perf_counter() - t0
        return elapsed, got, self._next_offset(bytes(self.buf[4:got]), offset)

    def _next_offset(self, body: bytes, offset: int) -> int:
        hdr, off = frame.decode_response_header(body, 1, FETCH_VERSION)
        assert hdr.correlation_id == self.corr
        resp, _ = m.RESPONSES[1].decode(body, FETCH_VERSION, off)
        p = resp.responses[0].partitions[0]
        if p.error_code:
            raise RuntimeError(f"Fetch at {offset}: error {p.error_code}")
        records = bytes(p.records or b"")
        pos = 0
        nxt = offset
        while pos + 61 <= len(records):  # whole batches: baseOffset, batchLength, ..., lastOffsetDelta
            base, length = struct.unpack_from(">qi", records, pos)
            if pos + 12 + length > len(records):
                break
            last_delta = struct.unpack_from(">i", records, pos + 23)[0]
            nxt = base + last_delta + 1
            pos += 12 + length
        return nxt

    def close(self) -> None:
        self.sock.close()


def walk(bootstrap: str, topic: str, end: int, passes: int) -> dict[str, float]:
    """``passes`` walks of the partition from offset 0 to ``end``: per-fetch times and bytes."""
    f = RawFetcher(bootstrap, topic)
    try:
        times: list[float] = []
        total = 0
        for _ in range(passes):
            offset = 0
            while offset < end:
                dt, n, nxt = f.fetch(offset)
                if nxt <= offset:
                    raise RuntimeError(f"no progress at offset {offset}")
                times.append(dt)
                total += n
                offset = nxt
    finally:
        f.close()
    times.sort()
    return {"fetches": len(times), "median_ms": statistics.median(times) * 1e3,
            "p90_ms": times[int(len(times) * 0.9)] * 1e3, "bytes_per_fetch": total / len(times),
            "mb_per_s": total / sum(times) / 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="moldau,kafka", help="moldau, kafka, tansu; comma separated")
    ap.add_argument("--sizes", default="100,1024", help="record value sizes in bytes, comma separated")
    ap.add_argument("--records", type=int,
                    help="records per topic (default 1,000,000 at 100 B, 250,000 at 1 KiB)")
    ap.add_argument("--passes", type=int, default=3, help="walks of the partition per run")
    ap.add_argument("--repeat", type=int, default=3, help="runs per broker and size (a fresh topic each)")
    ap.add_argument("--out", type=Path, help="JSON output (default bench/results/fetch_service-<time>.json)")
    args = ap.parse_args(argv)
    kinds = [k for k in args.brokers.split(",") if k.strip()]
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    def records_for(size: int) -> int:
        return args.records or DEFAULT_RECORDS.get(size, max(10_000, 100_000_000 // max(size, 1) // 100))

    results: dict[str, dict[int, list[dict[str, float]]]] = {k: {s: [] for s in sizes} for k in kinds}
    with tempfile.TemporaryDirectory(prefix="moldau-bench-") as tmp:
        brokers: dict[str, BrokerProcess] = {}
        try:
            for kind in kinds:
                brokers[kind] = start_broker(kind, Path(tmp) / kind)
            for rep in range(args.repeat):
                for size in sizes:
                    order = kinds if rep % 2 == 0 else list(reversed(kinds))
                    for kind in order:
                        b = brokers[kind]
                        topic = f"fetch-{size}-{uuid.uuid4().hex[:8]}"
                        create_topic(b.bootstrap, topic)
                        n = records_for(size)
                        produce(b.bootstrap, topic, n, size)
                        r = walk(b.bootstrap, topic, n, args.passes)
                        results[kind][size].append(r)
                        print(f"  run {rep + 1}/{args.repeat} {kind:6s} {size:5d} B: {r['fetches']} fetches, "
                              f"median {r['median_ms']:.3f} ms, p90 {r['p90_ms']:.3f} ms, "
                              f"{r['bytes_per_fetch'] / 1024:.0f} KiB each, {r['mb_per_s']:.0f} MB/s",
                              file=sys.stderr, flush=True)
        finally:
            for b in brokers.values():
                b.close()

    med = {k: {s: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
               for s, runs in by.items()} for k, by in results.items()}
    print()
    header = (f"{'broker':8s} {'size':>6s} | {'fetch median ms':>15s} {'p90 ms':>8s} {'KiB/fetch':>9s} "
              f"{'MB/s':>7s}")
    print(header)
    print("-" * len(header))
    ratios: dict[str, dict[str, float]] = {}
    for size in sizes:
        for kind in kinds:
            r = med[kind][size]
            print(f"{kind:8s} {size:6d} | {r['median_ms']:15.3f} {r['p90_ms']:8.3f} "
                  f"{r['bytes_per_fetch'] / 1024:9.0f} {r['mb_per_s']:7.0f}")
        for peer in (k for k in kinds if k != "moldau" and "moldau" in kinds):
            mo, pe = med["moldau"][size], med[peer][size]
            ratios[f"{size}_{peer}"] = {"time": mo["median_ms"] / pe["median_ms"],
                                        "mb_per_s": mo["mb_per_s"] / pe["mb_per_s"]}
            print(f"{'ratio':8s} {size:6d} | {mo['median_ms'] / pe['median_ms']:15.2f} {'':8s} {'':9s} "
                  f"{mo['mb_per_s'] / pe['mb_per_s']:7.2f}   (moldau / {peer}; time: lower is better)")
    print(f"(medians of {args.repeat} runs of {args.passes} walks each)")
    doc: dict[str, Any] = {
        "benchmark": "fetch-service",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "fetch_version": FETCH_VERSION, "partition_max_bytes": PARTITION_MAX_BYTES, "passes": args.passes,
        "moldau_sendfile": os.environ.get("MOLDAU_SENDFILE", "1") != "0",
        "sizes": {str(s): {"records": records_for(s), **{k: {"median": med[k][s], "runs": results[k][s]}
                                                          for k in kinds}} for s in sizes},
        "ratios": ratios,
    }
    write_results(doc, "fetch_service", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

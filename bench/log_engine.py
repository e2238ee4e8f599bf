"""Benchmark of moldau.log: append and read throughput against a raw-file peer in the same run.

The peer is the floor any Python log can reach: ``os.pwrite`` of the same batch bytes to one file (append) and
``os.pread`` of 1 MiB regions (read), no offsets, no indexes. moldau's numbers include offset assignment,
index maintenance, segment rolls, producer checks (idempotent variant) and batch-boundary reads.

    python bench/log_engine.py [--seconds 2] [--batch-bytes 16384] [--records 100] [--json]

Prints a table and one JSON object. Not asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from moldau.log import LogConfig, PartitionLog
from moldau.protocol.records import BatchBuilder, split_batches


def build_batch(records: int, batch_bytes: int, pid: int = -1, seq: int = -1) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    value = b"x" * max(1, batch_bytes // records - 20)
    for i in range(records):
        b.append(1_700_000_000_000 + i, None, value)
    return b.build()


def bench_append(tmp: str, seconds: float, template: bytes, idempotent: bool) -> dict:
    cfg = LogConfig(segment_bytes=256 << 20)
    lg = PartitionLog(os.path.join(tmp, f"bench-{int(idempotent)}"), cfg)
    n = 0
    nbytes = 0
    seq = 0
    records = split_batches(template)[0][1].records_count
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        buf = bytearray(template)
        if idempotent:
            buf[53:57] = seq.to_bytes(4, "big")
            seq += records
        batches = split_batches(buf)
        lg.append(buf, batches, 1_700_000_000_000)
        n += 1
        nbytes += len(buf)
        if n % 64 == 0 and time.perf_counter() > deadline:
            break
    dt = time.perf_counter() - t0
    result = {"batches_per_s": n / dt, "mb_per_s": nbytes / dt / 1e6, "batches": n}
    t1 = time.perf_counter()
    reads = 0
    rbytes = 0
    off = 0
    leo = lg.log_end_offset
    while off < leo:
        rr = lg.read(off, 1 << 20)
        off = rr.last_offset_exclusive
        rbytes += rr.size
        reads += 1
    rdt = time.perf_counter() - t1
    result.update({"read_mb_per_s": rbytes / rdt / 1e6, "reads": reads})
    lg.close()
    return result


def bench_peer(tmp: str, seconds: float, template: bytes) -> dict:
    path = os.path.join(tmp, "peer.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    n = 0
    pos = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        buf = bytearray(template)  # same per-append copy as the log benchmark
        os.pwrite(fd, buf, pos)
        pos += len(buf)
        n += 1
        if n % 64 == 0 and time.perf_counter() > deadline:
            break
    dt = time.perf_counter() - t0
    t1 = time.perf_counter()
    rpos = 0
    while rpos < pos:
        data = os.pread(fd, 1 << 20, rpos)
        rpos += len(data)
    rdt = time.perf_counter() - t1
    os.close(fd)
    return {"batches_per_s": n / dt, "mb_per_s": pos / dt / 1e6, "batches": n, "read_mb_per_s": pos / rdt / 1e6}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--batch-bytes", type=int, default=16384)
    p.add_argument("--records", type=int, default=100)
    p.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = p.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="moldau-bench-", dir=args.dir)
    try:
        template = build_batch(args.records, args.batch_bytes)
        template_pid = build_batch(args.records, args.batch_bytes, pid=1, seq=0)
        rows = {
            "raw pwrite/pread (peer)": bench_peer(tmp, args.seconds, template),
            "moldau.log": bench_append(tmp, args.seconds, template, False),
            "moldau.log idempotent": bench_append(tmp, args.seconds, template_pid, True),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"batch {len(template)} bytes, {args.records} records, {args.seconds:.1f} s per run")
    print(f"{'':28} {'batches/s':>12} {'MB/s':>10} {'read MB/s':>10}")
    for name, r in rows.items():
        print(f"{name:28} {r['batches_per_s']:12.0f} {r['mb_per_s']:10.1f} {r['read_mb_per_s']:10.1f}")
    print(json.dumps({"batch_bytes": len(template), "records": args.records, "results": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

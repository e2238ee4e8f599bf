"""Throughput of moldau's record-format code, next to kafka-python's record classes as a peer.

    python bench/records_codec.py [--records 1000] [--value-size 100] [--seconds 0.5] [--json-only]

Prints one JSON object, then a table (MB/s of uncompressed record bytes; higher is better). Never asserted by
the test suite. Keep runs short: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from moldau.protocol.records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BatchBuilder,
    check_crc,
    decode_batch,
    legacy_to_v2,
    split_batches,
    v2_to_legacy,
)

try:
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
except ImportError:  # peer is optional
    DefaultRecordBatch = DefaultRecordBatchBuilder = None

CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


def timeit(fn, seconds: float) -> float:
    """Seconds per call (best of repeated batches of calls within the time budget)."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > seconds / 5:
            break
        n *= 2
    best = dt / n
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=0.4)
    ap.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    ap.add_argument("--json-only", action="store_true")
    args = ap.parse_args()

    rnd = os.urandom(args.value_size // 2)
    rows = [
        (1_700_000_000_000 + i, b"key-%08d" % i, (rnd + b"A" * args.value_size)[: args.value_size], None)
        for i in range(args.records)
    ]
    payload = sum(len(k) + len(v) for _, k, v, _ in rows)
    results: dict[str, dict[str, float]] = {}

    def mbps(seconds_per_call: float) -> float:
        return round(payload / seconds_per_call / 1e6, 1)

    for name in args.codecs.split(","):
        codec = CODECS[name]
        r: dict[str, float] = {}

        def build_ours(codec=codec):
            b = BatchBuilder(compression=codec)
            for ts, k, v, h in rows:
                b.append(ts, k, v, h)
            return b.build(0)

        raw = build_ours()
        r["batch_bytes"] = len(raw)
        r["build"] = mbps(timeit(build_ours, args.seconds))
        r["decode"] = mbps(timeit(lambda: decode_batch(raw), args.seconds))
        if codec == NONE:
            h = split_batches(raw)[0][1]
            r["crc_check"] = mbps(timeit(lambda: check_crc(raw, 0, h), args.seconds))
            r["split_batches"] = mbps(timeit(lambda: split_batches(raw), args.seconds))
            legacy = v2_to_legacy(raw, 1)
            r["v2_to_legacy_v1"] = mbps(timeit(lambda: v2_to_legacy(raw, 1), args.seconds))
            r["legacy_v1_to_v2"] = mbps(timeit(lambda: legacy_to_v2(legacy), args.seconds))
        if DefaultRecordBatchBuilder is not None:

            def build_peer(codec=codec):
                b = DefaultRecordBatchBuilder(
                    magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1,
                    base_sequence=-1, batch_size=1 << 30,
                )
                for i, (ts, k, v, h) in enumerate(rows):
                    b.append(i, timestamp=ts, key=k, value=v, headers=[])
                return bytes(b.build())

            peer_raw = build_peer()

            def decode_peer():
                return [(rec.key, rec.value) for rec in DefaultRecordBatch(peer_raw)]

            r["peer_build"] = mbps(timeit(build_peer, args.seconds))
            r["peer_decode"] = mbps(timeit(decode_peer, args.seconds))
        results[name] = r

    out = {
        "bench": "records_codec",
        "records": args.records,
        "value_size": args.value_size,
        "payload_bytes": payload,
        "unit": "MB/s of key+value bytes",
        "results": results,
    }
    print(json.dumps(out))
    if args.json_only:
        return
    cols = ["build", "peer_build", "decode", "peer_decode", "crc_check", "split_batches", "v2_to_legacy_v1",
            "legacy_v1_to_v2"]
    print(f"\n{'codec':8}" + "".join(f"{c:>17}" for c in cols), file=sys.stdout)
    for name, r in results.items():
        print(f"{name:8}" + "".join(f"{r.get(c, ''):>17}" for c in cols))


if __name__ == "__main__":
    main()

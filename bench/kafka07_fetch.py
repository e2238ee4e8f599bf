"""Fetch cost of the Kafka 0.7 listener's read path against a modern fetch, in process (no sockets).

    .venv/bin/python bench/kafka07_fetch.py [--batches 2000] [--records 10] [--size 100]

Builds a partition (uncompressed and gzip batches), then reads it whole in 1 MiB fetches three ways: the
modern path (``PartitionLog.read``), the 0.7 path by byte offset (``Kafka07Service.read``: index lookup, log
read, conversion to 0.7 messages; again with the views cached), and the first 0.7 read, which also builds the
byte-offset index."""

from __future__ import annotations

import argparse
import tempfile
import time

from moldau.broker.kafka07.service import IndexPending, Kafka07Service
from moldau.log import LogConfig, PartitionLog
from moldau.protocol.records import BatchBuilder, split_batches


class _Partition:
    def __init__(self, plog: PartitionLog) -> None:
        self.log = plog
        self.topic = "t"
        self.index = 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--size", type=int, default=100)
    a = ap.parse_args()
    for codec, name in ((0, "uncompressed"), (1, "gzip")):
        with tempfile.TemporaryDirectory() as d:
            plog = PartitionLog(f"{d}/t-0", LogConfig())
            for i in range(a.batches):
                b = BatchBuilder(compression=codec)
                for j in range(a.records):
                    b.append(1_700_000_000_000, None, (b"%d-%d " % (i, j)).ljust(a.size, b"x"))
                buf = bytearray(b.build(0))
                plog.append(buf, split_batches(buf))
            plog.high_watermark = plog.log_end_offset
            svc = Kafka07Service(None, None, None, None)
            p = _Partition(plog)

            def walk07(svc: Kafka07Service = svc, p: _Partition = p) -> int:
                pos = total = 0
                while True:
                    try:
                        data = svc.read(p, pos, 1 << 20)
                    except IndexPending as e:  # the listener runs these steps as event-loop callbacks
                        while not e.step():
                            pass
                        continue
                    if not data:
                        return total
                    # whole messages only, as a client would go on
                    q = 0
                    while q + 4 <= len(data) and q + 4 + int.from_bytes(data[q:q + 4], "big") <= len(data):
                        q += 4 + int.from_bytes(data[q:q + 4], "big")
                    pos += q
                    total += q

            t0 = time.perf_counter()
            walk07()
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            walk07()
            tcached = time.perf_counter() - t0
            svc.views = type(svc.views)()  # a cold view cache: every batch converted
            t0 = time.perf_counter()
            size07 = walk07()
            t07 = time.perf_counter() - t0
            t0 = time.perf_counter()
            off = 0
            while off < plog.log_end_offset:
                rr = plog.read(off, 1 << 20)
                off = rr.last_offset_exclusive
            tmod = time.perf_counter() - t0
            n = a.batches * a.records
            print(f"{name:12s} {n} records: modern read {n / tmod:,.0f} rec/s; 0.7 read {n / t07:,.0f} rec/s "
                  f"({size07 / t07 / 1e6:.1f} MB/s of 0.7 messages); again, views cached {n / tcached:,.0f} rec/s; "
                  f"first 0.7 read incl. index build {n / first:,.0f} rec/s")
            plog.close()


if __name__ == "__main__":
    main()

"""Fetch cost of the Kafka 0.7 listener's read path against a modern fetch, in process (no sockets).

    .venv/bin/python bench/kafka07_fetch.py [--batches 2000] [--records 10] [--size 100] [--first-runs 3]

Builds a partition (uncompressed and gzip batches), then reads it whole in 1 MiB fetches: the modern path
(``PartitionLog.read``), the 0.7 path by byte offset (``Kafka07Service.read``: index lookup, then the stored
0.7 views, one pread), the 0.7 path converting every batch (no stored views, a cold view cache), and the
first 0.7 read of data no 0.7 read converted yet, which also builds the byte-offset index and stores the
views (one scan of each batch: ``IndexJob`` with views). Only the broker's read path is timed; the modern and
the stored 0.7 figures are the best of five runs, the first read the best of ``--first-runs`` (each on a copy
of the partition with no index and no views). With ``kafka07.views.eager`` the index and the views are built
in the background as data arrives: that conversion's rate is timed apart, then the first read (stored views).
Each line gives the figures of one run with their ratios to the modern read."""

from __future__ import annotations

import argparse
import shutil
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
    ap.add_argument("--first-runs", type=int, default=3, help="first reads from scratch (the best is shown)")
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

            def walk07(svc: Kafka07Service = svc, p: _Partition = p) -> tuple[int, float]:
                """Reads the partition by byte offset as a 0.7 consumer does: (0.7 bytes, seconds spent in
                the broker's read path). Finding the whole messages of each answer (the client's work) is
                not timed, as a modern read is not timed decoding records."""
                pos = total = 0
                spent = 0.0
                while True:
                    t = time.perf_counter()
                    try:
                        data = svc.read(p, pos, 1 << 20)
                    except IndexPending as e:  # the listener runs these steps as event-loop callbacks
                        while not e.step():
                            pass
                        spent += time.perf_counter() - t
                        continue
                    spent += time.perf_counter() - t
                    if not data:
                        return total, spent
                    # whole messages only, as a client would go on
                    q = 0
                    while q + 4 <= len(data) and q + 4 + int.from_bytes(data[q:q + 4], "big") <= len(data):
                        q += 4 + int.from_bytes(data[q:q + 4], "big")
                    pos += q
                    total += q

            def modern() -> float:
                t0 = time.perf_counter()
                off = 0
                while off < plog.log_end_offset:
                    rr = plog.read(off, 1 << 20)
                    off = rr.last_offset_exclusive
                return time.perf_counter() - t0

            _size, first = walk07()  # builds the index, converts every batch and stores the views

            def copy() -> _Partition:
                """The partition's batches in a new log: no index, no views."""
                q = _Partition(PartitionLog(f"{d}/u-0", LogConfig()))
                for off in range(0, plog.log_end_offset, 1000):
                    rr = plog.read(off, 1 << 30, max_offset=off + 1000)
                    whole = b"".join(bytes(c) for c in rr.chunks)
                    q.log.append(bytearray(whole), split_batches(whole))
                q.log.high_watermark = q.log.log_end_offset
                return q

            def drop(q: _Partition) -> None:
                q.log.close()
                shutil.rmtree(f"{d}/u-0")

            for _ in range(a.first_runs - 1):  # the first read again, from scratch: no index, no views
                q = copy()
                first = min(first, walk07(Kafka07Service(None, None, None, None), q)[1])
                drop(q)
            # kafka07.views.eager: the index and the views built in the background before any read (timed
            # apart: the background conversion's rate), then the first read
            eager = eager_read = float("inf")
            for _ in range(a.first_runs):
                q = copy()
                t = time.perf_counter()
                job = IndexPending(q.log, 0, 1 << 62)
                while not job.step():
                    pass
                eager = min(eager, time.perf_counter() - t)
                eager_read = min(eager_read, walk07(Kafka07Service(None, None, None, None), q)[1])
                drop(q)
            # best of five of each (the machine is shared: the best run is the least disturbed one)
            t07 = min(walk07()[1] for _ in range(5))
            size07 = walk07()[0]
            tmod = min(modern() for _ in range(5))
            svc.views = type(svc.views)()  # no stored views, a cold view cache: every batch converted
            stored = plog.byte_offsets.views
            saved = list(stored.starts), list(stored.sizes)
            stored.starts.clear()
            stored.sizes.clear()
            tconv = walk07()[1]
            stored.starts[:], stored.sizes[:] = saved
            n = a.batches * a.records
            print(f"{name:12s} {n} records: modern read {n / tmod:,.0f} rec/s; 0.7 read of stored views "
                  f"{n / t07:,.0f} rec/s ({size07 / t07 / 1e6:.1f} MB/s of 0.7 messages, "
                  f"{tmod / t07:.2f}x modern); first 0.7 read (index, conversion, views stored) "
                  f"{n / first:,.0f} rec/s ({tmod / first:.3f}x modern); with kafka07.views.eager: "
                  f"background index and views {n / eager:,.0f} rec/s, then the first 0.7 read "
                  f"{n / eager_read:,.0f} "
                  f"rec/s ({tmod / eager_read:.2f}x modern); converting instead of reading stored views "
                  f"{n / tconv:,.0f} rec/s ({tmod / tconv:.3f}x modern)")
            plog.close()


if __name__ == "__main__":
    main()

"""Event-loop stall of a broker while the Kafka 0.7 listener reads a large partition for the first time
(which builds its byte-offset index).

    .venv/bin/python bench/kafka07_stall.py [--mb 1024] [--value 1000] [--port 23100] [--fetch-first]
                                           [--read-mb 0]

Starts a broker process (PLAINTEXT and KAFKA07 listeners on ``--port`` and ``--port + 1``), writes ``--mb``
MiB of uncompressed records with confluent-kafka, then, while a probe sends a modern ApiVersions request
every 2 ms and times each answer, a 0.7 client asks OFFSETS -1 (the end byte offset: the whole partition must
be indexed) and FETCHes 1 MiB from byte 0 (converted and stored). With ``--fetch-first`` the FETCH comes
first, as a consumer that starts from byte 0 without asking OFFSETS: the index is built with the views of
its first ``VIEW_AHEAD_BYTES`` in the same scan. ``--read-mb N`` then reads on from there, 1 MiB fetches
from the next message boundary, N MiB of 0.7 messages (converted as they are first read), and prints the
rate. Prints the index build time and the probe's round trips before, during the build, around the FETCH
and during the read: the worst one is the longest the event loop was held."""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

from confluent_kafka import Producer

from moldau.protocol import kafka07 as k07


def _recv(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def _frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv(sock, 4))
    return _recv(sock, size)


def _probe(port: int, stop: Any, out: Any) -> None:
    """In a process of its own (the 0.7 client's parsing would otherwise hold the probe's GIL): round trips
    as (perf_counter at the send, seconds), sent to ``out`` when ``stop`` is set (perf_counter is the system's
    monotonic clock, the same in both processes)."""
    rtts: list[tuple[float, float]] = []
    sock = socket.create_connection(("127.0.0.1", port))
    cid = 0
    while not stop.is_set():
        cid += 1
        body = struct.pack(">hhih", 18, 0, cid, 5) + b"probe"
        t0 = time.perf_counter()
        sock.sendall(struct.pack(">i", len(body)) + body)
        _frame(sock)
        rtts.append((t0, time.perf_counter() - t0))
        time.sleep(0.002)
    sock.close()
    out.send(rtts)


def _stats(xs: list[float]) -> str:
    if not xs:
        return "none"
    xs = sorted(xs)
    return (f"{len(xs)} probes, median {xs[len(xs) // 2] * 1000:.1f} ms, p99 "
            f"{xs[int(len(xs) * 0.99)] * 1000:.1f} ms, max {xs[-1] * 1000:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--value", type=int, default=1000)
    ap.add_argument("--port", type=int, default=23100)
    ap.add_argument("--fetch-first", action="store_true")
    ap.add_argument("--read-mb", type=int, default=0)
    a = ap.parse_args()
    port, lport = a.port, a.port + 1
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moldau", "broker", "--data-dir", d, "--log-level", "WARNING", "--set",
             f"listeners=PLAINTEXT://127.0.0.1:{port},KAFKA07://127.0.0.1:{lport}"])
        try:
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.5).close()
                    break
                except OSError:
                    time.sleep(0.1)
            n = a.mb * (1 << 20) // a.value
            p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 20, "batch.size": 1 << 20,
                          "compression.type": "none", "queue.buffering.max.kbytes": 1 << 20})
            value = b"v" * a.value
            t0 = time.perf_counter()
            for i in range(n):
                while True:
                    try:
                        p.produce("big", value, partition=0)
                        break
                    except BufferError:
                        p.poll(0.05)
                if i % 10000 == 0:
                    p.poll(0)
            assert p.flush(600) == 0
            print(f"wrote {n} records of {a.value} bytes ({a.mb} MiB) in {time.perf_counter() - t0:.1f} s")
            stop = multiprocessing.Event()
            recv, send = multiprocessing.Pipe(duplex=False)
            th = multiprocessing.Process(target=_probe, args=(port, stop, send))
            th.start()
            time.sleep(2.0)
            c = socket.create_connection(("127.0.0.1", lport))
            fetch0 = k07.encode_request(k07.FetchRequest("big", 0, 0, 1 << 20))
            t0 = time.perf_counter()
            if a.fetch_first:
                c.sendall(fetch0)
                err2, data = k07.decode_fetch_response(_frame_with_size(c))
                t1 = t2 = time.perf_counter()
                err, offs = k07.NO_ERROR, []
            else:
                c.sendall(k07.encode_request(k07.OffsetsRequest("big", 0, k07.LATEST_TIME, 1)))
                err, offs = k07.decode_offsets_response(_frame_with_size(c))
                t1 = time.perf_counter()
                c.sendall(fetch0)
                err2, data = k07.decode_fetch_response(_frame_with_size(c))
                t2 = time.perf_counter()
            pos = _whole(data)
            t3 = time.perf_counter()
            records = 0
            while pos < a.read_mb << 20:
                c.sendall(k07.encode_request(k07.FetchRequest("big", 0, pos, 1 << 20)))
                _e, chunk = k07.decode_fetch_response(_frame_with_size(c))
                if not chunk:
                    break
                got = _whole(chunk)
                records += len(k07.parse_message_set(memoryview(chunk)[:got]))
                pos += got
            t4 = time.perf_counter()
            time.sleep(0.5)
            stop.set()
            rtts: list[tuple[float, float]] = recv.recv()
            th.join()
            c.close()
            before = [r for t, r in rtts if t < t0]
            during = [r for t, r in rtts if t0 <= t < t1]
            fetching = [r for t, r in rtts if t1 - 0.005 <= t < t2]
            reading = [r for t, r in rtts if t3 <= t < t4]
            if a.fetch_first:
                print(f"0.7 FETCH 0 first: error {err2}, {len(data)} bytes, answered in {t1 - t0:.2f} s (the "
                      f"whole partition indexed, the first views built in the same scan)")
            else:
                print(f"0.7 OFFSETS -1: error {err}, end byte offset {offs}, answered in {t1 - t0:.2f} s "
                      f"(the whole partition indexed); FETCH 0: error {err2}, {len(data)} bytes in "
                      f"{(t2 - t1) * 1000:.1f} ms")
            print(f"probe before: {_stats(before)}")
            print(f"probe during the index build: {_stats(during)}")
            if not a.fetch_first:
                print(f"probe during the first FETCH (conversion of 1 MiB, views stored): {_stats(fetching)}")
            if records:
                print(f"read on: {pos / 1e6:.0f} MB, {records} records of data no 0.7 read had converted, in "
                      f"{t4 - t3:.2f} s: {records / (t4 - t3):,.0f} records/s over the socket")
                print(f"probe during the read: {_stats(reading)}")
        finally:
            proc.terminate()
            proc.wait(60)


def _whole(data: bytes) -> int:
    """Bytes of the whole messages at the start of a FETCH answer."""
    q = 0
    while q + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, q)
        if q + 4 + size > len(data):
            break
        q += 4 + size
    return q


def _frame_with_size(sock: socket.socket) -> bytes:
    head = _recv(sock, 4)
    (size,) = struct.unpack(">i", head)
    return head + _recv(sock, size)


if __name__ == "__main__":
    main()

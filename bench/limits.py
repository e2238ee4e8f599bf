"""Broker under load: accepting connections, RSS per connection, start and stop at scale.

* ``connections``: open N client connections one after another (each answers an ApiVersions round trip before
  the next one opens, and all stay open), against moldau and tansu in the same run; connections opened per
  second per block of 500 and over all, broker RSS per open connection (from /proc).
* ``partitions``: a moldau broker with T topics x P partitions (one record each): time from the command to
  an open, answering port after a clean stop and after kill -9, and the time of a clean stop (SIGTERM to
  exit).
* ``empty``: an empty broker, command to open port, median of 5 (the bytecode cache is warm after the first).

    python bench/limits.py                                      # everything, default sizes
    python bench/limits.py connections --connections 5000
    python bench/limits.py partitions --partitions 1000 10000 50000
    python bench/limits.py empty

Prints a table and writes the JSON to bench/results/limits-<time>.json (bench/results is gitignored).
Never asserted by tests: figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)

from harness.brokerproc import BrokerProcess, free_port, moldau_command  # noqa: E402

# ApiVersions v0, correlation id 1, client id "bench"
_APIVERSIONS = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
API_VERSIONS_FRAME = struct.pack(">i", len(_APIVERSIONS)) + _APIVERSIONS


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _recv_frame(s: socket.socket) -> None:
    need, got = 4, b""
    while len(got) < need:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        got += chunk
        if len(got) >= 4 and need == 4:
            need = 4 + struct.unpack(">i", got[:4])[0]


def bench_connections(kind: str, n: int, block: int = 500) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-conn-{kind}-") as tmp:
        b = BrokerProcess(kind, Path(tmp) / "data")
        b.start()
        try:
            time.sleep(0.5)
            base = rss_kib(b.pid)  # type: ignore[arg-type]
            socks: list[socket.socket] = []
            rates: list[float] = []
            t_all = t_block = time.perf_counter()
            for i in range(n):
                s = socket.create_connection((b.host, b.port))
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(API_VERSIONS_FRAME)
                _recv_frame(s)
                socks.append(s)
                if (i + 1) % block == 0:
                    now = time.perf_counter()
                    rates.append(block / (now - t_block))
                    t_block = now
            total = time.perf_counter() - t_all
            time.sleep(0.5)
            rss = rss_kib(b.pid)  # type: ignore[arg-type]
            for s in socks:
                s.close()
        finally:
            b.close()
    return {"broker": kind, "connections": n, "seconds": round(total, 3), "per_second": round(n / total, 1),
            "per_second_by_block": [round(r, 1) for r in rates], "rss_base_kib": base, "rss_kib": rss,
            "rss_per_connection_kib": round((rss - base) / n, 2)}


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 600.0) -> float:
    """Seconds until ``port`` accepts and answers ApiVersions."""
    t0 = time.perf_counter()
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(API_VERSIONS_FRAME)
                _recv_frame(s)
                return time.perf_counter() - t0
        except OSError:
            time.sleep(0.005)
    raise TimeoutError("broker not ready")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (from /proc): a figure the machine's load does not
    inflate, unlike wall time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LAST_START_CPU = [0.0]


def _start(data: Path, port: int, extra: list[str] | None = None) -> tuple[subprocess.Popen[bytes], float]:
    cmd = moldau_command() + ["broker", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data),
                              "--set", "auto.create.topics.enable=false"] + (extra or [])
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measured with a warm bytecode cache
    t0 = time.perf_counter()
    quiet = subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdin=quiet, stdout=quiet, stderr=quiet, start_new_session=True, env=env)
    _wait_port(port, proc)
    wall = time.perf_counter() - t0
    LAST_START_CPU[0] = cpu_s(proc.pid)
    return proc, wall


def _stop(proc: subprocess.Popen[bytes]) -> float:
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait(600)
    return time.perf_counter() - t0


def _kill9(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)


def _populate(bootstrap: str, partitions: int, per_topic: int = 100) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"t{i:05d}" for i in range(max(1, partitions // per_topic))]
    for i in range(0, len(topics), 20):
        futs = admin.create_topics([NewTopic(t, num_partitions=per_topic, replication_factor=1)
                                    for t in topics[i:i + 20]], request_timeout=600)
        for f in futs.values():
            f.result(600)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": 1})
    for t in topics:
        for part in range(per_topic):
            while True:
                try:
                    p.produce(t, b"x" * 100, partition=part)
                    break
                except BufferError:
                    p.poll(0.05)
        p.poll(0)
    p.flush(600)


def bench_partitions(n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-parts-{n}-") as tmp:
        data = Path(tmp) / "data"
        port = free_port()
        proc, _ = _start(data, port)
        t0 = time.perf_counter()
        _populate(f"127.0.0.1:{port}", n)
        populate = time.perf_counter() - t0
        first_stop = _stop(proc)
        proc, clean_start = _start(data, port)
        clean_cpu = LAST_START_CPU[0]
        clean_stop = _stop(proc)
        proc, _ = _start(data, port)
        _kill9(proc)
        proc, crash_start = _start(data, port)
        crash_cpu = LAST_START_CPU[0]
        _stop(proc)
    return {"partitions": n, "populate_s": round(populate, 2), "first_stop_s": round(first_stop, 3),
            "start_after_clean_stop_s": round(clean_start, 3),
            "start_after_clean_stop_cpu_s": round(clean_cpu, 2),
            "clean_stop_s": round(clean_stop, 3), "start_after_kill9_s": round(crash_start, 3),
            "start_after_kill9_cpu_s": round(crash_cpu, 2), "loadavg": os.getloadavg()[0]}


def bench_empty(repeat: int = 5) -> dict[str, Any]:
    times, cpus = [], []
    with tempfile.TemporaryDirectory(prefix="bench-empty-") as tmp:
        data = Path(tmp) / "data"
        for _ in range(repeat + 1):  # the first run warms the bytecode cache and creates the data dir
            port = free_port()
            proc, t = _start(data, port)
            cpus.append(LAST_START_CPU[0])
            _stop(proc)
            times.append(t)
    runs = times[1:]
    return {"runs_s": [round(t, 3) for t in runs], "median_s": round(statistics.median(runs), 3),
            "cpu_median_s": round(statistics.median(cpus[1:]), 3), "loadavg": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", help="connections, partitions and/or empty (default: everything)")
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--partitions", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--only", choices=["moldau", "tansu"], help="connections: one broker only")
    args = ap.parse_args()
    args.what = args.what or ["connections", "partitions", "empty"]
    unknown = set(args.what) - {"connections", "partitions", "empty"}
    if unknown:
        ap.error(f"unknown: {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}
    if "connections" in args.what:
        kinds = [args.only] if args.only else ["moldau", "tansu"]
        out["connections"] = [bench_connections(k, args.connections) for k in kinds]
        for r in out["connections"]:
            print(f"{r['broker']:7s} {r['connections']} connections in {r['seconds']:.2f} s = "
                  f"{r['per_second']:.0f}/s (per 500: {r['per_second_by_block']}), "
                  f"RSS {r['rss_per_connection_kib']:.1f} KiB per connection", flush=True)
    if "partitions" in args.what:
        out["partitions"] = []
        for n in args.partitions:
            r = bench_partitions(n)
            out["partitions"].append(r)
            print(f"{n:6d} partitions: start after clean stop {r['start_after_clean_stop_s']:.2f} s "
                  f"(CPU {r['start_after_clean_stop_cpu_s']:.2f} s), after kill -9 "
                  f"{r['start_after_kill9_s']:.2f} s "
                  f"(CPU {r['start_after_kill9_cpu_s']:.2f} s), clean stop {r['clean_stop_s']:.2f} s "
                  f"(first stop {r['first_stop_s']:.2f} s, populate {r['populate_s']:.1f} s, load average "
                  f"{r['loadavg']:.1f})", flush=True)
    if "empty" in args.what:
        out["empty"] = bench_empty()
        e = out["empty"]
        print(f"empty broker listening: median {e['median_s']:.3f} s of {e['runs_s']} (CPU median "
              f"{e['cpu_median_s']:.3f} s, load average {e['loadavg']:.1f})")
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    path = results / f"limits-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""EmbeddedBroker start/stop cycles: start cost and what each cycle leaves behind (threads, file
descriptors, resident memory, child processes, RAM directories), per shape (thread or process) and storage
(memory or disk).

    python bench/embedded_broker.py                 # 50 cycles of each of the four modes
    python bench/embedded_broker.py --cycles 10 --modes thread-memory,process-disk
    python bench/embedded_broker.py --first-start 11               # the plugin's session start, 11 sessions
    python bench/embedded_broker.py --first-start 11 --no-bytecode # ... with no cached bytecode of moldau

``--first-start N``: what a project's first test pays, the issue's measure: N fresh pytest sessions, each one
test using ``moldau_broker`` (in-memory, thread), run with ``-v``; the total the plugin prints (importing
moldau's broker modules and the client, then the broker's start) is collected, and the median, worst and
the load average are printed. By default moldau's bytecode is cached (as after ``pip install``; a first
session writes the caches and is not counted); ``--no-bytecode`` runs a copy of the package without
``__pycache__`` and with ``PYTHONDONTWRITEBYTECODE=1``, so every session compiles moldau's modules.

Each cycle: start, create a topic, produce 10 records with moldau's producer, read them back
(``expect_records``), stop. Two warm-up cycles first (imports, the process-wide checkpoint writer thread,
allocator arenas), then the baseline is taken. Prints one JSON object per mode, then a table. tests/testing
runs the same measurement with fewer cycles and asserts that nothing grows.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

MODES = ("thread-memory", "thread-disk", "process-memory", "process-disk")


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def child_pids() -> int:
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return len(f.read().split())
    except OSError:
        return 0


def ram_dirs() -> int:
    from moldau.broker.memory import ram_parent

    return sum(1 for n in os.listdir(ram_parent()) if n.startswith("moldau-memory-"))


@dataclass
class CycleStats:
    mode: str
    cycles: int
    start_median_s: float
    start_p95_s: float
    start_max_s: float
    cycle_median_s: float
    threads_before: int
    threads_after: int
    fds_before: int
    fds_after: int
    rss_before_mib: float
    rss_after_mib: float
    rss_growth_mib: float
    children_before: int
    children_after: int
    ram_dirs_before: int
    ram_dirs_after: int


def one_cycle(mode: str) -> tuple[float, float]:
    from moldau.client import Producer
    from moldau.testing import EmbeddedBroker

    shape, storage = mode.split("-")
    t0 = time.perf_counter()
    with EmbeddedBroker(process=shape == "process", memory=storage == "memory") as broker:
        assert broker.start_seconds is not None
        start = broker.start_seconds
        topic = broker.create_topic("cycle", 1)
        with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
            for i in range(10):
                p.send(topic, b"v%d" % i)
            p.flush()
        assert len(broker.expect_records(topic, 10, timeout=30)) == 10
    return start, time.perf_counter() - t0


def measure(mode: str, cycles: int, warmup: int = 2) -> CycleStats:
    for _ in range(warmup):
        one_cycle(mode)
    gc.collect()
    threads0, fds0, rss0, dirs0 = threading.active_count(), open_fds(), rss_bytes(), ram_dirs()
    children0 = child_pids()  # a test session's own brokers and JVMs are children too
    starts: list[float] = []
    totals: list[float] = []
    for _ in range(cycles):
        s, t = one_cycle(mode)
        starts.append(s)
        totals.append(t)
    gc.collect()
    deadline = time.monotonic() + 5  # a stopped thread may take a moment to be joined
    while threading.active_count() > threads0 and time.monotonic() < deadline:
        time.sleep(0.05)
    rss1 = rss_bytes()
    starts_sorted = sorted(starts)
    return CycleStats(
        mode=mode, cycles=cycles,
        start_median_s=round(statistics.median(starts), 4),
        start_p95_s=round(starts_sorted[max(0, int(len(starts) * 0.95) - 1)], 4),
        start_max_s=round(starts_sorted[-1], 4),
        cycle_median_s=round(statistics.median(totals), 4),
        threads_before=threads0, threads_after=threading.active_count(),
        fds_before=fds0, fds_after=open_fds(),
        rss_before_mib=round(rss0 / 2**20, 1), rss_after_mib=round(rss1 / 2**20, 1),
        rss_growth_mib=round((rss1 - rss0) / 2**20, 1),
        children_before=children0, children_after=child_pids(),
        ram_dirs_before=dirs0, ram_dirs_after=ram_dirs(),
    )


FIRST_TEST = "def test_first(moldau_broker):\n    assert moldau_broker.bootstrap_servers\n"
_STARTED = re.compile(r"moldau: broker \(thread/memory\) at \S+ started in ([0-9.]+) s")


def first_starts(sessions: int, bytecode: bool = True) -> dict[str, object]:
    """The plugin's session start (import + start, as printed with -v) over ``sessions`` fresh pytest runs."""
    import moldau

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    with tempfile.TemporaryDirectory(prefix="bench-first-start-") as tmp:
        if bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            src = os.path.join(tmp, "src")
            shutil.copytree(os.path.dirname(moldau.__file__), os.path.join(src, "moldau"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        project = os.path.join(tmp, "project")
        os.mkdir(project)
        with open(os.path.join(project, "test_first.py"), "w") as f:
            f.write(FIRST_TEST)
        totals: list[float] = []
        for i in range(sessions + int(bytecode)):  # with bytecode: the first session writes the caches
            res = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"],
                                 cwd=project, env=env, capture_output=True, text=True, timeout=300)
            found = _STARTED.search(res.stdout)
            if found is None:
                raise RuntimeError(f"no start line in the session's output:\n{res.stdout[-3000:]}")
            if i or not bytecode:
                totals.append(float(found.group(1)))
    return {"first_start": "pytest -v, thread/memory", "bytecode_cached": bytecode, "sessions": sessions,
            "median_s": round(statistics.median(totals), 3), "min_s": min(totals), "max_s": max(totals),
            "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=50)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--first-start", type=int, metavar="N", default=0,
                    help="measure the pytest plugin's session start over N fresh sessions instead")
    ap.add_argument("--no-bytecode", action="store_true", help="with --first-start: no cached bytecode")
    args = ap.parse_args(argv)
    if args.first_start:
        print(json.dumps(first_starts(args.first_start, bytecode=not args.no_bytecode)))
        return 0
    if not os.environ.get("MOLDAU_MEMORY_DIR"):  # count only this run's RAM dirs, not other brokers'
        import tempfile

        from moldau.broker.memory import ram_parent

        os.environ["MOLDAU_MEMORY_DIR"] = tempfile.mkdtemp(prefix="bench-ram-", dir=ram_parent())
    results = []
    for mode in args.modes.split(","):
        st = measure(mode, args.cycles)
        results.append(st)
        print(json.dumps(asdict(st)), flush=True)
    cols = ["mode", "cycles", "start_median_s", "start_p95_s", "threads_before", "threads_after",
            "fds_before", "fds_after", "rss_before_mib", "rss_after_mib", "children_after", "ram_dirs_after"]
    print()
    print("  ".join(cols))
    for st in results:
        d = asdict(st)
        print("  ".join(str(d[c]).rjust(len(c)) for c in cols))
    print(f"\nload average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

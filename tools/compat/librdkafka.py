"""Run librdkafka's own integration test suite against a moldau broker and write a table of the results.

Not part of CI (the whole suite takes about half an hour). Steps, each skippable:

1. ``--fetch DIR``: the librdkafka source package of Debian bookworm (``apt-get source librdkafka``, which
   carries librdkafka's ``tests/`` directory), fetched with a private apt configuration under DIR (a
   ``deb-src`` line for bookworm; the machine's apt sources are not touched). Or ``--source DIR``: an
   unpacked librdkafka source tree (e.g. a git checkout of confluentinc/librdkafka).
2. Build: ``./configure --disable-gssapi --disable-zstd``, ``make libs``, ``make -C tests test-runner``
   (skipped when ``tests/test-runner`` exists).
3. Start one moldau broker (this interpreter's moldau) on a free loopback port with librdkafka's default
   test scenario's settings: ``num.partitions=4``, an authorizer that allows everything without ACLs (as the
   suite's own trivup cluster has), and run every test meant for an external broker: local tests
   (``-L``), ``*_mock*`` tests and manual ones are left out. Tests run ``--chunk`` at a time (default 1,
   so a hung test is cut off by ``--timeout`` alone), ``-p`` of them in parallel.
4. Write a Markdown table (test, result, seconds, first failure line) to ``--out`` and print it.

Example::

    .venv/bin/python tools/compat/librdkafka.py --fetch /tmp/rdk --out docs/compat-librdkafka.md
    .venv/bin/python tools/compat/librdkafka.py --source /tmp/rdk/librdkafka-2.0.2 --tests 0081,0092 \\
        --parallel 2 --repeat 3
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("compat.librdkafka")

DEB_SRC = "deb-src http://deb.debian.org/debian bookworm main\n"
_TEST_DECL = re.compile(r"^\s*_TEST\((\d{4}_\w+)\s*,\s*([^,)]*)", re.MULTILINE)
_RESULT = re.compile(r"=+ Test (\d{4}_\w+) (PASSED|FAILED|SKIPPED) =+")
_SKIP = re.compile(r"(\d{4}_\w+).*?SKIPPING: (.*)")
_FAIL_LINE = re.compile(r"(Test assertion failed|TEST FAILURE|FAIL:|: Failed|Test failed).*")


@dataclass(slots=True)
class Outcome:
    test: str
    result: str = "NOT RUN"
    seconds: float = 0.0
    detail: str = ""
    runs: list[str] = field(default_factory=list)


def fetch(workdir: Path) -> Path:
    """``apt-get source librdkafka`` (bookworm) into ``workdir`` with a private apt configuration."""
    workdir.mkdir(parents=True, exist_ok=True)
    apt = workdir / "apt"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(DEB_SRC)
    opts = ["-o", f"Dir::Etc::SourceList={apt / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={apt / 'lists'}"]
    subprocess.run(["apt-get", *opts, "update"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", *opts, "source", "librdkafka"], check=True, cwd=workdir)
    trees = sorted(p for p in workdir.glob("librdkafka-*") if (p / "tests" / "test.c").is_file())
    if not trees:
        raise SystemExit(f"compat: apt-get source left no librdkafka-*/tests/test.c in {workdir}")
    return trees[-1]


def build(src: Path) -> Path:
    runner = src / "tests" / "test-runner"
    if runner.exists():
        return runner
    if not (src / "config.cache").exists():
        subprocess.run(["./configure", "--disable-gssapi", "--disable-zstd"], cwd=src, check=True,
                       stdout=subprocess.DEVNULL)
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    subprocess.run(["make", "-j", jobs, "libs"], cwd=src, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["make", "-j", jobs, "test-runner"], cwd=src / "tests", check=True, stdout=subprocess.DEVNULL)
    return runner


def external_broker_tests(src: Path) -> tuple[list[str], dict[str, str]]:
    """(tests to run, {test: why it is left out}) from the test table in tests/test.c."""
    text = (src / "tests" / "test.c").read_text(errors="replace")
    run, left_out = [], {}
    for name, flags in _TEST_DECL.findall(text):
        if "TEST_F_LOCAL" in flags:
            left_out[name] = "local test (no broker)"
        elif "_mock" in name:
            left_out[name] = "mock-cluster test (no broker)"
        elif "TEST_F_MANUAL" in flags:
            left_out[name] = "manual test"
        else:
            run.append(name)
    return run, left_out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(workdir: Path, port: int) -> subprocess.Popen:
    data = workdir / "broker-data"
    if data.exists():
        shutil.rmtree(data)
    settings = {
        "num.partitions": "4",
        # librdkafka's test cluster has an authorizer (0081's ACL subtests need one); nothing is denied
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": "User:ANONYMOUS",
    }
    cmd = [sys.executable, "-m", "moldau", "broker", "--host", "127.0.0.1", "--port", str(port),
           "--data-dir", str(data), "--log-level", "WARNING"]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    logf = open(workdir / "broker.log", "ab")  # noqa: SIM115 - open for the broker's lifetime
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"compat: the broker exited; see {workdir / 'broker.log'}") from None
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("compat: the broker did not listen within 30 s")


def run_chunk(runner: Path, tests: list[str], port: int, kafka_version: str, parallel: int, timeout: float,
              logdir: Path) -> dict[str, Outcome]:
    tdir = runner.parent
    conf = logdir / "test.conf"
    conf.write_text(f"metadata.broker.list=127.0.0.1:{port}\ntest.timeout.multiplier=2\n")
    src = tdir.parent
    libs = os.pathsep.join(filter(None, [str(src / "src"), str(src / "src-cpp"), os.environ.get("LD_LIBRARY_PATH")]))
    env = dict(os.environ, TESTS=",".join(t[:4] for t in tests), TEST_KAFKA_VERSION=kafka_version,
               RDKAFKA_TEST_CONF=str(conf), LD_LIBRARY_PATH=libs)
    env.pop("KAFKA_PATH", None)
    t0 = time.monotonic()
    try:
        r = subprocess.run([str(runner), "-L", f"-p{parallel}"], cwd=tdir, env=env, capture_output=True,
                           text=True, errors="replace", timeout=timeout, check=False)
        out, timed_out = r.stdout + r.stderr, False
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        timed_out = True
    elapsed = time.monotonic() - t0
    (logdir / f"{tests[0]}.log").write_text(out)
    results = {t: Outcome(t) for t in tests}
    for name, state in _RESULT.findall(out):
        if name in results:
            results[name].result = state
    for name, why in _SKIP.findall(out):
        if name in results and not results[name].detail:
            results[name].detail = why.strip()
    for o in results.values():
        o.seconds = elapsed / len(tests)
        if timed_out and o.result == "NOT RUN":
            o.result, o.detail = "TIMEOUT", f"cut off after {timeout:.0f} s"
        if o.result == "NOT RUN" and not o.detail:
            tail = [ln.strip() for ln in out.splitlines() if ln.strip()]
            o.detail = (tail[-1] if tail else "no output")[:200]
        if o.result == "FAILED" and not o.detail:
            lines = [ln.strip() for ln in out.splitlines() if _FAIL_LINE.search(ln)]
            o.detail = (lines[0] if lines else "see the log")[:200]
    return results


def table(outcomes: list[Outcome], left_out: dict[str, str]) -> str:
    rows = ["| test | result | s | detail |", "| --- | --- | --- | --- |"]
    for o in outcomes:
        result = o.result if len(o.runs) <= 1 else f"{o.result} ({', '.join(o.runs)})"
        detail = o.detail.replace("|", "\\|")
        rows.append(f"| {o.test} | {result} | {o.seconds:.0f} | {detail} |")
    for name, why in sorted(left_out.items()):
        rows.append(f"| {name} | left out | | {why} |")
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.result] = counts.get(o.result, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return f"{summary}; {len(left_out)} left out\n\n" + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="librdkafka's integration tests against a moldau broker")
    src_group = ap.add_mutually_exclusive_group(required=True)
    src_group.add_argument("--source", type=Path, help="an unpacked librdkafka source tree")
    src_group.add_argument("--fetch", type=Path, help="fetch Debian's librdkafka source package into DIR")
    ap.add_argument("--tests", help="comma-separated test numbers or names (default: every external-broker test)")
    ap.add_argument("--skip", default="", help="comma-separated test numbers to leave out")
    ap.add_argument("--chunk", type=int, default=1, help="tests per test-runner invocation")
    ap.add_argument("--parallel", type=int, default=1, help="test-runner -p (tests at a time in a chunk)")
    ap.add_argument("--repeat", type=int, default=1, help="run each chunk this many times")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per chunk")
    ap.add_argument("--kafka-version", default="3.9.0", help="TEST_KAFKA_VERSION")
    ap.add_argument("--workdir", type=Path, help="broker data and logs (default: a temp dir)")
    ap.add_argument("--out", type=Path, help="write the Markdown table here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    src = fetch(args.fetch) if args.fetch else args.source
    runner = build(src)
    tests, left_out = external_broker_tests(src)
    if args.tests:
        wanted = {w.strip()[:4] for w in args.tests.split(",") if w.strip()}
        tests = [t for t in tests if t[:4] in wanted]
    skip = {w.strip()[:4] for w in args.skip.split(",") if w.strip()}
    tests = [t for t in tests if t[:4] not in skip]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="compat-librdkafka-"))
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    broker = start_broker(workdir, port)
    outcomes: dict[str, Outcome] = {}
    try:
        for i in range(0, len(tests), args.chunk):
            chunk = tests[i:i + args.chunk]
            for rep in range(args.repeat):
                if broker.poll() is not None:
                    log.error("the broker died (exit %s); restarting it", broker.returncode)
                    broker = start_broker(workdir, port)
                res = run_chunk(runner, chunk, port, args.kafka_version, args.parallel, args.timeout, workdir)
                for name, o in res.items():
                    prev = outcomes.setdefault(name, Outcome(name))
                    prev.runs.append(o.result)
                    if prev.result in ("NOT RUN", "PASSED", "SKIPPED") or o.result in ("FAILED", "TIMEOUT"):
                        prev.result, prev.detail = o.result, o.detail or prev.detail
                    prev.seconds += o.seconds
                log.info("%s (run %d): %s", ",".join(chunk), rep + 1,
                         ", ".join(f"{n} {o.result}" for n, o in res.items()))
    finally:
        broker.terminate()
        try:
            broker.wait(20)
        except subprocess.TimeoutExpired:
            broker.kill()
    text = table([outcomes[t] for t in tests if t in outcomes], left_out if not args.tests else {})
    header = (f"librdkafka {src.name} test suite against moldau (one broker, num.partitions=4), "
              f"TEST_KAFKA_VERSION={args.kafka_version}, -p{args.parallel}, chunk {args.chunk}, "
              f"repeat {args.repeat}: ")
    print(header + text)
    if args.out:
        args.out.write_text(header + text)
    return 0 if all(o.result in ("PASSED", "SKIPPED") for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

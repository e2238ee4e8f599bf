"""Run librdkafka's own integration test suite against a moldau broker and write a table of the results.

Not part of CI (the whole suite takes about half an hour). Steps, each skippable:

1. ``--fetch DIR``: the librdkafka source package of Debian bookworm (``apt-get source librdkafka``, which
   carries librdkafka's ``tests/`` directory), fetched with a private apt configuration under DIR (a
   ``deb-src`` line for bookworm; the machine's apt sources are not touched). Or ``--source DIR``: an
   unpacked librdkafka source tree (e.g. a git checkout of confluentinc/librdkafka).
2. Build: ``./configure --disable-gssapi --disable-zstd``, ``make libs``, ``make -C tests test-runner``
   (skipped when ``tests/test-runner`` exists; ``--rebuild`` forces it). RapidJSON (the statistics tests
   0053, 0098, 0101 and 0110 need it) is taken from the system when ``/usr/include/rapidjson`` exists, else
   Debian's ``rapidjson-dev`` is fetched with ``apt-get download`` and unpacked under the source tree (the
   machine is not changed); ``--no-rapidjson`` builds without it.
3. Start one moldau broker (this interpreter's moldau) on a free loopback port, or with ``--cluster 3`` a
   ZooKeeper and three brokers (the integration tests' ``ClusterProcess``, as ``moldau cluster up``), with
   librdkafka's default test scenario's settings: ``num.partitions=4``, Kafka's
   ``group.initial.rebalance.delay.ms`` of 3000 (moldau's default is 0), an authorizer that allows everything
   without ACLs (as the suite's own trivup cluster has); on the cluster also trivup's
   ``default.replication.factor`` (``min(brokers, 3)``), Kafka's defaults for the internal topics (factor 3,
   ``transaction.state.log.min.isr`` 2) and ``min.insync.replicas`` (1), ``broker.rack=RACK<id>`` and the
   rack-aware replica selector as trivup sets them. Then run every test meant for an external broker: local
   tests (``-L``), ``*_mock*`` tests and manual ones are left out. Tests run ``--chunk`` at a time (default 1,
   so a hung test is cut off by ``--timeout`` alone), ``-p`` of them in parallel.
4. Write a Markdown table (test, result, seconds, first failure line) to ``--out`` and print it.

Example::

    .venv/bin/python tools/compat/librdkafka.py --fetch /tmp/rdk --out docs/compat-librdkafka.md
    .venv/bin/python tools/compat/librdkafka.py --source /tmp/rdk/librdkafka-2.0.2 --tests 0081,0092 \\
        --parallel 2 --repeat 3
    .venv/bin/python tools/compat/librdkafka.py --source /tmp/rdk/librdkafka-2.0.2 --cluster 3 \\
        --chunk 6 --parallel 2 --out /tmp/rdk/cluster.md
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("compat.librdkafka")

DEB_SRC = "deb-src http://deb.debian.org/debian bookworm main\n"
_TEST_DECL = re.compile(r"^\s*_TEST\((\d{4}_\w+)\s*,", re.MULTILINE)
_SCENARIO = re.compile(r'\.scenario\s*=\s*"([^"]+)"')
_RESULT = re.compile(r"=+ Test (\d{4}_\w+) (PASSED|FAILED|SKIPPED) =+")
_FAILED_AT = re.compile(r'### Test "(\d{4}_\w+)[^"]*" failed at ([^\n]*?) at [^\n]*###\n([^\n]*)')
_SKIP = re.compile(r"\[(\d{4}_\w+)\s*/[^\]]*\] WARN: SKIPPING TEST: (.*)")
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


def rapidjson_include(src: Path) -> Path | None:
    """A folder holding ``rapidjson/schema.h``: the system's, else Debian's rapidjson-dev unpacked under
    ``src`` (``apt-get download`` + ``dpkg-deb -x``; nothing is installed). None when neither works."""
    if Path("/usr/include/rapidjson/schema.h").is_file():
        return Path("/usr/include")
    local = src / "rapidjson-dev"
    if (local / "usr" / "include" / "rapidjson" / "schema.h").is_file():
        return local / "usr" / "include"
    try:
        local.mkdir(exist_ok=True)
        subprocess.run(["apt-get", "download", "rapidjson-dev"], cwd=local, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deb = next(local.glob("rapidjson-dev_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(local)], check=True)
    except (OSError, subprocess.CalledProcessError, StopIteration) as exc:
        log.warning("RapidJSON not available (%s): 0053, 0098, 0101 and 0110 will be skipped", exc)
        return None
    return local / "usr" / "include"


def build(src: Path, *, rebuild: bool = False, rapidjson: bool = True) -> Path:
    runner = src / "tests" / "test-runner"
    if runner.exists() and not rebuild:
        return runner
    env = dict(os.environ)
    include = rapidjson_include(src) if rapidjson else None
    if include is not None and include != Path("/usr/include"):
        # -isystem: rapidjson 1.1's headers trip g++ 12's deprecation warnings, which configure's -Werror
        # check would take for a missing library
        env["CPPFLAGS"] = f"-isystem {include} " + env.get("CPPFLAGS", "")
    if rebuild or not (src / "config.cache").exists():
        (src / "config.cache").unlink(missing_ok=True)
        subprocess.run(["./configure", "--disable-gssapi", "--disable-zstd"], cwd=src, check=True, env=env,
                       stdout=subprocess.DEVNULL)
    config_h = (src / "config.h").read_text(errors="replace")
    log.info("test-runner %s RapidJSON", "with" if "WITH_RAPIDJSON 1" in config_h else "without")
    runner.unlink(missing_ok=True)
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    subprocess.run(["make", "-j", jobs, "libs"], cwd=src, check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["make", "-j", jobs, "test-runner"], cwd=src / "tests", check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return runner


def external_broker_tests(src: Path) -> tuple[list[str], dict[str, str]]:
    """(tests to run, {test: why it is left out}) from the test table in tests/test.c."""
    text = (src / "tests" / "test.c").read_text(errors="replace")
    run, left_out = [], {}
    decls = list(_TEST_DECL.finditer(text))
    for i, m in enumerate(decls):
        name = m.group(1)
        decl = text[m.end():decls[i + 1].start() if i + 1 < len(decls) else len(text)]
        scenario = _SCENARIO.search(decl)
        if "TEST_F_LOCAL" in decl:
            left_out[name] = "local test (no broker)"
        elif "_mock" in name:
            left_out[name] = "mock-cluster test (no broker)"
        elif "TEST_F_MANUAL" in decl:
            left_out[name] = "manual test"
        elif "TEST_F_KNOWN_ISSUE" in decl:
            left_out[name] = "marked as a known issue in librdkafka (skipped by its runner without -k)"
        elif scenario is not None and "default" not in scenario.group(1).split(","):
            left_out[name] = f"needs test scenario {scenario.group(1)} (another broker configuration)"
        else:
            run.append(name)
    return run, left_out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# librdkafka's default test scenario (tests/scenarios/default.json) as its trivup cluster applies it
SCENARIO_SETTINGS = {
    "num.partitions": "4",
    # librdkafka's test cluster has an authorizer (0081's ACL subtests need one); nothing is denied
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
    # trivup's brokers keep Kafka's default of 3 s (moldau's default is 0): tests that start several consumers
    # of one group together (0102's static members) expect them in the group's first generation
    "group.initial.rebalance.delay.ms": "3000",
}


class SingleBroker:
    """One moldau broker on a loopback port (``settings``: broker configs, librdkafka's scenario's by
    default; ``advertise``: set ``advertised.listeners`` explicitly)."""

    def __init__(self, workdir: Path, settings: dict[str, str] | None = None,
                 advertise: bool = False) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.settings = dict(SCENARIO_SETTINGS if settings is None else settings)
        if advertise:
            self.settings["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        data = self.workdir / "broker-data"
        if data.exists():
            shutil.rmtree(data)
        cmd = [sys.executable, "-m", "moldau", "broker", "--host", "127.0.0.1", "--port", str(self.port),
               "--data-dir", str(data), "--log-level", "WARNING"]
        for k, v in self.settings.items():
            cmd += ["--set", f"{k}={v}"]
        with open(self.workdir / "broker.log", "ab") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    why = f"compat: the broker exited; see {self.workdir / 'broker.log'}"
                    raise SystemExit(why) from None
                time.sleep(0.1)
        self.stop()
        raise SystemExit("compat: the broker did not listen within 30 s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Cluster:
    """ZooKeeper and three moldau brokers on loopback: the integration tests' cluster launcher
    (tests/harness's ``harness.brokerproc.ClusterProcess`` over ``moldau.broker.cluster.local``, as ``moldau
    cluster up`` starts them), which waits until every broker sees all three and a controller."""

    def __init__(self, workdir: Path, settings: dict[str, str] | None = None, racks: bool = False,
                 advertise: bool = False) -> None:
        from moldau.broker.cluster.local import LocalCluster

        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # tests/harness
        from harness.brokerproc import ClusterProcess

        folder = workdir / "cluster"
        if folder.exists():
            shutil.rmtree(folder)
        settings = dict(SCENARIO_SETTINGS if settings is None else settings)
        settings.update({"default.replication.factor": "3", "offsets.topic.replication.factor": "3",
                         "transaction.state.log.replication.factor": "3",
                         "transaction.state.log.min.isr": "2"})
        self.proc = ClusterProcess(folder, settings=settings, log_dir=workdir)
        cluster = LocalCluster(str(folder), 3, broker_configs=[f"{k}={v}" for k, v in settings.items()])
        for b in cluster.brokers:
            if advertise:
                b.extra.append(f"advertised.listeners=PLAINTEXT://{b.address}")
            if racks:
                # as trivup configures brokers of Kafka 2.4+ (fetch-from-follower, KIP-392; 0101 needs it)
                b.extra += [f"broker.rack=RACK{b.node_id}", "replica.selector.class="
                            "org.apache.kafka.common.replica.RackAwareReplicaSelector"]
        self.proc.cluster = cluster  # started as it is by ClusterProcess.start

    @property
    def bootstrap(self) -> str:
        return str(self.proc.bootstrap)

    def alive(self) -> bool:
        return not self.proc.starts or all(b.running for b in self.proc.cluster.brokers)

    def start(self) -> None:
        for b in self.proc.cluster.brokers:
            if self.proc.starts and not b.running:
                b.start()
        if self.proc.starts:
            for b in self.proc.cluster.brokers:
                b.wait_listening(60)
            self.proc._wait_formed(90)  # noqa: SLF001 - the launcher's own readiness check
        else:
            self.proc.start(90)

    def stop(self) -> None:
        self.proc.stop()


def run_chunk(runner: Path, tests: list[str], bootstrap: str, kafka_version: str, parallel: int,
              timeout: float, logdir: Path) -> dict[str, Outcome]:
    tdir = runner.parent
    conf = logdir / "test.conf"
    conf.write_text(f"metadata.broker.list={bootstrap}\ntest.timeout.multiplier=2\n")
    src = tdir.parent
    libs = os.pathsep.join(filter(None, [str(src / "src"), str(src / "src-cpp"),
                                         os.environ.get("LD_LIBRARY_PATH")]))
    env = dict(os.environ, TESTS=",".join(t[:4] for t in tests), TEST_KAFKA_VERSION=kafka_version,
               RDKAFKA_TEST_CONF=str(conf), LD_LIBRARY_PATH=libs)
    env.pop("KAFKA_PATH", None)
    t0 = time.monotonic()
    try:
        r = subprocess.run([str(runner), "-L", f"-p{parallel}"], cwd=tdir, env=env, capture_output=True,
                           text=True, errors="replace", timeout=timeout, check=False)
        out, timed_out = r.stdout + r.stderr, False
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        out = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        timed_out = True
    elapsed = time.monotonic() - t0
    (logdir / f"{tests[0]}.log").write_text(out)
    results = parse_output(out, tests)
    for o in results.values():
        o.seconds = elapsed / len(tests)
        if timed_out and o.result == "NOT RUN":
            o.result, o.detail = "TIMEOUT", f"cut off after {timeout:.0f} s"
    return results


def parse_output(out: str, tests: list[str]) -> dict[str, Outcome]:
    """Each test's result and first failure reason from a test-runner output."""
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    results = {t: Outcome(t) for t in tests}
    for name, where, why in _FAILED_AT.findall(out):
        if name in results and results[name].result != "FAILED":
            results[name].result, results[name].detail = "FAILED", f"{why.strip()} ({where.strip()})"[:240]
    for name, why in _SKIP.findall(out):
        if name in results and not results[name].detail:
            results[name].detail = why.strip()
    for name, state in _RESULT.findall(out):
        if name in results:
            results[name].result = state
    for o in results.values():
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
        seconds = f"{o.seconds:.0f}" if o.seconds else ""
        rows.append(f"| {o.test} | {result} | {seconds} | {detail} |")
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
    ap.add_argument("--tests",
                    help="comma-separated test numbers or names (default: every external-broker test)")
    ap.add_argument("--skip", default="", help="comma-separated test numbers to leave out")
    ap.add_argument("--chunk", type=int, default=1, help="tests per test-runner invocation")
    ap.add_argument("--parallel", type=int, default=1, help="test-runner -p (tests at a time in a chunk)")
    ap.add_argument("--repeat", type=int, default=1, help="run each chunk this many times")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per chunk")
    ap.add_argument("--kafka-version", default="3.9.0", help="TEST_KAFKA_VERSION")
    ap.add_argument("--workdir", type=Path, help="broker data and logs (default: a temp dir)")
    ap.add_argument("--out", type=Path, help="write the Markdown table here")
    ap.add_argument("--cluster", type=int, default=0, choices=(0, 3), metavar="3",
                    help="run against ZooKeeper and three moldau brokers instead of one broker")
    ap.add_argument("--rebuild", action="store_true", help="configure and build the test-runner again")
    ap.add_argument("--no-rapidjson", action="store_true", help="build without RapidJSON")
    ap.add_argument("--report-only", action="store_true",
                    help="no build, no run: the table from the chunk logs kept in --workdir")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    # a SIGTERM (timeout, kill) still stops the brokers this run started: the finally blocks run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    src = fetch(args.fetch) if args.fetch else args.source
    tests, left_out = external_broker_tests(src)
    if args.tests:
        wanted = {w.strip()[:4] for w in args.tests.split(",") if w.strip()}
        tests = [t for t in tests if t[:4] in wanted]
    skip = {w.strip()[:4] for w in args.skip.split(",") if w.strip()}
    tests = [t for t in tests if t[:4] not in skip]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="compat-librdkafka-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        found: dict[str, Outcome] = {}
        for f in sorted(workdir.glob("*.log")):
            if f.name != "broker.log":
                found.update({k: v for k, v in parse_output(f.read_text(errors="replace"), tests).items()
                              if v.result != "NOT RUN" or k not in found})
        text = table([found.get(t, Outcome(t)) for t in tests], left_out if not args.tests else {})
        print(text)
        if args.out:
            args.out.write_text(text)
        return 0
    runner = build(src, rebuild=args.rebuild, rapidjson=not args.no_rapidjson)
    broker: SingleBroker | Cluster = Cluster(workdir, racks=True) if args.cluster else SingleBroker(workdir)
    broker.start()
    outcomes: dict[str, Outcome] = {}
    try:
        for i in range(0, len(tests), args.chunk):
            chunk = tests[i:i + args.chunk]
            for rep in range(args.repeat):
                if not broker.alive():
                    log.error("a broker died; restarting it")
                    broker.start()
                res = run_chunk(runner, chunk, broker.bootstrap, args.kafka_version, args.parallel,
                                args.timeout, workdir)
                for name, o in res.items():
                    prev = outcomes.setdefault(name, Outcome(name))
                    prev.runs.append(o.result)
                    if prev.result in ("NOT RUN", "PASSED", "SKIPPED") or o.result in ("FAILED", "TIMEOUT"):
                        prev.result, prev.detail = o.result, o.detail or prev.detail
                    prev.seconds += o.seconds
                log.info("%s (run %d): %s", ",".join(chunk), rep + 1,
                         ", ".join(f"{n} {o.result}" for n, o in res.items()))
        # a failing test can abort its whole chunk (test-runner exits when threads are left behind): the
        # tests it left unrun are run once more, alone
        leftover = ([t for t in tests if outcomes.get(t, Outcome(t)).result == "NOT RUN"]
                    if args.chunk > 1 else [])
        for name in leftover:
            if not broker.alive():
                broker.start()
            res = run_chunk(runner, [name], broker.bootstrap, args.kafka_version, 1, args.timeout, workdir)
            outcomes[name] = res[name]
            outcomes[name].runs.append(res[name].result + " (alone)")
            log.info("%s (alone): %s", name, res[name].result)
    finally:
        broker.stop()
    text = table([outcomes[t] for t in tests if t in outcomes], left_out if not args.tests else {})
    where = "3 brokers and ZooKeeper" if args.cluster else "one broker"
    header = (f"librdkafka {src.name} test suite against moldau ({where}, num.partitions=4), "
              f"TEST_KAFKA_VERSION={args.kafka_version}, -p{args.parallel}, chunk {args.chunk}, "
              f"repeat {args.repeat}: ")
    print(header + text)
    if args.out:
        args.out.write_text(header + text)
    return 0 if all(o.result in ("PASSED", "SKIPPED") for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

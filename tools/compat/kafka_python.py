"""Run kafka-python's own integration tests (``test/integration``) against moldau and write a table.

kafka-python's integration fixtures spawn a Kafka distribution unless ``KAFKA_URI`` names an external broker
(``KafkaFixture(external=True)``): then every test runs against that broker unchanged. This runner starts
moldau (one broker, or with ``--cluster 3`` ZooKeeper and three brokers), points ``KAFKA_URI`` at it and runs
the suite with this interpreter's pytest. Not part of CI.

The broker gets the settings of the suite's own broker template (kafka-python's
``servers/resources/default/kafka.properties``): ``broker.id=0`` (some tests assign partitions to broker 0),
``num.partitions=4`` (the fixture's default), an authorizer that allows everything without ACLs,
``group.min.session.timeout.ms=1000`` (test_group uses 3 s sessions), ``group.initial.rebalance.delay.ms=0``,
``offsets.topic.num.partitions=2`` and an explicit ``advertised.listeners``.

``KAFKA_VERSION`` (which decides the suite's version-gated tests and expectations) is by default the version
kafka-python infers from moldau's ApiVersions answer; ``--kafka-version`` overrides it. The fixtures' check
that a Kafka distribution exists is satisfied with an empty ``KAFKA_ROOT`` folder (nothing is run from it in
external mode).

Source: a kafka-python source tree with ``test/``: a git checkout of the tag matching the installed
kafka-python, or the PyPI sdist (``pip download --no-binary :all: --no-deps kafka-python==VERSION``), which
carries ``test/`` but not ``test/__init__.py`` nor ``test/service.py``: the runner says which files are
missing; an empty ``test/__init__.py`` is created in the work copy.

Example::

    .venv/bin/python tools/compat/kafka_python.py --source /tmp/kp/kafka_python-3.0.12 --out /tmp/kp/one.md
    .venv/bin/python tools/compat/kafka_python.py --source /tmp/kp/kafka_python-3.0.12 --cluster 3
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from librdkafka import Cluster, SingleBroker  # noqa: E402 - the sibling runner's broker launchers

log = logging.getLogger("compat.kafka_python")

# kafka-python's broker template (servers/resources/default/kafka.properties), as far as moldau has the keys
SUITE_SETTINGS = {
    "num.partitions": "4",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "2",
}


@dataclass(slots=True)
class Result:
    test: str
    outcome: str
    seconds: float
    detail: str = ""


def prepare_source(src: Path, workdir: Path) -> Path:
    """A work copy of ``src`` whose ``test/`` is importable as the package ``test`` (it shadows the
    standard library's ``test`` package only when it has an ``__init__.py``)."""
    if not (src / "test" / "integration" / "conftest.py").is_file():
        raise SystemExit(f"compat: {src} has no test/integration/conftest.py (not kafka-python's source)")
    missing = [p for p in ("test/service.py",) if not (src / p).is_file()]
    if missing:
        raise SystemExit(f"compat: {src} lacks {', '.join(missing)} (the PyPI sdist leaves it out): use "
                         "a git checkout of kafka-python's release tag, or add the file from it")
    copy = workdir / "kafka-python"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    init = copy / "test" / "__init__.py"
    if not init.exists():
        log.info("test/__init__.py missing in %s: created empty in the work copy", src)
        init.write_text("")
    return copy


def inferred_version(bootstrap: str) -> str:
    """The broker version kafka-python infers from the broker's ApiVersions answer, as ``a.b.0``."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-version-probe")
    try:
        version = admin._client.check_version()  # noqa: SLF001 - kafka-python's own inference
    finally:
        admin.close()
    parts = list(version) + [0] * (3 - len(version))
    return ".".join(str(p) for p in parts[:3])


def run_suite(tree: Path, bootstrap: str, kafka_version: str, workdir: Path, timeout: float,
              select: list[str]) -> list[Result]:
    kafka_root = workdir / "no-kafka-distribution"
    kafka_root.mkdir(exist_ok=True)
    junit = workdir / "junit.xml"
    first = bootstrap.split(",")[0]
    env = dict(os.environ, KAFKA_URI=f"PLAINTEXT://{first}", KAFKA_VERSION=kafka_version,
               KAFKA_ROOT=str(kafka_root))
    env.pop("ZOOKEEPER_URI", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
           "-o", "log_level=WARNING", "-W", "ignore", "-q", "-rfEs", f"--junitxml={junit}",
           *(select or ["test/integration"])]
    log.info("KAFKA_URI=%s KAFKA_VERSION=%s: %s", env["KAFKA_URI"], kafka_version, " ".join(cmd[3:]))
    with open(workdir / "pytest.log", "w") as out:
        try:
            subprocess.run(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                           check=False)
        except subprocess.TimeoutExpired:
            log.error("the suite was cut off after %.0f s", timeout)
    if not junit.exists():
        raise SystemExit(f"compat: pytest wrote no report; see {workdir / 'pytest.log'}")
    return parse_junit(junit)


def parse_junit(path: Path) -> list[Result]:
    results = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, detail = "passed", ""
        for tag, label in (("failure", "FAILED"), ("error", "ERROR"), ("skipped", "skipped")):
            el = case.find(tag)
            if el is not None:
                outcome = label
                detail = (el.get("message") or "").splitlines()[0] if el.get("message") else ""
                break
        results.append(Result(name, outcome, float(case.get("time", "0")), detail[:220]))
    return results


def table(results: list[Result]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    rows = ["| test | result | s | detail |", "| --- | --- | --- | --- |"]
    for r in results:
        rows.append(f"| {r.test} | {r.outcome} | {r.seconds:.1f} | {r.detail.replace('|', '/')} |")
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + "\n\n" + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="kafka-python's integration tests against moldau")
    ap.add_argument("--source", type=Path, required=True, help="a kafka-python source tree with test/")
    ap.add_argument("--cluster", type=int, default=0, choices=(0, 3), metavar="3",
                    help="run against ZooKeeper and three moldau brokers instead of one broker")
    ap.add_argument("--kafka-version", help="KAFKA_VERSION (default: what kafka-python infers from moldau)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds for the whole suite")
    ap.add_argument("--workdir", type=Path, help="broker data, the work copy and logs (default: a temp dir)")
    ap.add_argument("--out", type=Path, help="write the Markdown table here")
    ap.add_argument("select", nargs="*", help="pytest node ids relative to the source tree (default: all)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    # a SIGTERM (timeout, kill) still stops the brokers this run started: the finally blocks run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.getLogger("kafka").setLevel(logging.WARNING)
    try:
        import kafka
    except ImportError:
        raise SystemExit("compat: kafka-python is not installed in this interpreter") from None

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="compat-kafka-python-"))
    workdir.mkdir(parents=True, exist_ok=True)
    tree = prepare_source(args.source.resolve(), workdir)
    if args.cluster:
        broker: SingleBroker | Cluster = Cluster(workdir, settings=SUITE_SETTINGS, advertise=True)
    else:
        broker = SingleBroker(workdir, settings=dict(SUITE_SETTINGS, **{"node.id": "0"}), advertise=True)
    broker.start()
    try:
        version = args.kafka_version or inferred_version(broker.bootstrap)
        results = run_suite(tree, broker.bootstrap, version, workdir, args.timeout, args.select)
    finally:
        broker.stop()
    where = "3 brokers and ZooKeeper" if args.cluster else "one broker"
    header = (f"kafka-python {kafka.__version__} test/integration against moldau ({where}), "
              f"KAFKA_VERSION={version}: ")
    text = header + table(results)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if all(r.outcome in ("passed", "skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The example pipeline (``examples/clickstream.py``) on a Spark standalone cluster (a master and two workers
started from pyspark's own launch classes, loopback) against a three-broker moldau cluster, through a kill -9
of the leader of one of its input partitions and a kill -9 of a Spark worker: the windowed counts in the
exactly-once Parquet sink (and in the output topic) must equal the counts computed in plain Python from the
generated events, so every input was counted exactly once. Also measures records/s of the same query on the
same data in local mode (``local[2]``) and on the cluster without faults.

The executors get moldau from ``moldau.spark.pack`` (``spark.archives``), with a ``python3`` on PATH that
lacks it, as docs/spark.md ("On a cluster") describes. Several minutes on two cores: runs only with
``MOLDAU_SPARK_CLUSTER_TESTS=1``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path
from typing import Any

import pytest

from .harness import FaultCluster
from .run import _wait_formed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.usefixtures("need_zookeeper"),
    pytest.mark.skipif(
        not os.environ.get("MOLDAU_SPARK_CLUSTER_TESTS"),
        reason="a Spark standalone cluster and a moldau cluster, several minutes: "
        "MOLDAU_SPARK_CLUSTER_TESTS=1",
    ),
]

_HERE = Path(__file__).resolve().parent
EVENTS, SEED, PER_BATCH = 20000, 7, 1000


def _bare_env(tmp: Path) -> dict[str, str]:
    """The environment of the driver and the Spark JVMs: a ``python3`` on PATH without moldau."""
    d = tmp / "bare-venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(d)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")
    }
    venv_bin = str(Path(sys.executable).parent)
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != venv_bin]
    env["PATH"] = os.pathsep.join([str(d / "bin"), *rest])
    return env


class Driver:
    """``spark_driver.py`` as a process; its JSON lines collected by a thread."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.lines: list[dict[str, Any]] = []
        self.stderr_path = cwd / f"driver-{time.monotonic_ns()}.err"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(_HERE / "spark_driver.py"), *args],
                cwd=str(cwd),
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def batches(self) -> int:
        return sum(1 for x in self.lines if "batch" in x)

    def wait_batches(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.batches() < n:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"driver: {self.batches()} batches, wanted {n}: {self.tail()}")
            time.sleep(0.2)

    def result(self, timeout: float) -> dict[str, Any]:
        self.proc.wait(timeout)
        self.thread.join(10)
        res = [x["result"] for x in self.lines if "result" in x]
        assert self.proc.returncode == 0 and res, self.tail()
        return res[-1]

    def tail(self) -> str:
        return (
            f"rc={self.proc.poll()} lines={self.lines[-5:]} stderr="
            + self.stderr_path.read_text(errors="replace")[-3000:]
        )


def _leader(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2}).list_topics(topic, timeout=10)
    return int(md.topics[topic].partitions[partition].leader)


def test_pipeline_on_a_spark_cluster_through_leader_and_worker_kills(tmp_path: Path) -> None:
    sys.path.insert(0, str(_HERE.parents[1] / "examples"))
    import clickstream
    from confluent_kafka.admin import AdminClient, NewTopic

    from harness.spark_cluster import StandaloneCluster

    mc = FaultCluster(
        str(tmp_path / "moldau"),
        3,
        netns=False,
        zk_session_ms=6000,
        configs=[
            "replica.lag.time.max.ms=3000",
            "offsets.topic.replication.factor=3",
            "transaction.state.log.replication.factor=3",
        ],
    )
    sc: Any = None
    try:
        mc.start()
        bs = mc.bootstrap
        _wait_formed(bs, 3)
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 2})
        topics = ["clicks", "counts-local", "counts-cluster", "counts-faults"]
        fs = admin.create_topics(
            [NewTopic(t, 4, 3, config={"min.insync.replicas": "2"}) for t in topics],
            operation_timeout=30,
            request_timeout=40,
        )
        for f in fs.values():
            f.result(60)
        assert clickstream.generate(bs, EVENTS, SEED, clicks="clicks") == EVENTS + 1

        env = _bare_env(tmp_path)
        drv = tmp_path / "driver"
        drv.mkdir()
        r = subprocess.run(
            [sys.executable, "-m", "moldau.spark.pack", "moldau-env.tar.gz", "--unpack", "environment"],
            cwd=str(drv),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert r.returncode == 0, r.stderr

        def args(master: str, archive: str, name: str) -> list[str]:
            return [
                master,
                archive,
                bs,
                str(tmp_path / f"out-{name}"),
                str(tmp_path / f"cp-{name}"),
                f"counts-{name}",
                str(EVENTS),
                str(SEED),
                str(PER_BATCH),
            ]

        # local mode: the same query on the same data, for the figures
        local = Driver(args("local[2]", "-", "local"), drv, dict(env, PYSPARK_PYTHON=sys.executable)).result(
            900
        )
        assert local["parquet_matches"] and local["topic_matches"], local

        sc = StandaloneCluster(tmp_path / "spark", env=env, cores=1)
        sc.start()
        w2 = sc._java(
            "org.apache.spark.deploy.worker.Worker",
            [
                sc.master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(tmp_path / "spark" / "work"),
                "--webui-port",
                "0",
            ],
            "worker2.log",
        )
        sc._wait_for("worker2.log", r"Successfully registered with master", w2)
        cluster_env = dict(env, PYSPARK_PYTHON="./environment/bin/python")
        clean = Driver(args(sc.master_url, "moldau-env.tar.gz", "cluster"), drv, cluster_env).result(900)
        assert clean["parquet_matches"] and clean["topic_matches"], clean

        # through faults: the leader of clicks-0 killed after 2 batches (back 10 s later), worker 2 after 8
        d = Driver(args(sc.master_url, "moldau-env.tar.gz", "faults"), drv, cluster_env)
        d.wait_batches(2, 600)
        leader = _leader(bs, "clicks", 0)
        mc.broker(leader).kill()
        time.sleep(10)
        mc.broker(leader).start()
        d.wait_batches(8, 600)
        os.kill(w2.pid, signal.SIGKILL)
        w2.wait(20)
        faults = d.result(900)
        print(
            json.dumps(
                {"local": local, "cluster": clean, "faults": faults, "leader_killed": leader}, indent=1
            )
        )
        assert faults["parquet_matches"], faults  # every input counted exactly once
        assert faults["topic_matches"], faults
        assert faults["clicks"] == EVENTS
        (tmp_path / "figures.json").write_text(
            json.dumps({"local": local, "cluster": clean, "faults": faults})
        )
    finally:
        if sc is not None:
            sc.close()
        mc.stop()

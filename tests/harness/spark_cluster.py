"""A Spark standalone cluster on loopback for tests: one Master and one Worker JVM from pyspark's own jars.

The master and worker are started with pyspark's launch classes (``org.apache.spark.deploy.master.Master``,
``...worker.Worker``) and the jars that ship with the pyspark package, so nothing beyond ``moldau[spark]``
and Java 17 is needed. Executors are separate JVMs started by the worker in its work directory, with their
own Python workers: what a job meets on a real cluster, on one machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from moldau._ports import free_port


def _free_port() -> int:
    return free_port()


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass(slots=True)
class StandaloneCluster:
    """``with StandaloneCluster(workdir, env=...) as c: ... c.master_url``."""

    workdir: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cores: int = 2
    memory: str = "1g"
    master_url: str = ""
    procs: list[subprocess.Popen] = field(default_factory=list)

    def _java(self, cls: str, args: list[str], log_name: str) -> subprocess.Popen:
        home = spark_home()
        java = shutil.which("java", path=self.env.get("PATH")) or "java"
        # SPARK_SCALA_VERSION: a distribution's load-spark-env.sh sets it; without it Spark's launcher looks
        # for a source build's directories when the worker builds an executor's command line
        env = dict(self.env, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_SCALA_VERSION="2.13")
        log = open(self.workdir / log_name, "wb")  # noqa: SIM115 - open for the JVM's lifetime
        cmd = [java, "-Xmx256m", "-cp", f"{home / 'jars'}/*", cls, *args]
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(self.workdir))
        self.procs.append(p)
        return p

    def _wait_for(self, log_name: str, pattern: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        path = self.workdir / log_name
        while time.monotonic() < deadline:
            if re.search(pattern, path.read_text(errors="replace")):
                return
            if proc.poll() is not None:
                tail = path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{log_name}: exited {proc.returncode}:\n{tail}")
            time.sleep(0.2)
        tail = path.read_text(errors="replace")[-3000:]
        raise TimeoutError(f"{log_name}: no {pattern!r} in {timeout} s:\n{tail}")

    def start(self) -> StandaloneCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        m = self._java("org.apache.spark.deploy.master.Master",
                       ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())],
                       "master.log")
        self.master_url = f"spark://127.0.0.1:{port}"
        self._wait_for("master.log", r"I have been elected leader|Starting Spark master", m)
        (self.workdir / "work").mkdir(exist_ok=True)
        w = self._java("org.apache.spark.deploy.worker.Worker",
                       [self.master_url, "--host", "127.0.0.1", "--cores", str(self.cores), "--memory",
                        self.memory, "--work-dir", str(self.workdir / "work"), "--webui-port",
                        str(_free_port())], "worker.log")
        self._wait_for("worker.log", r"Successfully registered with master", w)
        return self

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:  # noqa: PYI034 - slots dataclass, not subclassed
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

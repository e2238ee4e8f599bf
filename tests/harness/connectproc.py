"""Kafka Connect workers and MirrorMaker 2 for the tests: Kafka's own main classes (``ConnectDistributed``,
``MirrorMaker``) run from the ``apps/connect`` module of the JVM harness, with their logs in a file and a
small client of Connect's REST API."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from harness import jvm
from harness.brokerproc import free_port

MODULE = "apps/connect"
HEAP = "512m"


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class JavaService:
    """A long-running Kafka program (a Connect worker, MirrorMaker) whose output goes to ``log_path``."""

    def __init__(self, main_class: str, args: list[str], log_path: Path, heap: str = HEAP) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = jvm.java(MODULE, main_class, args, heap=heap, stdout=self._log, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self, limit: int = 8000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (Kafka's shutdown hooks run), SIGKILL after ``timeout``; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


class ConnectWorker(JavaService):
    """One Kafka Connect worker in distributed mode (``org.apache.kafka.connect.cli.ConnectDistributed``)."""

    def __init__(self, bootstrap: str, group: str, work_dir: Path, *, replication: int,
                 name: str = "worker", extra: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": str(replication),
            "offset.storage.replication.factor": str(replication),
            "status.storage.replication.factor": str(replication),
            "offset.storage.partitions": "5",
            "status.storage.partitions": "3",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.flush.interval.ms": "500",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "scheduled.rebalance.max.delay.ms": "5000",
            "session.timeout.ms": "10000",
            "heartbeat.interval.ms": "1000",
        }
        props.update(extra or {})
        path = write_properties(work_dir / f"{name}.properties", props)
        super().__init__("org.apache.kafka.connect.cli.ConnectDistributed", [str(path)],
                         work_dir / f"{name}.log")

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Until the REST API answers and the worker has joined its group (GET /connectors is 200)."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"Connect worker exited with {self.proc.returncode}\n{self.output()}")
            try:
                status, body = self.request("GET", "/connectors", timeout=5)
                if status == 200:
                    return
                last = (status, body)
            except OSError as e:
                last = e
            time.sleep(0.5)
        raise AssertionError(
            f"Connect worker not ready within {timeout:.0f}s (last: {last!r})\n{self.output()}")

    def wait_running(self, connector: str, tasks: int = 1, timeout: float = 120.0) -> dict[str, Any]:
        """Until the connector and ``tasks`` tasks are RUNNING; returns the status document."""
        deadline = time.monotonic() + timeout
        body: Any = None
        while time.monotonic() < deadline:
            status, body = self.request("GET", f"/connectors/{connector}/status", timeout=10)
            if status == 200:
                states = [t["state"] for t in body.get("tasks", [])]
                if body["connector"]["state"] == "RUNNING" and states.count("RUNNING") == tasks:
                    return dict(body)
                if "FAILED" in states or body["connector"]["state"] == "FAILED":
                    raise AssertionError(f"{connector} failed: {body}")
            time.sleep(0.5)
        raise AssertionError(f"{connector} not RUNNING within {timeout:.0f}s: {body}\n{self.output()}")

"""Kafka Connect in distributed mode on moldau: its config, offset and status topics on the broker, a file
source and a file sink connector created through its REST API, and a worker restart that resumes from the
offsets Connect stored on moldau.

The default run skips this (a Connect worker takes a while to start); the whole JVM matrix runs it against
one moldau broker, the three-broker cluster and the Apache Kafka broker (the control)::

    MOLDAU_JVM_FULL=1 .venv/bin/python -m pytest -q tests/jvm/apps/test_connect.py
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from harness.brokerproc import BrokerProcess
from harness.connectproc import ConnectWorker
from harness.kafkautil import admin

pytestmark = [pytest.mark.jvm_full, pytest.mark.timeout(900)]


def _read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_lines(path: Path, expected: list[str], worker: ConnectWorker, timeout: float = 120.0) -> list[str]:
    deadline = time.monotonic() + timeout
    got: list[str] = []
    while time.monotonic() < deadline:
        got = _read_lines(path)
        if len(got) >= len(expected):
            break
        time.sleep(0.5)
    time.sleep(2)  # nothing more may come: a duplicate would show up here
    got = _read_lines(path)
    assert got == expected, (f"sink file has {len(got)} lines, expected {len(expected)}; first difference at "
                             f"{next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), None)}"
                             f"\n{worker.output()}")
    return got


def test_distributed_file_source_and_sink(target: BrokerProcess, jtopic: Callable[..., str],
                                          tmp_path: Path) -> None:
    topic = jtopic(partitions=1)  # one partition: the sink file keeps the source file's order
    group = f"connect-{uuid.uuid4().hex[:8]}"
    rf = 3 if target.kind == "cluster" else 1
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    first = [f"line {i} {uuid.uuid4().hex}" for i in range(500)]
    source_file.write_text("".join(line + "\n" for line in first))

    worker = ConnectWorker(target.bootstrap, group, tmp_path, replication=rf, name="worker-1")
    try:
        worker.wait_ready()
        # Connect created its three topics on moldau, compacted as it requires
        topics = admin(target.bootstrap).list_topics(timeout=10).topics
        for suffix in ("configs", "offsets", "status"):
            assert f"{group}-{suffix}" in topics, sorted(topics)
        status, body = worker.request("POST", "/connectors", {"name": "file-source", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(source_file), "topic": topic, "tasks.max": "1"}})
        assert status == 201, body
        status, body = worker.request("POST", "/connectors", {"name": "file-sink", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(sink_file), "topics": topic, "tasks.max": "1"}})
        assert status == 201, body
        status, names = worker.request("GET", "/connectors")
        assert status == 200 and sorted(names) == ["file-sink", "file-source"], names
        worker.wait_running("file-source")
        worker.wait_running("file-sink")
        _wait_lines(sink_file, first, worker)
        # lines appended while it runs follow
        second = [f"more {i}" for i in range(200)]
        with open(source_file, "a") as fh:
            fh.writelines(line + "\n" for line in second)
        _wait_lines(sink_file, first + second, worker)
        time.sleep(1.5)  # past offset.flush.interval.ms: the source's file position is stored on moldau
        assert worker.stop() in (0, 143), worker.output()

        # a new worker of the same group: the connectors come back from the config topic, the source resumes
        # at its stored file position, the sink at its committed offset; nothing is copied twice
        third = [f"after restart {i}" for i in range(100)]
        with open(source_file, "a") as fh:
            fh.writelines(line + "\n" for line in third)
        worker = ConnectWorker(target.bootstrap, group, tmp_path, replication=rf, name="worker-2")
        worker.wait_ready()
        worker.wait_running("file-source")
        worker.wait_running("file-sink")
        _wait_lines(sink_file, first + second + third, worker)
        status, body = worker.request("GET", "/connectors/file-source/offsets")
        assert status == 200, body
        positions = [o["offset"]["position"] for o in body["offsets"]]
        assert positions == [sum(len(line) + 1 for line in first + second + third)], body
        # the sink's consumer group committed the topic's end
        status, body = worker.request("GET", "/connectors/file-sink/offsets")
        assert status == 200, body
        assert [o["offset"]["kafka_offset"] for o in body["offsets"]] == [800], body
        status, _ = worker.request("DELETE", "/connectors/file-source")
        assert status == 204
    finally:
        worker.stop()

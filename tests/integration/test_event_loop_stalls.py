"""Requests on one connection are not held up by another connection's topic creation.

Creating a topic writes and fsyncs several small files (the metadata file, each partition's
``partition.metadata``); done on the broker's event loop, every other connection waited for all of them (a
CreateTopics of 20 topics x 4 partitions stalled an unrelated ApiVersions for 1.3 s on an idle disk, and one
fsync can take seconds on a busy one: librdkafka's tests 0076/0085 timed out when run next to others). The
fsyncs now run in a writer thread (moldau.log.checkpoint.deferred_writes) and the answer waits for them.

A probe thread sends ApiVersions on its own connection, one after the other, while another client creates
topics; the probe must keep getting answers during the creation.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [
    pytest.mark.moldau_only("the broker's own files"),
    pytest.mark.single_broker("times one broker process's event loop through its own files"),
    pytest.mark.kafka_differs("times moldau's event loop through moldau's own files"),
]


class Probe(threading.Thread):
    """ApiVersions v0 round trips on a raw connection; records (sent, answered) monotonic times."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.trips: list[tuple[float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        corr = 0
        while not self.stopped.is_set():
            corr += 1
            body = struct.pack(">hhih", 18, 0, corr, 5) + b"probe"
            t = time.monotonic()
            self.sock.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", self.sock.recv(4, socket.MSG_WAITALL))[0]
            self.sock.recv(size, socket.MSG_WAITALL)
            self.trips.append((t, time.monotonic()))
            time.sleep(0.002)

    def during(self, start: float, end: float) -> list[float]:
        """Latencies of the round trips answered between ``start`` and ``end``."""
        return [b - a for a, b in self.trips if start <= b <= end]

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)
        self.sock.close()


def test_other_connections_are_answered_while_topics_are_created(broker_factory):
    b = broker_factory({"num.partitions": "4"})
    probe = Probe(b.bootstrap)
    probe.start()
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        a.list_topics(timeout=10)  # connected before timing
        names = [f"stall-{i}" for i in range(20)]
        t0 = time.monotonic()
        futures = a.create_topics([NewTopic(n, 4, 1) for n in names], request_timeout=60)
        for f in futures.values():
            f.result(timeout=60)
        t1 = time.monotonic()
        during = probe.during(t0, t1)
        # answered as soon as the topics were acknowledged: their files are durable already
        text = (Path(b.data_dir) / "__moldau_metadata.json").read_text()
        json.loads(text)
        assert all(f'"{n}"' in text for n in names), "topics missing from the metadata file"
        for n in names:
            for p in range(4):
                assert (Path(b.data_dir) / f"{n}-{p}" / "partition.metadata").is_file(), (n, p)

        # the first group lookup creates __consumer_offsets (50 partitions)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "stall-probe",
                      "auto.offset.reset": "earliest"})
        t2 = time.monotonic()
        c.subscribe([names[0]])
        c.consume(1, 3.0)
        t3 = time.monotonic()
        c.close()
        during_group = probe.during(t2, t3)
    finally:
        probe.stop()
    assert len(during) >= 10, f"probe answered {len(during)} times in {t1 - t0:.2f} s of CreateTopics: " \
                              f"{during}"
    assert max(during) < max(0.5, (t1 - t0) / 2), (max(during), t1 - t0)
    assert len(during_group) >= 10 and max(during_group) < 1.0, during_group

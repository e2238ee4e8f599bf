"""Kafka Streams on moldau with ``processing.guarantee=exactly_once_v2``: two instances of one application,
one killed with SIGKILL mid-stream, and the final counts exact.

Two topologies (tests/jvm/apps/streams, ``StreamsApp``): a word count (a repartition topic, the count store's
changelog) and a count per key in tumbling event-time windows (a windowed store's changelog). Instance A and
instance B share the input's partitions; B is killed with SIGKILL while the input flows, with a transaction
of its own open; A takes over B's tasks and rebuilds their stores from the changelogs (reading committed
data only: B's open transaction is aborted by the transaction coordinator when it times out); then B comes
back with an empty state directory and restores whatever tasks it gets from the changelogs again. Every
count in the output topic (its last committed value per key) must be exact: a record counted twice (B's
aborted work replayed on top of state that kept it) or lost shows up as a wrong count.

The default run has the word count against one moldau broker; the windowed count, and both against the
three-broker cluster and the Apache Kafka broker (the control), with ``MOLDAU_JVM_FULL=1``::

    MOLDAU_JVM_FULL=1 .venv/bin/python -m pytest -q tests/jvm/apps/test_streams.py
"""

from __future__ import annotations

import random
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from harness import jvm
from harness.brokerproc import BrokerProcess

WORDS = [f"w{i:02d}" for i in range(40)]
PARTITIONS = 4
WINDOW_MS = 10_000
#: event time of the windowed input: six windows from a window boundary
BASE_TS = 1_700_000_000_000 - 1_700_000_000_000 % WINDOW_MS
HEAP = "384m"
pytestmark = pytest.mark.timeout(900)
#: B's death is seen by the group after the session timeout; its open transaction ends with
#: transaction.timeout.ms: both short, so that the test does not wait Kafka's defaults (45 s, 60 s)
STREAMS_CONFIG = {
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "1000",
    "transaction.timeout.ms": "10000",
    "commit.interval.ms": "200",
    "statestore.cache.max.bytes": "0",
}


class App:
    """One Kafka Streams instance (a JVM) of the application ``app_id``."""

    def __init__(self, target: BrokerProcess, mode: str, app_id: str, source: str, sink: str,
                 state_dir: Path, log_dir: Path, name: str) -> None:
        args = ["--bootstrap", target.bootstrap, "--mode", mode, "--app-id", app_id, "--input", source,
                "--output", sink, "--state-dir", str(state_dir), "--window-ms", str(WINDOW_MS)]
        for k, v in STREAMS_CONFIG.items():
            args += ["--config", f"{k}={v}"]
        self.name = name
        self.proc = jvm.JsonProcess("apps/streams", "moldau.jvm.apps.StreamsApp", args,
                                    stderr_path=log_dir / f"{name}.stderr", heap=HEAP)

    def running_count(self) -> int:
        return sum(1 for e in self.proc.events if e.get("event") == "state" and e.get("state") == "RUNNING")

    def wait_running(self, timeout: float = 300.0, after: int = 0) -> None:
        """Wait until the instance has become RUNNING more than ``after`` times."""
        deadline = time.monotonic() + timeout
        while self.running_count() <= after:
            if time.monotonic() > deadline or self.proc.proc.poll() is not None:
                raise AssertionError(
                    f"{self.name} not RUNNING within {timeout:.0f}s (exit {self.proc.proc.poll()}); "
                    f"events: {self.proc.events[-8:]}\n--- stderr ---\n{self.proc.stderr()}")
            time.sleep(0.2)

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.proc.events if e.get("event") == "error"]

    def kill9(self) -> None:
        self.proc.proc.kill()  # SIGKILL: no close, no commit, no leave-group
        self.proc.finish(timeout=30)

    def stop(self) -> None:
        self.proc.proc.terminate()
        self.proc.finish(timeout=60)


def committed_last_values(bootstrap: str, topic: str) -> dict[str, int]:
    """The last committed value (a big-endian long) of every key of ``topic`` (read_committed, to the end)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 50})
    last: dict[str, int] = {}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        eof: set[int] = set()
        deadline = time.monotonic() + 60
        while len(eof) < PARTITIONS:
            if time.monotonic() > deadline:
                raise AssertionError(f"no end of {topic} on every partition within 60 s")
            for m in c.consume(num_messages=5000, timeout=0.2):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise AssertionError(err)
                eof.discard(m.partition())
                last[m.key().decode()] = int.from_bytes(m.value(), "big", signed=True)
    finally:
        c.close()
    return last


def wait_for_counts(bootstrap: str, topic: str, expected: dict[str, int], timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    got: dict[str, int] = {}
    while time.monotonic() < deadline:
        got = committed_last_values(bootstrap, topic)
        if got == expected:
            return got
        # a count past the expected one can never come back down: fail at once
        over = {k: (v, expected.get(k)) for k, v in got.items() if v > expected.get(k, 0)}
        assert not over, f"counts past the input (records counted twice): {sorted(over.items())[:10]}"
        time.sleep(2)
    return got


def inputs(mode: str, n: int, seed: int) -> tuple[list[tuple[str | None, str, int | None]], Counter[str]]:
    """``n`` input records (key, value, timestamp) and the counts they must produce."""
    rng = random.Random(seed)
    records: list[tuple[str | None, str, int | None]] = []
    expected: Counter[str] = Counter()
    for i in range(n):
        if mode == "wordcount":
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
            records.append((None, " ".join(words).upper() if i % 7 == 0 else " ".join(words), None))
            expected.update(words)
        else:
            key = f"user-{rng.randrange(12)}"
            ts = BASE_TS + rng.randrange(6 * WINDOW_MS)
            records.append((key, f"click-{i}", ts))
            expected[f"{key}@{ts - ts % WINDOW_MS}"] += 1
    return records, expected


def produce(p: Producer, topic: str, records: list[tuple[str | None, str, int | None]],
            per_second: float | None = None) -> None:
    start = time.monotonic()
    for i, (key, value, ts) in enumerate(records):
        kwargs: dict[str, Any] = {"value": value.encode()}
        if key is not None:
            kwargs["key"] = key.encode()
        if ts is not None:
            kwargs["timestamp"] = ts
        p.produce(topic, **kwargs)
        p.poll(0)
        if per_second:
            ahead = start + (i + 1) / per_second - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    assert p.flush(60) == 0


@pytest.mark.parametrize("mode", ["wordcount", pytest.param("windowed", marks=pytest.mark.jvm_full)])
def test_exactly_once_v2_through_a_sigkill(target: BrokerProcess, jtopic: Callable[..., str], tmp_path: Path,
                                           mode: str) -> None:
    source, sink = jtopic(partitions=PARTITIONS), jtopic(partitions=PARTITIONS)
    app_id = f"streams-{mode}-{uuid.uuid4().hex[:8]}"
    records, expected = inputs(mode, 3000, seed=24)
    p = Producer({"bootstrap.servers": target.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    produce(p, source, records[:1000])

    apps: list[App] = []

    def start(name: str, state: Path) -> App:
        a = App(target, mode, app_id, source, sink, state, tmp_path, name)
        apps.append(a)
        return a

    try:
        a = start("A", tmp_path / "state-a")
        b = start("B", tmp_path / "state-b")
        a.wait_running()
        b.wait_running()
        # the input flows while B is killed: B has processed part of it and has a transaction open
        produce(p, source, records[1000:1600], per_second=400)
        b_events = len(b.proc.events)
        b.kill9()
        assert b.proc.proc.returncode == -9, b.proc.proc.returncode
        produce(p, source, records[1600:2400], per_second=400)
        # B comes back with nothing on disk: its tasks' stores are rebuilt from the changelogs
        shutil.rmtree(tmp_path / "state-b", ignore_errors=True)
        b2 = start("B2", tmp_path / "state-b")
        b2.wait_running(timeout=300)
        produce(p, source, records[2400:])
        got = wait_for_counts(target.bootstrap, sink, dict(expected), timeout=240)
        missing = {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
        assert got == dict(expected), (
            f"{len(missing)} counts wrong (got, expected): {sorted(missing.items())[:10]}; B printed "
            f"{b_events} events before the kill; errors: {[x.errors() for x in apps]}")
        # A rebalanced at least once (B's death, B2's join) and stayed up
        assert a.proc.proc.poll() is None, a.proc.stderr()
        assert a.running_count() >= 2, a.proc.events
    finally:
        p.flush(10)
        del p  # librdkafka's threads end with it, not after the broker is gone
        for x in apps:
            if x.proc.proc.poll() is None:
                x.stop()

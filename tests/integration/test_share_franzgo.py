"""Share groups (KIP-932) against a real moldau broker process with franz-go's share consumer (Go, kgo).

The Go program is ``tests/go/sharegroup`` (franz-go pinned in its go.mod), built once into a cache outside
the repository by ``tests/go/gobuild.py`` (``scripts/setup.sh --test`` warms it). It acknowledges every record
explicitly (accept, release while the delivery count is low, reject) and prints each one as a JSON line.

Default run: franz-go members with a confluent-kafka ShareConsumer member in one group (every record accepted
exactly once across them), and release / reject. With ``MOLDAU_GO_FULL=1`` also: a franz-go member killed
with SIGKILL (its acquired records come back when its connection closes) and the delivery-count limit::

    MOLDAU_GO_FULL=1 .venv/bin/python -m pytest -q tests/integration/test_share_franzgo.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Producer

from .test_share_groups import SETTINGS, _consumer, _setup
from harness import gobuild

pytestmark = pytest.mark.single_broker("share groups are served by one broker so far")

FULL = bool(os.environ.get("MOLDAU_GO_FULL"))


@pytest.fixture(scope="module")
def share_broker(module_broker_factory: Callable[..., Any]) -> Any:
    return module_broker_factory(SETTINGS)


@pytest.fixture(scope="module")
def sharegroup_bin() -> Path:
    return gobuild.binary_or_skip("sharegroup")


class GoMember:
    """One franz-go share consumer process; its JSON lines are read as they come (``lines``); ``stop()``
    (SIGTERM: it flushes its acks and leaves) returns them."""

    def __init__(self, exe: Path, bootstrap: str, group: str, topic: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(exe), "-brokers", bootstrap, "-group", group, "-topic", topic, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for x in self.proc.stdout:
            if x.strip():
                self.lines.append(json.loads(x))

    def first_line(self, timeout: float = 30) -> dict[str, Any]:
        end = time.time() + timeout
        while not self.lines:
            assert time.time() < end and self.proc.poll() is None, "the franz-go member printed nothing"
            time.sleep(0.05)
        return self.lines[0]

    def stop(self, timeout: float = 20) -> list[dict[str, Any]]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            pytest.fail(f"franz-go member did not stop: {err}")
        self._reader.join(10)
        assert self.proc.returncode in (0, -signal.SIGTERM), err
        return self.lines

    def run(self, timeout: float = 40) -> list[dict[str, Any]]:
        """Wait for the program's own end (-accept or -seconds), then its lines."""
        self.proc.wait(timeout)
        return self.stop()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.communicate()


def test_franzgo_and_confluent_members_accept_every_record_once(share_broker: Any,
                                                                sharegroup_bin: Path) -> None:
    b = share_broker
    topic, group = "share-franzgo-mixed", "g-franzgo-mixed"
    _setup(b.bootstrap, topic, group, 0)
    members = [GoMember(sharegroup_bin, b.bootstrap, group, topic, "-max-records", "5", "-seconds", "60")
               for _ in range(2)]
    ck_seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def ck_member() -> None:
        c = _consumer(b.bootstrap, group, topic, **{"max.poll.records": "5"})
        try:
            while not stop.is_set():
                for m in c.poll(0.2):
                    if not m.error():
                        ck_seen.append((m.offset(), m.delivery_count()))
            c.commit_sync(10)  # implicit mode: the last poll's records accepted
        finally:
            c.close()

    t = threading.Thread(target=ck_member)
    t.start()
    try:
        time.sleep(2)  # all three joined
        # batches of 10 while the members poll (each fetch takes at most 5 records: one batch), more while a
        # member has had none (Kafka gives members the partition a heartbeat or two after they join; franz-go
        # prints a record once it is acknowledged)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        n = 0
        while n < 150 or (not (ck_seen and all(m.lines for m in members)) and n < 600):
            for i in range(n, n + 10):
                p.produce(topic, value=str(i).encode())
            assert p.flush(15) == 0
            n += 10
            time.sleep(0.1)
        end = time.time() + 20
        while time.time() < end and len(ck_seen) + sum(len(m.lines) for m in members) < n:
            time.sleep(0.2)
    finally:
        stop.set()
        t.join(30)
        go_seen = [m.stop() for m in members]
    go_accepted = [[r["offset"] for r in lines if r["ack"] == "accept"] for lines in go_seen]
    accepted = sorted([o for lines in go_accepted for o in lines] + [o for o, _ in ck_seen])
    assert accepted == list(range(n)), "every record accepted exactly once across the members"
    print("accepted by franz-go members:", [len(x) for x in go_accepted], "by confluent-kafka:", len(ck_seen))
    assert all(go_accepted), f"every franz-go member received records: {[len(x) for x in go_accepted]}"
    assert all(r["delivery_count"] == 1 for lines in go_seen for r in lines)


def test_franzgo_release_and_reject(share_broker: Any, sharegroup_bin: Path) -> None:
    b = share_broker
    topic, group = "share-franzgo-acks", "g-franzgo-acks"
    _setup(b.bootstrap, topic, group, 10)
    # 3 and 4 released on deliveries 1 and 2, accepted on the 3rd; 7 rejected; the rest accepted
    m = GoMember(sharegroup_bin, b.bootstrap, group, topic,
                 "-release", "3,4", "-release-until", "3", "-reject", "7", "-accept", "9", "-seconds", "20")
    lines = m.run()
    by_value: dict[str, list[tuple[int, str]]] = {}
    for r in lines:
        by_value.setdefault(r["value"], []).append((r["delivery_count"], r["ack"]))
    for v in ("3", "4"):
        assert by_value[v] == [(1, "release"), (2, "release"), (3, "accept")], by_value
    assert by_value["7"] == [(1, "reject")], "a rejected record is delivered once"
    for v in ("0", "1", "2", "5", "6", "8", "9"):
        assert by_value[v] == [(1, "accept")], by_value
    # nothing is left to deliver to a new franz-go member: the rejected record is never redelivered
    assert GoMember(sharegroup_bin, b.bootstrap, group, topic, "-seconds", "3").run() == []


@pytest.mark.skipif(not FULL, reason="set MOLDAU_GO_FULL=1")
def test_franzgo_killed_member_records_come_back(share_broker: Any, sharegroup_bin: Path) -> None:
    """Killed with SIGKILL, the member's connection closes: its acquired records go back long before their
    lock (60 s) would expire."""
    b = share_broker
    topic, group = "share-franzgo-kill", "g-franzgo-kill"
    _setup(b.bootstrap, topic, group, 5, **{"share.record.lock.duration.ms": "60000"})
    # the victim acquires records, acknowledges none and is killed while it holds them
    victim = GoMember(sharegroup_bin, b.bootstrap, group, topic, "-seconds", "60", "-hold", "60")
    first = victim.first_line()
    assert first["ack"] == "hold"
    victim.kill()
    lines = GoMember(sharegroup_bin, b.bootstrap, group, topic, "-accept", "5", "-seconds", "20").run()
    assert sorted(int(r["value"]) for r in lines if r["ack"] == "accept") == list(range(5))
    assert all(r["delivery_count"] == 2 for r in lines), "redelivered after the killed member's lock expired"


@pytest.mark.skipif(not FULL, reason="set MOLDAU_GO_FULL=1")
def test_franzgo_delivery_limit_archives(share_broker: Any, sharegroup_bin: Path) -> None:
    b = share_broker
    topic, group = "share-franzgo-limit", "g-franzgo-limit"
    _setup(b.bootstrap, topic, group, 2, **{"share.delivery.count.limit": "2"})
    # value 1 always released: after its 2nd delivery it is archived
    m = GoMember(sharegroup_bin, b.bootstrap, group, topic, "-release", "1", "-release-until", "99",
                 "-seconds", "6")
    lines = m.run()
    acks = {v: [(r["delivery_count"], r["ack"]) for r in lines if r["value"] == v] for v in ("0", "1")}
    assert acks["1"] == [(1, "release"), (2, "release")], "past share.delivery.count.limit (2) it is archived"
    assert acks["0"] == [(1, "accept")]

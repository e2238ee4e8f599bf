"""Share groups (KIP-932) against a real moldau broker process with confluent-kafka's ShareConsumer
(librdkafka).

Three members on one partition, exactly-once acceptance across them, release / reject / the delivery limit,
a member killed with SIGKILL (its records come back after the lock), the state across a broker restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Callable

import pytest

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):  # pragma: no cover
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

pytestmark = pytest.mark.single_broker(
    "one broker (topics with replication factor 1, a broker restart); the cluster scenarios are in "
    "tests/cluster/test_cluster_share_groups.py"
)

LOCK_MS = 2000
SETTINGS = {"group.share.min.record.lock.duration.ms": "1000"}


@pytest.fixture(scope="module")
def share_broker(module_broker_factory: Callable[..., Any]) -> Any:
    """One broker for the module (each test has its own topic and group; one restarts it)."""
    return module_broker_factory(SETTINGS)


def _setup(bootstrap: str, topic: str, group: str, n: int, **group_configs: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    configs = {"share.auto.offset.reset": "earliest", **group_configs}
    alter_group(a, group, **configs)
    wait_group_configs(a, group, configs)
    _produce(bootstrap, topic, range(n))


def wait_group_configs(admin: AdminClient, group: str, configs: dict[str, str], timeout: float = 15) -> None:
    """Wait until DescribeConfigs shows the group's configs: moldau answers them at once, a Kafka broker
    once its metadata cache has the controller's config record (a moment after IncrementalAlterConfigs)."""
    end = time.time() + timeout
    while True:
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, group)])
        got = next(iter(described.values())).result(15)
        shown = {k: got[k].value for k in configs if k in got}
        if shown == configs:
            return
        assert time.time() < end, (shown, configs)
        time.sleep(0.2)


def alter_group(admin: AdminClient, group: str, **configs: str) -> None:
    """Set group configs (ConfigResource GROUP) with IncrementalAlterConfigs."""
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=ops)
    for f in admin.incremental_alter_configs([res]).values():
        f.result(15)


def _produce(bootstrap: str, topic: str, values: Any) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in values:
        p.produce(topic, value=str(i).encode())
    assert p.flush(15) == 0


def _consumer(bootstrap: str, group: str, topic: str, explicit: bool = False, **config: str) -> Any:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, **config}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


def _poll_until(
    c: Any, cond: Callable[[list[Any]], bool], timeout: float, on_msg: Callable[[Any], None] | None = None
) -> list[Any]:
    got: list[Any] = []
    end = time.time() + timeout
    while time.time() < end and not cond(got):
        for m in c.poll(0.5):
            if m.error():
                continue
            got.append(m)
            if on_msg is not None:
                on_msg(m)
    return got


def test_three_members_accept_every_record_once(share_broker: Any) -> None:
    """Three members of one group on a one-partition topic all receive records and every record is accepted
    exactly once across them.

    As in Kafka, a ShareFetch acquires whole batches up to the fetch's record limit (``max.poll.records``),
    and whichever member's fetch is served first acquires what is available: with the default limit (500) one
    member may take a whole backlog. So the members read with ``max.poll.records=5`` (one 10-record batch per
    fetch) and the records arrive in batches of 10 while all three poll; Kafka gives the members the partition
    only once the group coordinator has initialized its share state (a heartbeat or two after they join), so
    more batches are produced while a member has had none (bounded)."""
    b = share_broker
    topic, group = "share-three", "g-three"
    _setup(b.bootstrap, topic, group, 0)
    seen: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 2: []}
    stop = threading.Event()

    def member(i: int) -> None:
        c = _consumer(b.bootstrap, group, topic, **{"max.poll.records": "5"})
        try:
            while not stop.is_set():
                for m in c.poll(0.2):
                    if not m.error():
                        seen[i].append((m.offset(), m.delivery_count()))
            c.commit_sync(10)  # implicit mode: the last poll's records accepted
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(2)  # all three joined
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    n = 0
    while n < 300 or (not all(seen.values()) and n < 1200):  # batches of 10 while the members poll
        for i in range(n, n + 10):
            p.produce(topic, value=str(i).encode())
        assert p.flush(15) == 0
        n += 10
        time.sleep(0.1)
    end = time.time() + 30
    while time.time() < end and sum(len(v) for v in seen.values()) < n:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(30)
    offsets = sorted(o for v in seen.values() for o, _ in v)
    assert offsets == list(range(n)), "every record delivered exactly once across the members"
    assert all(seen[i] for i in range(3)), {i: len(v) for i, v in seen.items()}
    assert all(dc == 1 for v in seen.values() for _, dc in v)
    # every record accepted: none left to deliver (DescribeShareGroupOffsets' lag: the end offset less the
    # start offset and the records past it acknowledged; Kafka's start offset in the share coordinator may
    # trail the last acknowledged batch, its lag does not)
    assert _lag(b.bootstrap, group, topic) == 0


def _lag(bootstrap: str, group: str, topic: str) -> int:
    """The group's lag on ``topic``-0 (DescribeShareGroupOffsets v1, KIP-1226)."""
    import moldau

    with moldau.Admin(bootstrap_servers=bootstrap) as a:
        return int(a.list_share_group_offsets(group, [topic])[moldau.TopicPartition(topic, 0)].lag)


def test_release_reject_and_delivery_limit(share_broker: Any) -> None:
    b = share_broker
    topic, group = "share-acks", "g-acks"
    _setup(b.bootstrap, topic, group, 3, **{"share.delivery.count.limit": "2"})
    c = _consumer(b.bootstrap, group, topic, explicit=True)
    deliveries: dict[int, list[int]] = {0: [], 1: [], 2: []}

    def ack(m: Any) -> None:
        off = m.offset()
        deliveries[off].append(m.delivery_count())
        # offset 0: released once, then accepted; offset 1: rejected; offset 2: always released
        if off == 0:
            c.acknowledge(m, AcknowledgeType.RELEASE if len(deliveries[0]) == 1 else AcknowledgeType.ACCEPT)
        elif off == 1:
            c.acknowledge(m, AcknowledgeType.REJECT)
        else:
            c.acknowledge(m, AcknowledgeType.RELEASE)

    try:
        _poll_until(c, lambda got: len(deliveries[0]) >= 2 and len(deliveries[2]) >= 2, 20, ack)
        c.commit_sync(10)
        _poll_until(c, lambda got: False, 2, ack)  # nothing more may come
    finally:
        c.close()
    assert deliveries[0] == [1, 2], "a released record is redelivered with a higher delivery count"
    assert deliveries[1] == [1], "a rejected record is never redelivered"
    assert deliveries[2] == [1, 2], "past share.delivery.count.limit (2) the record is archived"


_KILLED_MEMBER = textwrap.dedent("""
    import sys
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    n = 0
    while n < 5:
        n += sum(1 for m in c.poll(0.5) if not m.error())
    print("acquired", n, flush=True)
    import time
    time.sleep(600)
""")


def _kill_member_holding_five(bootstrap: str, group: str, topic: str) -> float:
    """A member acquires 5 records and is killed with SIGKILL; the time of the kill."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_MEMBER, bootstrap, group, topic], stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("acquired 5"), line
        os.kill(proc.pid, signal.SIGKILL)
        return time.time()
    finally:
        proc.kill()
        proc.wait(10)


def test_killed_member_records_come_back_after_the_lock(share_broker: Any) -> None:
    b = share_broker
    topic, group = "share-kill", "g-kill"
    _setup(b.bootstrap, topic, group, 5, **{"share.record.lock.duration.ms": str(LOCK_MS)})
    killed_at = _kill_member_holding_five(b.bootstrap, group, topic)
    c = _consumer(b.bootstrap, group, topic)
    try:
        got = _poll_until(c, lambda got: len(got) >= 5, 20)
        first = time.time()
        c.commit_sync(10)
    finally:
        c.close()
    assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4]
    assert all(m.delivery_count() == 2 for m in got)
    assert first - killed_at < LOCK_MS / 1000 + 10


def test_killed_member_connection_close_releases_its_records(share_broker: Any) -> None:
    """The killed member's connection closes: its share session closes and its acquired records go back at
    once, long before their lock (60 s) expires (Kafka's ConnectionDisconnectListener)."""
    b = share_broker
    topic, group = "share-kill-conn", "g-kill-conn"
    _setup(b.bootstrap, topic, group, 5, **{"share.record.lock.duration.ms": "60000"})
    _kill_member_holding_five(b.bootstrap, group, topic)
    c = _consumer(b.bootstrap, group, topic)
    try:
        got = _poll_until(c, lambda got: len(got) >= 5, 20)
        c.commit_sync(10)
    finally:
        c.close()
    assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4]
    assert all(m.delivery_count() == 2 for m in got)


def test_state_survives_a_broker_restart(share_broker: Any) -> None:
    b = share_broker
    topic, group = "share-restart", "g-restart"
    _setup(b.bootstrap, topic, group, 20)
    c = _consumer(b.bootstrap, group, topic, explicit=True)
    accepted: list[int] = []

    def ack(m: Any) -> None:
        if m.offset() < 10:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            accepted.append(m.offset())
        else:
            c.acknowledge(m, AcknowledgeType.RELEASE)

    try:
        _poll_until(c, lambda got: len(accepted) >= 10, 20, ack)
        c.commit_sync(10)
    finally:
        c.close()
    assert sorted(set(accepted)) == list(range(10))
    b.restart()
    c = _consumer(b.bootstrap, group, topic)
    try:
        got = _poll_until(c, lambda got: len({m.offset() for m in got}) >= 10, 20)
        _poll_until(c, lambda g: False, 1.5, got.append)
        c.commit_sync(10)
    finally:
        c.close()
    assert sorted({m.offset() for m in got}) == list(range(10, 20)), "accepted records stay accepted"


def test_read_committed_skips_aborted_records(share_broker: Any) -> None:
    b = share_broker
    topic, group = "share-txn", "g-txn"
    _setup(b.bootstrap, topic, group, 0, **{"share.isolation.level": "read_committed"})
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "share-txn-producer"})
    p.init_transactions(15)
    for values, commit in ((["c0", "c1"], True), (["a0", "a1", "a2"], False), (["c2"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode())
        p.flush(15)
        if commit:
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
    c = _consumer(b.bootstrap, group, topic)
    try:
        got = _poll_until(c, lambda got: len(got) >= 3, 15)
        _poll_until(c, lambda g: False, 1.5, got.append)
        c.commit_sync(10)
    finally:
        c.close()
    assert sorted(m.value() for m in got) == [b"c0", b"c1", b"c2"]

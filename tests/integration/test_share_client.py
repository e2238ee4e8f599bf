"""moldau's own ShareConsumer (KIP-932) against a real moldau broker process: three members on one
partition, exactly-once acceptance across them, release / reject / the delivery limit, a member killed with
SIGKILL (its records come back after the lock), and a moldau member with a confluent-kafka ShareConsumer in
one group (every record accepted exactly once across them).
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

import moldau
from moldau import AcknowledgeType

pytestmark = pytest.mark.single_broker("share groups are served by one broker so far")

LOCK_MS = 2000


@pytest.fixture(scope="module")
def share_broker(module_broker_factory: Callable[..., Any]) -> Any:
    return module_broker_factory({"group.share.min.record.lock.duration.ms": "1000"})


def _setup(bootstrap: str, topic: str, group: str, n: int, **group_configs: str) -> None:
    res = moldau.ConfigResource(moldau.ConfigResource.GROUP, group)
    with moldau.Admin(bootstrap_servers=bootstrap) as a:
        a.create_topics([moldau.NewTopic(topic, 1, 1)])
        a.incremental_alter_configs({res: [moldau.AlterConfigOp(k, v) for k, v in
                                           {"share.auto.offset.reset": "earliest", **group_configs}.items()]})
        want = {"share.auto.offset.reset": "earliest", **group_configs}
        end = time.time() + 15  # a Kafka broker shows them once its metadata cache has the config record
        while {k: v.value for k, v in a.describe_configs([res])[res].items() if k in want} != want:
            assert time.time() < end, "the group configs were not shown"
            time.sleep(0.2)
    _produce(bootstrap, topic, range(n))


def _produce(bootstrap: str, topic: str, values: Any) -> None:
    with moldau.Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        for i in values:
            p.send(topic, str(i).encode())
        p.flush()


def _consumer(bootstrap: str, group: str, topic: str, explicit: bool = False,
              **config: Any) -> moldau.ShareConsumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, **config}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = moldau.ShareConsumer(conf)
    c.subscribe([topic])
    return c


def _poll_until(c: Any, cond: Callable[[list[Any]], bool], timeout: float,
                on_rec: Callable[[Any], None] | None = None) -> list[Any]:
    got: list[Any] = []
    end = time.time() + timeout
    while time.time() < end and not cond(got):
        for r in c.poll(0.5):
            got.append(r)
            if on_rec is not None:
                on_rec(r)
    return got


def _members(poll_one: list[Callable[[], list[tuple[int, int]]]], n: int, bootstrap: str, topic: str
             ) -> tuple[list[list[tuple[int, int]]], int]:
    """Run each member's poll function in a thread while at least ``n`` records arrive in waves; (offset,
    delivery count) per member, and the number of records produced."""
    seen: list[list[tuple[int, int]]] = [[] for _ in poll_one]
    stop = threading.Event()

    def run(i: int) -> None:
        while not stop.is_set():
            seen[i].extend(poll_one[i]())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(poll_one))]
    for t in threads:
        t.start()
    time.sleep(2)  # all joined
    # batches of 10 while the members poll (with max.poll.records 5 a fetch acquires one batch), more while a
    # member has had none: Kafka gives members the partition a heartbeat or two after they join (see
    # test_share_groups.test_three_members_accept_every_record_once)
    k = 0
    with moldau.Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        while k * 10 < n or (not all(seen) and k < 4 * n // 10):
            for i in range(k * 10, k * 10 + 10):
                p.send(topic, str(i).encode())
            p.flush()
            k += 1
            time.sleep(0.1)
    end = time.time() + 30
    while time.time() < end and sum(len(v) for v in seen) < k * 10:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(30)
    return seen, k * 10


def test_three_moldau_members_accept_every_record_once(share_broker: Any) -> None:
    b = share_broker
    topic, group, n = "mshare-three", "mg-three", 300
    _setup(b.bootstrap, topic, group, 0)
    cs = [_consumer(b.bootstrap, group, topic, **{"max.poll.records": 5}) for _ in range(3)]
    try:
        seen, n = _members([lambda c=c: [(r.offset, r.delivery_count) for r in c.poll(0.2)] for c in cs],
                        n, b.bootstrap, topic)
        for c in cs:
            c.commit_sync(10)  # implicit mode: the last poll's records accepted
    finally:
        for c in cs:
            c.close()
    offsets = sorted(o for v in seen for o, _ in v)
    assert offsets == list(range(n)), "every record delivered exactly once across the members"
    assert all(seen), [len(v) for v in seen]
    assert all(dc == 1 for v in seen for _, dc in v)


def test_release_reject_renew_and_delivery_limit(share_broker: Any) -> None:
    b = share_broker
    topic, group = "mshare-acks", "mg-acks"
    _setup(b.bootstrap, topic, group, 3, **{"share.delivery.count.limit": "2"})
    c = _consumer(b.bootstrap, group, topic, explicit=True)
    deliveries: dict[int, list[int]] = {0: [], 1: [], 2: []}

    def ack(r: Any) -> None:
        deliveries[r.offset].append(r.delivery_count)
        if r.offset == 0:  # renewed, then released once, then accepted
            if len(deliveries[0]) == 1:
                c.acknowledge(r, AcknowledgeType.RENEW)
                c.acknowledge(r, AcknowledgeType.RELEASE)
            else:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
        elif r.offset == 1:
            c.acknowledge(r, AcknowledgeType.REJECT)
        else:
            c.acknowledge(r, AcknowledgeType.RELEASE)

    try:
        _poll_until(c, lambda got: len(deliveries[0]) >= 2 and len(deliveries[2]) >= 2, 20, ack)
        assert all(e is None for e in c.commit_sync(10).values())
        _poll_until(c, lambda got: False, 2, ack)  # nothing more may come
        with pytest.raises(moldau.client.errors.IllegalStateError):
            c.acknowledge(moldau.client.ShareRecord(topic, 0, 1, 0, 0, None, None, []))
    finally:
        c.close()
    assert deliveries[0] == [1, 2], "a released record is redelivered with a higher delivery count"
    assert deliveries[1] == [1], "a rejected record is never redelivered"
    assert deliveries[2] == [1, 2], "past share.delivery.count.limit (2) the record is archived"


_KILLED_MEMBER = textwrap.dedent("""
    import sys, time
    import moldau
    c = moldau.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                              "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    n = 0
    while n < 5:
        n += len(c.poll(0.5))
    print("acquired", n, flush=True)
    time.sleep(600)
""")


def test_killed_moldau_member_records_come_back_after_the_lock(share_broker: Any) -> None:
    b = share_broker
    topic, group = "mshare-kill", "mg-kill"
    _setup(b.bootstrap, topic, group, 5, **{"share.record.lock.duration.ms": str(LOCK_MS)})
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_MEMBER, b.bootstrap, group, topic],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("acquired 5"), line
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.time()
    finally:
        proc.kill()
        proc.wait(10)
    c = _consumer(b.bootstrap, group, topic)
    try:
        got = []
        for r in c:  # the blocking consumer's iteration
            got.append(r)
            if len(got) == 5:
                break
        first = time.time()
        c.commit_sync(10)
    finally:
        c.close()
    assert sorted(r.offset for r in got) == [0, 1, 2, 3, 4]
    assert all(r.delivery_count == 2 for r in got)
    assert first - killed_at < LOCK_MS / 1000 + 10


def test_close_releases_held_records_and_async_core(share_broker: Any) -> None:
    """Explicit mode: records held at close go back at once (delivery count 2 for the next member); the
    asyncio core with commit_async."""
    import asyncio

    b = share_broker
    topic, group = "mshare-close", "mg-close"
    _setup(b.bootstrap, topic, group, 4, **{"share.record.lock.duration.ms": "60000"})
    c = _consumer(b.bootstrap, group, topic, explicit=True)
    try:
        held = _poll_until(c, lambda got: len(got) >= 4, 20)
    finally:
        c.close()
    assert sorted(r.offset for r in held) == [0, 1, 2, 3]

    async def second() -> list[Any]:
        async with moldau.aio.ShareConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group) as ac:
            got: list[Any] = []
            async for r in ac:
                got.append(r)
                if len(got) == 4:
                    break
            res = await ac.commit_async()
            assert all(e is None for e in res.values()), res
            return got

    got = asyncio.run(second())
    assert sorted(r.offset for r in got) == [0, 1, 2, 3], "released by close, well before the 60 s lock"
    assert all(r.delivery_count == 2 for r in got)


def test_moldau_and_confluent_members_share_one_group(share_broker: Any) -> None:
    ck = pytest.importorskip("confluent_kafka")
    if not hasattr(ck, "ShareConsumer"):  # pragma: no cover
        pytest.skip("confluent-kafka without ShareConsumer")
    CkShareConsumer = ck.ShareConsumer

    b = share_broker
    topic, group, n = "mshare-interop", "mg-interop", 200
    _setup(b.bootstrap, topic, group, 0)
    mc = _consumer(b.bootstrap, group, topic, **{"max.poll.records": 5})
    kc = CkShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, "max.poll.records": 5})
    kc.subscribe([topic])
    try:
        seen, n = _members([
            lambda: [(r.offset, r.delivery_count) for r in mc.poll(0.2)],
            lambda: [(m.offset(), m.delivery_count()) for m in kc.poll(0.2) if not m.error()],
        ], n, b.bootstrap, topic)
        mc.commit_sync(10)
        kc.commit_sync(10)
    finally:
        mc.close()
        kc.close()
    offsets = sorted(o for v in seen for o, _ in v)
    assert offsets == list(range(n)), "every record accepted exactly once across the two clients"
    assert seen[0] and seen[1], [len(v) for v in seen]


def test_admin_and_cli_share_groups(share_broker: Any) -> None:
    """moldau's Admin (ListGroups type share, ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets,
    DeleteGroups) and ``moldau share-groups list|describe|reset-offsets|delete-offsets|delete``."""
    from .test_cli_topics import cli, js, ok, one_line_error

    b = share_broker
    topic, group = "mshare-admin", "mg-admin"
    _setup(b.bootstrap, topic, group, 10)
    tp = moldau.TopicPartition(topic, 0)
    c = _consumer(b.bootstrap, group, topic)
    with moldau.Admin(bootstrap_servers=b.bootstrap) as a:
        try:
            got = _poll_until(c, lambda got: len(got) >= 10, 20)
            assert sorted(r.offset for r in got) == list(range(10))
            assert c.poll(0.5) == []  # implicit mode: this poll's ShareFetch accepts the previous records
            _assert_all_acknowledged(b, a.list_share_group_offsets(group)[tp], 10)
            assert c.commit_sync(10) == {}  # nothing left to send
            assert group in [g.group_id for g in a.list_share_groups()]
            d = a.describe_share_groups([group])[group]
            assert d.state == "Stable" and len(d.members) == 1 and d.members[0].assignment == [tp]
            assert d.members[0].member_id == c.member_id
            members = js(cli("share-groups", "describe", group, "--members", "--json", bootstrap=b.bootstrap))
            assert [m["assignment"] for m in members["members"]] == [[{"topic": topic, "partition": 0}]]
            # a group with members cannot be reset
            one_line_error(cli("share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest",
                               "--execute", bootstrap=b.bootstrap))
        finally:
            c.close()
        before = a.list_share_group_offsets(group)[tp]
        _assert_all_acknowledged(b, before, 10)
        table = ok(cli("share-groups", "describe", group, bootstrap=b.bootstrap)).stdout
        assert "START-OFFSET" in table and topic in table
        plan = js(cli("share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--json",
                      bootstrap=b.bootstrap))
        assert plan["executed"] is False and plan["offsets"][0]["new_offset"] == 0
        assert a.list_share_group_offsets(group)[tp] == before, "a dry run changes nothing"
        ok(cli("share-groups", "reset-offsets", group, "--topic", topic, "--to-offset", "6", "--execute",
               bootstrap=b.bootstrap))
        assert a.list_share_group_offsets(group)[tp].start_offset == 6
        c = _consumer(b.bootstrap, group, topic)
        try:
            got = _poll_until(c, lambda got: len(got) >= 4, 20)
            _poll_until(c, lambda got: False, 1)
        finally:
            c.close()
        assert sorted(r.offset for r in got) == [6, 7, 8, 9], "the group starts at the reset offset"
        a.alter_share_group_offsets(group, {tp: 2})
        assert a.list_share_group_offsets(group)[tp].start_offset == 2
        ok(cli("share-groups", "delete-offsets", group, "--topic", topic, bootstrap=b.bootstrap))
        assert tp not in a.list_share_group_offsets(group)
        ok(cli("share-groups", "delete", group, bootstrap=b.bootstrap))
        assert group not in [g["group"] for g in js(cli("share-groups", "list", "--json",
                                                        bootstrap=b.bootstrap))]
        assert "no such share group" in one_line_error(cli("share-groups", "delete", group,
                                                           bootstrap=b.bootstrap))


def _assert_all_acknowledged(b: Any, off: Any, n: int) -> None:
    """Records 0..n-1 acknowledged: moldau's start offset (SPSO) is past them at once; a Kafka broker writes
    the state with the start offset it had before the acknowledgement moved it (the share coordinator's
    summary trails by one write), its lag (end offset less the SPSO and the acknowledged records past it)
    is 0."""
    assert off.lag == 0, off
    if b.kind == "kafka":
        assert 0 <= off.start_offset <= n, off
    else:
        assert off.start_offset == n, off


def test_renew_keeps_the_lock(share_broker: Any) -> None:
    """RENEW restarts a record's lock: renewed every second past twice the lock duration, the record does not
    reach a second member; accepted, it never comes back."""
    b = share_broker
    topic, group = "mshare-renew", "mg-renew"
    _setup(b.bootstrap, topic, group, 1, **{"share.record.lock.duration.ms": "1500"})
    c = _consumer(b.bootstrap, group, topic, explicit=True)
    other = _consumer(b.bootstrap, group, topic)
    try:
        got = _poll_until(c, lambda got: len(got) >= 1, 20)
        assert [r.offset for r in got] == [0]
        end = time.time() + 3.5
        stolen: list[Any] = []
        while time.time() < end:
            c.acknowledge(got[0], AcknowledgeType.RENEW)
            assert all(e is None for e in c.commit_sync(10).values())
            stolen += other.poll(0.8)
        assert stolen == [], "a renewed record stays with its member"
        c.acknowledge(got[0], AcknowledgeType.ACCEPT)
        assert all(e is None for e in c.commit_sync(10).values())
        assert _poll_until(other, lambda got: False, 2) == []
    finally:
        c.close()
        other.close()

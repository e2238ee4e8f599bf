"""Consumer groups with moldau consumers: assignment, rebalances, listeners, commits, leaving."""

from __future__ import annotations

import asyncio
import time

import pytest

from moldau.client import AsyncConsumer, Consumer, OffsetAndMetadata, Producer, TopicPartition

from harness.clientutil import FAST_GROUP, wait_until


def _fill(bootstrap, topic, partitions, per_partition):
    with Producer(bootstrap_servers=bootstrap) as p:
        for part in range(partitions):
            for i in range(per_partition):
                p.send(topic, b"%d-%d" % (part, i), partition=part)
        p.flush()


class Recorder:
    def __init__(self):
        self.events = []

    def on_partitions_assigned(self, parts):
        self.events.append(("assigned", sorted(parts)))

    def on_partitions_revoked(self, parts):
        self.events.append(("revoked", sorted(parts)))


def _poll_both(c1, c2, until, timeout=30.0):
    deadline = time.monotonic() + timeout
    got = []
    while time.monotonic() < deadline:
        got += c1.poll(0.1)
        got += c2.poll(0.1)
        if until(got):
            return got
    raise AssertionError(f"group did not settle: c1={c1.assignment()} c2={c2.assignment()}")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_two_consumers_split_partitions_and_take_over(broker, make_topic, group_id, strategy):
    topic = make_topic(4)
    _fill(broker.bootstrap, topic, 4, 5)
    cfg = dict(FAST_GROUP, bootstrap_servers=broker.bootstrap, group_id=group_id,
               partition_assignment_strategy=strategy, enable_auto_commit=False)
    r1, r2 = Recorder(), Recorder()
    c1 = Consumer(**cfg)
    c2 = Consumer(**cfg)
    try:
        c1.subscribe([topic], listener=r1)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += c1.poll(0.2)
        assert len(got) == 20 and len(c1.assignment()) == 4
        c1.commit()
        c2.subscribe([topic], listener=r2)
        _poll_both(c1, c2, lambda _g: len(c1.assignment()) == 2 and len(c2.assignment()) == 2)
        assert c1.assignment() | c2.assignment() == {TopicPartition(topic, p) for p in range(4)}
        assert c1.generation == c2.generation > 0
        # nothing is read twice: positions come from the commit
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            for part in range(4):
                p.send(topic, b"new-%d" % part, partition=part)
            p.flush()
        more = _poll_both(c1, c2, lambda g: len(g) >= 4)
        assert sorted(r.value for r in more) == [b"new-%d" % p for p in range(4)]
        if strategy == "cooperative-sticky":
            # incremental: c1 only gave up the two partitions that moved
            revoked = [e for e in r1.events if e[0] == "revoked"]
            assert revoked and all(len(parts) == 2 for _, parts in revoked)
        else:
            assert ("revoked", sorted(TopicPartition(topic, p) for p in range(4))) in r1.events
        c2.close()
        wait_until(lambda: c1.poll(0.2) is not None and len(c1.assignment()) == 4, timeout=30,
                   what="c1 to take over every partition")
    finally:
        c1.close()
        c2.close()


def test_commit_committed_and_restart_position(broker, make_topic, group_id):
    topic = make_topic(2)
    _fill(broker.bootstrap, topic, 2, 10)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    cfg = dict(FAST_GROUP, bootstrap_servers=broker.bootstrap, group_id=group_id, enable_auto_commit=False)
    with Consumer(**cfg) as c:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(0.2)
        c.commit({tp0: 4, tp1: 7})
        committed = c.committed([tp0, tp1])
        assert (committed[tp0].offset, committed[tp1].offset) == (4, 7)
    with Consumer(**cfg) as c:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 9 and time.monotonic() < deadline:
            got += c.poll(0.2)
        assert sorted((r.partition, r.offset) for r in got) == [(0, o) for o in range(4, 10)] + [
            (1, 7),
            (1, 8),
            (1, 9),
        ]


@pytest.mark.tansu_gap("OffsetFetch answers no metadata for a commit that had some")
def test_commit_metadata_roundtrips(broker, make_topic, group_id):
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id) as c:
        c.commit({tp: OffsetAndMetadata(4, "meta-ü ✓")})
        om = c.committed(tp)[tp]
        assert (om.offset, om.metadata) == (4, "meta-ü ✓")


def test_auto_commit_on_close(broker, make_topic, group_id):
    topic = make_topic(1)
    _fill(broker.bootstrap, topic, 1, 6)
    tp = TopicPartition(topic, 0)
    cfg = dict(FAST_GROUP, bootstrap_servers=broker.bootstrap, group_id=group_id,
               enable_auto_commit=True, auto_commit_interval_ms=100)
    with Consumer(**cfg) as c:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            got += c.poll(0.2)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id) as c:
        assert c.committed([tp])[tp].offset == 6


def test_assign_mode_commits_without_membership(broker, make_topic, group_id):
    topic = make_topic(1)
    _fill(broker.bootstrap, topic, 1, 5)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id, auto_offset_reset="earliest",
                  enable_auto_commit=False) as c:
        c.assign([tp])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got += c.poll(0.2)
        c.commit()
        assert c.committed(tp)[tp].offset == 5
        fut = c.commit_async({tp: 3})
        fut.result(10)
        assert c.committed(tp)[tp].offset == 3
    # a new consumer of the group starts from the commit
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id, auto_offset_reset="earliest") as c:
        c.assign([tp])
        assert c.position(tp) == 3


def test_listener_may_call_blocking_methods_in_sync_consumer(broker, make_topic, group_id):
    topic = make_topic(2)
    _fill(broker.bootstrap, topic, 2, 3)
    seen = {}

    class Listener:
        def on_partitions_assigned(self, parts):
            for tp in parts:
                seen[tp] = c.committed(tp)[tp]  # blocking call from inside the callback

        def on_partitions_revoked(self, parts):
            c.commit()

    c = Consumer(**dict(FAST_GROUP, bootstrap_servers=broker.bootstrap, group_id=group_id))
    try:
        c.subscribe([topic], listener=Listener())
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            got += c.poll(0.2)
        assert len(got) == 6
        assert set(seen) == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    finally:
        c.close()
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id) as c2:
        res = c2.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert {tp: om.offset for tp, om in res.items()} == {
            TopicPartition(topic, 0): 3,
            TopicPartition(topic, 1): 3,
        }


def test_async_consumer_group_and_pattern(broker, make_topic, group_id):
    t1 = make_topic(1)
    _fill(broker.bootstrap, t1, 1, 4)

    async def main():
        async with AsyncConsumer(group_id=group_id, bootstrap_servers=broker.bootstrap, **FAST_GROUP) as c:
            events = []

            class L:
                async def on_partitions_assigned(self, parts):
                    events.append(sorted(parts))

            c.subscribe(pattern=t1.replace(".", r"\.")[:-3] + ".*", listener=L())
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 4 and time.monotonic() < deadline:
                got += await c.poll(0.2)
            return got, events, c.subscription()

    got, events, subscription = asyncio.run(main())
    assert [r.value for r in got] == [b"0-%d" % i for i in range(4)]
    assert events and events[0] == [TopicPartition(t1, 0)]
    assert t1 in subscription


@pytest.mark.moldau_only(reason="transactional offset commits validated against the live group (KIP-447)")
def test_consumer_group_metadata_and_send_offsets_to_transaction(broker, make_topic, group_id):
    """consumer_group_metadata() snapshots the member (generation, member id, instance id); the transactional
    producer sends it with the offsets: accepted while current, refused once the generation is stale."""
    import uuid

    from moldau.client import ConsumerGroupMetadata, IllegalStateError, KafkaError

    topic = make_topic(partitions=1)
    _fill(broker.bootstrap, topic, 1, 5)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id, group_instance_id="inst-1",
                  enable_auto_commit=False, **FAST_GROUP) as c:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got += c.poll(0.2)
        meta = c.consumer_group_metadata()
        assert isinstance(meta, ConsumerGroupMetadata)
        assert meta.group_id == group_id and meta.generation_id >= 1 and meta.member_id
        assert meta.group_instance_id == "inst-1"
        assert (meta.generation_id, meta.member_id) == (c.generation, c.member_id)
        tp = TopicPartition(topic, 0)
        with Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:8]}") as p:
            p.init_transactions(20)
            p.begin_transaction()
            p.send(topic, b"out")
            p.send_offsets_to_transaction({tp: 3}, meta, 20)
            p.commit_transaction(20)
            assert c.committed([tp])[tp].offset == 3
            p.begin_transaction()
            p.send_offsets_to_transaction({tp: 5}, c, 20)  # the consumer itself: the same metadata
            p.commit_transaction(20)
            assert c.committed([tp])[tp].offset == 5
            stale = ConsumerGroupMetadata(group_id, meta.generation_id + 7, meta.member_id, "inst-1")
            p.begin_transaction()
            with pytest.raises(KafkaError) as ei:
                p.send_offsets_to_transaction({tp: 1}, stale, 20)
            assert ei.value.code in (22, 25)  # ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: a zombie is fenced
            p.abort_transaction(20)
        assert c.committed([tp])[tp].offset == 5
    with Consumer(bootstrap_servers=broker.bootstrap) as c2:
        with pytest.raises(IllegalStateError):
            c2.consumer_group_metadata()


def _settle(consumers, cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        if cond():
            return
    raise AssertionError(f"group did not settle: {[sorted(c.assignment()) for c in consumers]}")


def test_sticky_third_member_takes_without_reshuffling(broker, make_topic, group_id):
    """Eager sticky: members report their previous partitions in the subscription user data, so when a third
    member joins the first two keep two of their three each."""
    topic = make_topic(6)
    cfg = dict(FAST_GROUP, bootstrap_servers=broker.bootstrap, group_id=group_id,
               partition_assignment_strategy="sticky", enable_auto_commit=False)
    cs = [Consumer(**cfg) for _ in range(3)]
    try:
        cs[0].subscribe([topic])
        cs[1].subscribe([topic])
        _settle(cs[:2], lambda: len(cs[0].assignment()) == len(cs[1].assignment()) == 3)
        before = [cs[0].assignment(), cs[1].assignment()]
        cs[2].subscribe([topic])
        _settle(cs, lambda: [len(c.assignment()) for c in cs] == [2, 2, 2])
        assert cs[0].assignment() <= before[0] and cs[1].assignment() <= before[1]
        assert set().union(*(c.assignment() for c in cs)) == {TopicPartition(topic, p) for p in range(6)}
    finally:
        for c in cs:
            c.close()


@pytest.mark.tansu_gap("tansu rebalances the group while a static member is away (its partitions move)")
def test_static_membership_restart_without_rebalance_and_fencing(broker, make_topic, group_id):
    """group.instance.id: closing sends no LeaveGroup, a restarted instance gets its partitions back and the
    other member is not disturbed; a second consumer with the same instance id fences the first, which gets
    FENCED_INSTANCE_ID from poll() instead of fighting back."""
    from moldau.client import KafkaError

    topic = make_topic(4)
    cfg = dict(FAST_GROUP, bootstrap_servers=broker.bootstrap, group_id=group_id,
               partition_assignment_strategy="range", enable_auto_commit=False)
    ra = Recorder()
    a = Consumer(group_instance_id="a", **cfg)
    b = Consumer(group_instance_id="b", **cfg)
    b2 = b3 = None
    try:
        a.subscribe([topic], listener=ra)
        b.subscribe([topic])
        # (the listener runs inside a later poll() than the one that saw the assignment change)
        _settle([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2 and ra.events
                and ra.events[-1] == ("assigned", sorted(a.assignment())))
        b_parts, a_parts, a_events = b.assignment(), a.assignment(), list(ra.events)
        b.close()
        t_end = time.monotonic() + 1.0
        while time.monotonic() < t_end:
            a.poll(0.1)
        assert a.assignment() == a_parts  # b's absence (within its session) moves nothing
        b2 = Consumer(group_instance_id="b", **cfg)
        b2.subscribe([topic])
        _settle([a, b2], lambda: b2.assignment() == b_parts)
        assert a.assignment() == a_parts
        assert ra.events == a_events  # no rebalance for a
        b3 = Consumer(group_instance_id="b", **cfg)
        b3.subscribe([topic])
        with pytest.raises(KafkaError, match="FENCED_INSTANCE_ID"):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                b2.poll(0.1)
                b3.poll(0.1)
        _settle([a, b3], lambda: b3.assignment() == b_parts)
    finally:
        for c in (a, b, b2, b3):
            if c is not None:
                c.close()

"""group.protocol=consumer (KIP-848): moldau consumers in a broker-assigned group (ConsumerGroupHeartbeat)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from moldau.client import Admin, AsyncConsumer, Consumer, Producer, TopicPartition

from harness.clientutil import wait_until
from harness.kafkautil import create_topic, unique_topic

pytestmark = pytest.mark.moldau_only(
    reason="KIP-848 consumer group protocol (tansu has only the classic one)"
)

# heartbeats every 300 ms instead of Kafka's 5 s, so that a reassignment settles quickly
FAST = {"group.consumer.heartbeat.interval.ms": "300", "group.consumer.min.heartbeat.interval.ms": "300",
        "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000"}


@pytest.fixture(scope="module")
def kbroker(module_broker_factory: Any) -> Any:
    return module_broker_factory(settings=FAST)


def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: bytes = b"") -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p:
        for part in range(partitions):
            for i in range(per_partition):
                p.send(topic, tag + b"%d-%d" % (part, i), partition=part)
        p.flush()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
        self.events.append(("assigned", sorted(parts)))

    def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
        self.events.append(("revoked", sorted(parts)))

    def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
        self.events.append(("lost", sorted(parts)))


def _member(bootstrap: str, group: str, **kw: Any) -> Consumer:
    return Consumer(bootstrap_servers=bootstrap, group_id=group, group_protocol="consumer",
                    auto_offset_reset="earliest", **kw)


def test_two_consumers_share_a_topic_and_take_over(kbroker: Any) -> None:
    bs = kbroker.bootstrap
    topic = create_topic(bs, unique_topic("kip848"), 4)
    group = unique_topic("g848")
    _fill(bs, topic, 4, 25)
    r1, r2 = Recorder(), Recorder()
    c1 = _member(bs, group)
    c2 = _member(bs, group)
    try:
        c1.subscribe([topic], listener=r1)
        got: list[Any] = []
        wait_until(lambda: (got.extend(c1.poll(0.1)), len(c1.assignment()) == 4)[1], what="c1 owns all")
        assert c1.generation >= 1 and c1.member_id
        c2.subscribe([topic], listener=r2)

        def settled() -> bool:
            got.extend(c1.poll(0.05))
            got.extend(c2.poll(0.05))
            a1, a2 = c1.assignment(), c2.assignment()
            return len(a1) == 2 and len(a2) == 2 and not a1 & a2

        wait_until(settled, timeout=20, what="two members with two partitions each")
        c1.commit()
        c2.commit()
        _fill(bs, topic, 4, 5, tag=b"late-")
        wait_until(lambda: (got.extend(c1.poll(0.05)), got.extend(c2.poll(0.05)), len(got) >= 120)[2],
                   what="every record")
        values = [r.value for r in got]
        assert len(values) == len(set(values)) == 120  # no duplicates, no gaps
        assert ("revoked", sorted(c2.assignment())) in r1.events  # c1 gave up what c2 now has
        meta = c2.consumer_group_metadata()
        assert meta.generation_id == c2.generation >= 1 and meta.member_id == c2.member_id
        with Admin(bootstrap_servers=bs) as admin:
            offs = admin.list_consumer_group_offsets(group, [TopicPartition(topic, p) for p in range(4)])
            assert sorted(o.offset for o in offs.values()) == [25, 25, 25, 25]
            # ConsumerGroupDescribe (DescribeGroups knows only classic groups)
            desc = admin.describe_consumer_groups([group])[group]
            assert (desc.group_type, desc.state, desc.protocol) == ("consumer", "Stable", "uniform")
            members = {mem.member_id: mem for mem in desc.members}
            assert set(members) == {c1.member_id, c2.member_id}
            assert set(members[c2.member_id].assignment) == c2.assignment()
            assert members[c1.member_id].member_epoch == c1.generation
            assert group in {g.group_id for g in admin.list_consumer_groups(types=["consumer"])}
            assert group not in {g.group_id for g in admin.list_consumer_groups(types=["classic"])}
        c2.close()  # leaves (epoch -1): c1 takes everything back
        wait_until(lambda: (c1.poll(0.05), len(c1.assignment()) == 4)[1], timeout=20, what="take-over")
        c1.commit()
        with Admin(bootstrap_servers=bs) as admin:
            offs = admin.list_consumer_group_offsets(group, [TopicPartition(topic, p) for p in range(4)])
            assert sorted(o.offset for o in offs.values()) == [30, 30, 30, 30]
    finally:
        c1.close()
        c2.close()


def test_static_member_keeps_its_partitions_across_a_restart(kbroker: Any) -> None:
    """group.instance.id: closing leaves with epoch -2, the broker keeps the member's partitions for it, and
    the restarted instance gets the same ones back without the other member moving."""
    bs = kbroker.bootstrap
    topic = create_topic(bs, unique_topic("kip848s"), 4)
    group = unique_topic("g848s")
    a = _member(bs, group, group_instance_id="a")
    b = _member(bs, group, group_instance_id="b")
    try:
        a.subscribe([topic])
        wait_until(lambda: (a.poll(0.05), len(a.assignment()) == 4)[1], what="a owns all")
        b.subscribe([topic])
        wait_until(lambda: (a.poll(0.05), b.poll(0.05), len(a.assignment()) == len(b.assignment()) == 2)[2],
                   timeout=20, what="split")
        b_parts = b.assignment()
        b.close()
        # during the static member's absence its partitions stay with it: a keeps its own two
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:
            a.poll(0.1)
        assert len(a.assignment()) == 2
        b = _member(bs, group, group_instance_id="b")
        b.subscribe([topic])
        wait_until(lambda: (a.poll(0.05), b.poll(0.05), b.assignment() == b_parts)[2], timeout=20,
                   what="b back with its partitions")
        assert len(a.assignment()) == 2
    finally:
        a.close()
        b.close()


def test_async_consumer_and_fencing(kbroker: Any) -> None:
    """An async member that is fenced (its heartbeat carries an epoch the broker never gave it:
    FENCED_MEMBER_EPOCH) hands its partitions back through on_partitions_lost, rejoins with epoch 0 under the
    same member id and gets them again with a newer epoch."""
    bs = kbroker.bootstrap
    topic = create_topic(bs, unique_topic("kip848a"), 2)
    group = unique_topic("g848a")
    _fill(bs, topic, 2, 10)

    async def main() -> tuple[int, list[tuple[str, list[TopicPartition]]]]:
        rec = Recorder()
        async with AsyncConsumer(bootstrap_servers=bs, group_id=group, group_protocol="consumer",
                                 auto_offset_reset="earliest") as c:
            c.subscribe([topic], listener=rec)
            got: list[Any] = []
            deadline = time.monotonic() + 20
            while len(got) < 20 and time.monotonic() < deadline:
                got += await c.poll(0.2)
            assert len(got) == 20
            coord = c._coordinator
            assert coord is not None
            first_epoch, member_id = c.generation, c.member_id
            # fence the member: pretend its epoch is one the broker never gave (FENCED_MEMBER_EPOCH)
            coord.member_epoch += 5
            coord._hb_wake.set()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                await c.poll(0.1)
                if ("lost", [TopicPartition(topic, 0), TopicPartition(topic, 1)]) in rec.events and \
                        len(c.assignment()) == 2 and c.generation > 0:
                    break
            assert len(c.assignment()) == 2 and c.generation > first_epoch
            assert c.member_id == member_id
            return len(got), rec.events

    n, events = asyncio.run(main())
    assert n == 20
    assert events[0] == ("assigned", [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert ("lost", [TopicPartition(topic, 0), TopicPartition(topic, 1)]) in events


def test_unsupported_server_assignor_is_raised_from_poll(kbroker: Any) -> None:
    from moldau.client import KafkaError

    bs = kbroker.bootstrap
    topic = create_topic(bs, unique_topic("kip848x"), 1)
    with _member(bs, unique_topic("g848x"), group_remote_assignor="no-such-assignor") as c:
        c.subscribe([topic])
        with pytest.raises(KafkaError, match="UNSUPPORTED_ASSIGNOR"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                c.poll(0.2)


def test_max_poll_interval_leaves_and_the_next_poll_rejoins(kbroker: Any) -> None:
    bs = kbroker.bootstrap
    topic = create_topic(bs, unique_topic("kip848p"), 2)
    rec = Recorder()
    with _member(bs, unique_topic("g848p"), max_poll_interval_ms=800) as c:
        c.subscribe([topic], listener=rec)
        wait_until(lambda: (c.poll(0.05), len(c.assignment()) == 2)[1], what="assigned")
        epoch = c.generation
        time.sleep(1.5)  # no poll(): the member leaves the group by itself
        assert c.generation == -1
        wait_until(
            lambda: (c.poll(0.05), len(c.assignment()) == 2 and c.generation > epoch)[1], what="rejoined"
        )
    parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert rec.events[:3] == [("assigned", parts), ("lost", parts), ("assigned", parts)]


def test_pattern_subscription(kbroker: Any) -> None:
    """A pattern is resolved by the client against metadata and sent as topic names; a new matching topic
    joins the subscription at the next metadata refresh."""
    bs = kbroker.bootstrap
    prefix = unique_topic("kip848re")
    t1 = create_topic(bs, f"{prefix}-a", 1)
    with _member(bs, unique_topic("g848re"), metadata_max_age_ms=300) as c:
        c.subscribe(pattern=f"{prefix}-.*")
        wait_until(lambda: (c.poll(0.05), c.assignment() == {TopicPartition(t1, 0)})[1], what="first topic")
        t2 = create_topic(bs, f"{prefix}-b", 2)
        wait_until(lambda: (c.poll(0.05), len(c.assignment()) == 3)[1], timeout=20, what="second topic")
        assert c.assignment() == {TopicPartition(t1, 0), TopicPartition(t2, 0), TopicPartition(t2, 1)}


def test_mixed_group_with_confluent_kafka(kbroker: Any) -> None:
    """A moldau member and a librdkafka member (group.protocol=consumer) share a topic: every record once,
    and the moldau member takes everything over when the other leaves."""
    from confluent_kafka import Consumer as CConsumer

    bs = kbroker.bootstrap
    topic = create_topic(bs, unique_topic("kip848mix"), 4)
    group = unique_topic("g848mix")
    _fill(bs, topic, 4, 10)
    m = _member(bs, group)
    c = CConsumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                   "auto.offset.reset": "earliest", "enable.auto.commit": True})
    seen: list[tuple[int, int]] = []
    try:
        m.subscribe([topic])
        c.subscribe([topic])

        def step() -> None:
            seen.extend((r.partition, r.offset) for r in m.poll(0.05))
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.offset()))

        def split() -> bool:
            step()
            return len(m.assignment()) == 2 and len(c.assignment()) == 2 and len(seen) >= 40

        wait_until(split, timeout=45, what="two members with two partitions each and every record")
        assert len(seen) == len(set(seen)) == 40
        assert {tp.partition for tp in m.assignment()} | {tp.partition for tp in c.assignment()} == {
            0,
            1,
            2,
            3,
        }
    finally:
        c.close()
    try:
        wait_until(lambda: (m.poll(0.05), len(m.assignment()) == 4)[1], timeout=30, what="take-over")
    finally:
        m.close()

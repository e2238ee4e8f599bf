"""The moldau admin client against a real broker."""

from __future__ import annotations

import asyncio
import time

import pytest

from moldau.client import (
    Admin,
    AlterConfigOp,
    AsyncAdmin,
    ConfigResource,
    Consumer,
    NewPartitions,
    NewTopic,
    Producer,
    TopicPartition,
)


@pytest.fixture
def admin(broker):
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        yield a


def test_create_list_describe_delete_topics(admin, topic):
    admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1, config={"retention.ms": "3600000"})]
    )
    assert admin.list_topics()[topic] == 3
    desc = admin.describe_topics([topic])[topic]
    assert [p.partition for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader >= 0 for p in desc.partitions)
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic(topic, 1)])
    res = admin.create_topics([NewTopic(topic, 1)], raise_errors=False)
    assert "TOPIC_ALREADY_EXISTS" in str(res[topic])
    admin.delete_topics([topic])
    deadline = time.monotonic() + 10
    while topic in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic not in admin.list_topics()


@pytest.mark.tansu_gap("tansu does not implement CreatePartitions")
def test_create_partitions(admin, make_topic, broker):
    t = make_topic(1)
    admin.create_partitions({t: NewPartitions(3)})
    deadline = time.monotonic() + 10
    while admin.list_topics().get(t) != 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert admin.list_topics()[t] == 3
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        assert p.send(t, b"x", partition=2).result(10).partition == 2


def test_describe_and_alter_configs(admin, make_topic):
    t = make_topic(1, config={"retention.ms": "7200000"})
    res = ConfigResource.topic(t)
    entries = admin.describe_configs([res])[res]
    assert entries["retention.ms"].value == "7200000"
    admin.incremental_alter_configs({res: [AlterConfigOp("retention.ms", "3600000"),
                                           AlterConfigOp("cleanup.policy", "compact")]})
    entries = admin.describe_configs([res])[res]
    assert entries["retention.ms"].value == "3600000"
    assert entries["cleanup.policy"].value == "compact"


def test_groups_offsets_records_cluster(admin, make_topic, broker, group_id):
    t = make_topic(2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(10):
            p.send(t, b"%d" % i, partition=i % 2).result(10)  # one record per batch
    tp0, tp1 = TopicPartition(t, 0), TopicPartition(t, 1)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id) as c:
        c.commit({tp0: 3, tp1: 4})
    assert {tp: om.offset for tp, om in admin.list_consumer_group_offsets(group_id, [tp0, tp1]).items()} == \
        {tp0: 3, tp1: 4}
    assert {tp: om.offset for tp, om in admin.list_consumer_group_offsets(group_id, [tp1]).items()} == {
        tp1: 4
    }
    assert group_id in {g.group_id for g in admin.list_consumer_groups()}
    desc = admin.describe_consumer_groups([group_id])[group_id]
    assert desc.group_id == group_id and desc.members == []
    offs = admin.list_offsets({tp0: "earliest", tp1: "latest"})
    assert offs[tp0].offset == 0 and offs[tp1].offset == 5
    admin.delete_consumer_groups([group_id])
    assert group_id not in {g.group_id for g in admin.list_consumer_groups()}
    cl = admin.describe_cluster()
    assert cl.brokers and all(b.port > 0 for b in cl.brokers)


def test_async_admin(broker, topic):
    async def main():
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as a:
            await a.create_topics([NewTopic(topic, 2)])
            topics = await a.list_topics()
            await a.delete_topics([topic])
            return topics

    assert asyncio.run(main())[topic] == 2


@pytest.mark.tansu_gap("OffsetFetch for all topics of a group answers a null topics array")
def test_list_all_group_offsets(admin, make_topic, broker, group_id):
    t = make_topic(2)
    tp0, tp1 = TopicPartition(t, 0), TopicPartition(t, 1)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id) as c:
        c.commit({tp0: 3, tp1: 4})
    assert {tp: om.offset for tp, om in admin.list_consumer_group_offsets(group_id).items()} == {
        tp0: 3,
        tp1: 4,
    }


@pytest.mark.tansu_gap("DeleteRecords is advertised but 'not yet implemented' (connection dropped)")
def test_delete_records(admin, make_topic, broker):
    t = make_topic(1)
    tp = TopicPartition(t, 0)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(5):
            p.send(t, b"%d" % i)
        p.flush()
    assert admin.delete_records({tp: 2}) == {tp: 2}
    assert admin.list_offsets({tp: "earliest"})[tp].offset == 2
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        assert c.position(tp) == 2


def test_alter_and_delete_group_offsets(admin, make_topic, broker, group_id, kind):
    """alter_consumer_group_offsets (OffsetCommit outside the group) and delete_consumer_group_offsets
    (OffsetDelete) on an empty group; the consumer then starts where the offsets say."""
    from moldau.client import KafkaError, OffsetAndMetadata

    t = make_topic(2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(10):
            p.send(t, b"%d" % i, partition=i % 2)
        p.flush()
    tp0, tp1 = TopicPartition(t, 0), TopicPartition(t, 1)
    res = admin.alter_consumer_group_offsets(group_id, {tp0: 2, tp1: OffsetAndMetadata(4, "from admin")})
    assert res == {tp0: None, tp1: None}
    got = admin.list_consumer_group_offsets(group_id, [tp0, tp1])
    assert (got[tp0].offset, got[tp1].offset) == (2, 4)
    if kind != "tansu":  # tansu drops commit metadata (a known gap, see test_groups)
        assert got[tp1].metadata == "from admin"
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        assert (c.position(tp0), c.position(tp1)) == (2, 4)
    if kind == "tansu":  # tansu does not offer OffsetDelete: a clear error, not a hang
        from moldau.client import UnsupportedVersionError

        with pytest.raises(UnsupportedVersionError, match="OffsetDelete"):
            admin.delete_consumer_group_offsets(group_id, [tp0])
        return
    assert admin.delete_consumer_group_offsets(group_id, [tp0]) == {tp0: None}
    assert set(admin.list_consumer_group_offsets(group_id, [tp0, tp1])) == {tp1}
    with pytest.raises(KafkaError) as ei:
        admin.delete_consumer_group_offsets(f"{group_id}-unknown", [tp0])
    assert ei.value.code == 69  # GROUP_ID_NOT_FOUND


@pytest.mark.moldau_only(reason="tansu's answers for offsets of an active group differ")
def test_group_offsets_of_an_active_group_and_describe_members(admin, make_topic, broker, group_id):
    from moldau.client import KafkaError

    t = make_topic(2)
    tp0 = TopicPartition(t, 0)
    with Consumer(
        t,
        bootstrap_servers=broker.bootstrap,
        group_id=group_id,
        client_id="member-a",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    ) as c:
        deadline = time.monotonic() + 20
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(0.1)
        c.commit({tp0: 1})
        # an active group refuses commits from outside it and keeps offsets of topics it subscribes to
        res = admin.alter_consumer_group_offsets(group_id, {tp0: 5}, raise_errors=False)
        assert isinstance(res[tp0], KafkaError) and res[tp0].code == 25  # UNKNOWN_MEMBER_ID
        res = admin.delete_consumer_group_offsets(group_id, [tp0], raise_errors=False)
        assert isinstance(res[tp0], KafkaError) and res[tp0].code == 86  # GROUP_SUBSCRIBED_TO_TOPIC
        desc = admin.describe_consumer_groups([group_id])[group_id]
        assert desc.state == "Stable" and desc.protocol_type == "consumer"
        assert desc.protocol in ("range", "cooperative-sticky")
        [member] = desc.members
        assert member.member_id == c.member_id and member.client_id == "member-a"
        assert sorted(member.assignment) == [TopicPartition(t, 0), TopicPartition(t, 1)]
        assert group_id in {g.group_id for g in admin.list_consumer_groups(states=["Stable"])}
        assert group_id not in {g.group_id for g in admin.list_consumer_groups(states=["Empty"])}
        with pytest.raises(KafkaError, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups([group_id])
    assert admin.list_consumer_group_offsets(group_id, [tp0])[tp0].offset == 1
    admin.delete_consumer_groups([group_id])
    assert admin.list_consumer_group_offsets(group_id, [tp0]) == {}

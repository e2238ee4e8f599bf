"""The share-group APIs (KIP-932) request by request on a real moldau broker: ShareGroupHeartbeat / Describe,
ShareFetch / ShareAcknowledge sessions and their errors, group configs, ListGroups / DescribeGroups /
DeleteGroups, Describe/Alter/DeleteShareGroupOffsets, FindCoordinator key type 2, the share-state RPCs and
the records they leave in ``__share_group_state``.

kafka-python has no classes for these APIs, so requests are encoded with moldau's declarations (held
against Kafka 4.2's JSON by tests/unit/test_protocol_kafka_python.py) on a plain socket."""

from __future__ import annotations

import socket
import struct
import uuid
from typing import Any

import pytest

from moldau.protocol import messages as m
from moldau.protocol.frame import encode_request
from moldau.protocol.share_state import SHARE_SNAPSHOT, SHARE_UPDATE, ShareKey, decode_key, decode_value

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource  # noqa: E402

from .test_share_groups import alter_group  # noqa: E402

pytestmark = [
    pytest.mark.moldau_only(reason="moldau's share-group handlers"),
    pytest.mark.kafka_differs(
        "moldau's answers request by request: moldau assigns a share group's partitions in the answer to the "
        "first heartbeat and serves FindCoordinator key type 2 at once; a Kafka 4.4 broker answers "
        "NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE while it creates and loads __consumer_offsets and "
        "__share_group_state, and assigns once the group coordinator has initialized the state"
    ),
    pytest.mark.single_broker("share groups are served by one broker so far"),
]

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 0, 3, 42
NON_EMPTY_GROUP, INVALID_RECORD_STATE = 68, 121
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 122, 123


class Raw:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.corr = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        self.corr += 1
        self.sock.sendall(
            encode_request(api_key, version, self.corr, "share-test", m.REQUESTS[api_key].new(**fields))
        )
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        (corr,) = struct.unpack_from(">i", data, 0)
        assert corr == self.corr
        msg = m.RESPONSES[api_key]
        off = 4 + (1 if msg.is_flexible(version) else 0)  # header v1: an empty tagged-field section
        obj, _ = msg.decode(data, version, off)
        return obj

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def test_share_group_apis(broker: Any, make_topic: Any) -> None:
    topic = make_topic(partitions=1)
    group = f"share-apis-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce(topic, value=b"r%d" % i)
    assert p.flush(15) == 0

    # group configs (ConfigResource GROUP)
    alter_group(admin, group, **{"share.auto.offset.reset": "by_duration:PT1H"})
    alter_group(admin, group, **{"share.auto.offset.reset": "earliest"})
    for bad in (
        {"share.auto.offset.reset": "by_duration:soon"},
        {"share.isolation.level": "dirty"},
        {"share.delivery.count.limit": "1"},
        {"no.such.config": "1"},
    ):
        with pytest.raises(KafkaException) as e:
            alter_group(admin, group, **bad)
        assert e.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    res = ConfigResource(ConfigResource.Type.GROUP, group)
    described = admin.describe_configs([res])[res].result(15)
    assert described["share.auto.offset.reset"].value == "earliest"
    assert described["share.record.lock.duration.ms"].value == "30000"
    assert described["share.isolation.level"].value == "read_uncommitted"

    raw = Raw(broker.bootstrap)
    try:
        member = str(uuid.uuid4())
        hb = raw.call(
            76,
            1,
            group_id=group,
            member_id=member,
            member_epoch=0,
            rack_id=None,
            subscribed_topic_names=[topic],
        )
        assert hb.error_code == NONE and hb.member_epoch >= 1
        (tp,) = hb.assignment.topic_partitions
        assert tp.partitions == [0]
        tid = tp.topic_id
        assert (
            raw.call(
                76,
                1,
                group_id=group,
                member_id=member,
                member_epoch=hb.member_epoch + 5,
                rack_id=None,
                subscribed_topic_names=None,
            ).error_code
            == 110
        )  # FENCED_MEMBER_EPOCH
        assert (
            raw.call(
                76,
                1,
                group_id=group,
                member_id="nobody",
                member_epoch=1,
                rack_id=None,
                subscribed_topic_names=None,
            ).error_code
            == 25
        )  # UNKNOWN_MEMBER_ID

        (d,) = raw.call(77, 1, group_ids=[group], include_authorized_operations=False).groups
        assert (d.error_code, d.group_state, d.assignor_name) == (NONE, "Stable", "simple")
        assert [x.member_id for x in d.members] == [member]
        assert d.members[0].assignment.topic_partitions[0].topic_name == topic

        listed = raw.call(16, 5, states_filter=[], types_filter=["share"]).groups
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed if g.group_id == group] == [
            (group, "share", "share")
        ]
        (dg,) = raw.call(15, 5, groups=[group], include_authorized_operations=False).groups
        assert (dg.error_code, dg.protocol_type, dg.group_state) == (NONE, "share", "Stable")

        # share sessions
        fetch = dict(
            group_id=group,
            member_id=member,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=100,
            batch_size=100,
            forgotten_topics_data=[],
        )
        topics = [
            m.ShareFetchRequest.FetchTopic(
                topic_id=tid,
                partitions=[
                    m.ShareFetchRequest.FetchPartition(partition_index=0, acknowledgement_batches=[])
                ],
            )
        ]
        assert (
            raw.call(78, 1, share_session_epoch=1, topics=topics, **fetch).error_code
            == SHARE_SESSION_NOT_FOUND
        )
        r = raw.call(78, 1, share_session_epoch=0, topics=topics, **fetch)
        assert r.error_code == NONE and r.acquisition_lock_timeout_ms == 30000
        (part,) = r.responses[0].partitions
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records] == [
            (0, 4, 1)
        ]
        assert len(part.records) > 0
        assert (
            raw.call(78, 1, share_session_epoch=7, topics=[], **fetch).error_code
            == INVALID_SHARE_SESSION_EPOCH
        )

        def ack(epoch: int, first: int, last: int, types: list[int], version: int = 1) -> Any:
            req = m.ShareAcknowledgeRequest
            return raw.call(
                79,
                version,
                group_id=group,
                member_id=member,
                share_session_epoch=epoch,
                topics=[
                    req.AcknowledgeTopic(
                        topic_id=tid,
                        partitions=[
                            req.AcknowledgePartition(
                                partition_index=0,
                                acknowledgement_batches=[
                                    req.AcknowledgementBatch(
                                        first_offset=first, last_offset=last, acknowledge_types=types
                                    )
                                ],
                            )
                        ],
                    )
                ],
            )

        a = ack(1, 0, 1, [1])  # accept 0-1
        assert a.error_code == NONE and a.responses[0].partitions[0].error_code == NONE
        assert ack(2, 0, 0, [1]).responses[0].partitions[0].error_code == INVALID_RECORD_STATE
        a = ack(3, 2, 4, [4], version=2)  # renew 2-4
        assert a.responses[0].partitions[0].error_code == NONE and a.acquisition_lock_timeout_ms == 30000
        assert ack(4, 2, 3, [1, 9]).responses[0].partitions[0].error_code == INVALID_REQUEST

        def offsets() -> list[tuple[int, int]]:
            req = m.DescribeShareGroupOffsetsRequest
            (g,) = raw.call(
                90, 1, groups=[req.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]
            ).groups
            assert g.error_code == NONE
            return [(x.start_offset, x.lag) for t in g.topics for x in t.partitions]

        assert offsets() == [(2, 3)]
        (dr,) = raw.call(42, 2, groups_names=[group]).results
        assert dr.error_code == NON_EMPTY_GROUP
        alter = m.AlterShareGroupOffsetsRequest
        req_topics = [
            alter.AlterShareGroupOffsetsRequestTopic(
                topic_name=topic,
                partitions=[alter.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=4)],
            )
        ]
        assert raw.call(91, 0, group_id=group, topics=req_topics).error_code == NON_EMPTY_GROUP
        assert (
            raw.call(
                76,
                1,
                group_id=group,
                member_id=member,
                member_epoch=-1,
                rack_id=None,
                subscribed_topic_names=None,
            ).error_code
            == NONE
        )
        r = raw.call(91, 0, group_id=group, topics=req_topics)
        assert r.error_code == NONE and r.responses[0].partitions[0].error_code == NONE
        assert offsets() == [(4, 1)]
        dl = m.DeleteShareGroupOffsetsRequest
        r = raw.call(92, 0, group_id=group, topics=[dl.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])
        assert r.error_code == NONE and r.responses[0].error_code == NONE
        assert offsets() == []
        (dr,) = raw.call(42, 2, groups_names=[group]).results
        assert dr.error_code == NONE
        assert group not in [g.group_id for g in raw.call(16, 5, states_filter=[], types_filter=[]).groups]
    finally:
        raw.close()


def test_share_state_rpcs_and_records(broker: Any, make_topic: Any) -> None:
    topic = make_topic(partitions=1)
    group = f"share-state-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cid = admin.describe_topics(ck.TopicCollection([topic]))[topic].result(15).topic_id
    tid = uuid.UUID(
        int=((cid.get_most_significant_bits() & (2**64 - 1)) << 64)
        | (cid.get_least_significant_bits() & (2**64 - 1))
    )
    key = ShareKey(group, tid, 0)
    raw = Raw(broker.bootstrap)
    try:
        fc = raw.call(10, 6, key_type=2, coordinator_keys=[key.coordinator_key(), "no-colons"])
        assert [(c.error_code, c.node_id) for c in fc.coordinators] == [(NONE, 1), (INVALID_REQUEST, -1)]

        def part(msg: Any, data: str, **fields: Any) -> list[Any]:
            cls = msg.classes
            return [cls[data](topic_id=tid, partitions=[cls["PartitionData"](partition=0, **fields)])]

        def result(r: Any) -> Any:
            (t,) = r.results
            (p,) = t.partitions
            return p

        ini = m.InitializeShareGroupStateRequest
        assert (
            result(
                raw.call(
                    83,
                    0,
                    group_id=group,
                    topics=part(ini, "InitializeStateData", state_epoch=1, start_offset=10),
                )
            ).error_code
            == NONE
        )
        wr = m.WriteShareGroupStateRequest
        batch = wr.classes["StateBatch"]
        batches = [
            batch(first_offset=10, last_offset=12, delivery_state=2, delivery_count=1),
            batch(first_offset=13, last_offset=13, delivery_state=0, delivery_count=3),
        ]

        def write(state_epoch: int, start_offset: int, dcc: int, batches: list[Any]) -> int:
            topics = part(
                wr,
                "WriteStateData",
                state_epoch=state_epoch,
                leader_epoch=0,
                start_offset=start_offset,
                delivery_complete_count=dcc,
                state_batches=batches,
            )
            return int(result(raw.call(85, 1, group_id=group, topics=topics)).error_code)

        assert write(1, 11, 2, batches) == NONE
        assert write(0, -1, -1, []) == 124  # FENCED_STATE_EPOCH
        rd = m.ReadShareGroupStateRequest
        got = result(raw.call(84, 0, group_id=group, topics=part(rd, "ReadStateData", leader_epoch=0)))
        assert (got.error_code, got.state_epoch, got.start_offset) == (NONE, 1, 11)
        assert [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in got.state_batches
        ] == [(11, 12, 2, 1), (13, 13, 0, 3)]
        sm = m.ReadShareGroupStateSummaryRequest
        got = result(raw.call(87, 1, group_id=group, topics=part(sm, "ReadStateSummaryData", leader_epoch=0)))
        assert (got.error_code, got.state_epoch, got.start_offset, got.delivery_complete_count) == (
            NONE,
            1,
            11,
            2,
        )
        dl = m.DeleteShareGroupStateRequest
        assert result(raw.call(86, 0, group_id=group, topics=part(dl, "DeleteStateData"))).error_code == NONE
        got = result(raw.call(84, 0, group_id=group, topics=part(rd, "ReadStateData", leader_epoch=0)))
        assert got.error_code == UNKNOWN_TOPIC_OR_PARTITION
    finally:
        raw.close()

    # the records in __share_group_state, in Kafka's formats: snapshot, update, tombstone
    from moldau.protocol.share_state import state_partition

    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{group}", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition("__share_group_state", state_partition(key, 50), 0)])
        seen = []
        for _ in range(40):
            msg = c.poll(0.5)
            if msg is None or msg.error():
                if seen and seen[-1][1] is None:
                    break
                continue
            rtype, k = decode_key(msg.key())
            if k == key:
                seen.append((rtype, None if msg.value() is None else decode_value(rtype, msg.value())))
    finally:
        c.close()
    assert [t for t, _ in seen] == [SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_SNAPSHOT]
    assert seen[0][1] is not None and seen[0][1].start_offset == 10 and seen[0][1].state_epoch == 1
    assert (
        seen[1][1] is not None and seen[1][1].start_offset == 11 and seen[1][1].delivery_complete_count == 2
    )
    assert seen[2][1] is None  # the tombstone

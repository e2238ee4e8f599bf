"""Behaviour of the generated codecs and classes: defaults, names, records handling, tags, errors."""

from __future__ import annotations

import struct
import uuid

import pytest

from moldau.protocol import messages as m
from moldau.protocol.errors import ProtocolDecodeError, ProtocolEncodeError
from moldau.protocol.schema import F, Message, snake_case


def test_snake_case_names() -> None:
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("TopicID") == "topic_id"
    assert snake_case("TopicId") == "topic_id"
    assert snake_case("ISRNodes") == "isr_nodes"
    assert snake_case("timeoutMs") == "timeout_ms"
    assert snake_case("Global") == "global_"  # keywords get a trailing underscore


def test_defaults_follow_kafka() -> None:
    req = m.FetchRequest.new()
    assert req.replica_id == -1 and req.max_bytes == 0x7FFFFFFF and req.session_epoch == -1
    assert req.cluster_id is None and req.rack_id == "" and req.topics == []
    assert req.replica_state == m.FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    p = m.FetchRequest.FetchPartition()
    assert p.current_leader_epoch == -1 and p.high_watermark == 0x7FFFFFFFFFFFFFFF
    assert p.replica_directory_id == uuid.UUID(int=0)
    resp = m.ProduceRequest.new()
    assert resp.transactional_id is None
    # mutable defaults are per instance
    a, b = m.MetadataRequest.new(), m.MetadataRequest.new()
    assert a.topics is None or a.topics is not b.topics


def test_eq_repr_slots() -> None:
    T = m.CreateTopicsRequest.CreatableTopic
    a = T(name="t", num_partitions=3)
    assert a == T(name="t", num_partitions=3)
    assert a != T(name="t", num_partitions=4)
    assert "CreatableTopic(name='t', num_partitions=3" in repr(a)
    with pytest.raises(AttributeError):
        a.not_a_field = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        T(no_such_field=1)  # type: ignore[call-arg]
    assert a.to_dict()["name"] == "t"


def test_fields_absent_in_version_are_skipped_and_defaulted() -> None:
    P = m.ProduceRequest
    o = P.new(transactional_id="tx", acks=1, timeout_ms=5, topic_data=[])
    v2 = P.encode(o, 2)
    assert v2 == struct.pack(">hii", 1, 5, 0)  # no transactional id before v3
    back, _ = P.decode(v2, 2)
    assert back.transactional_id is None
    assert P.decode(P.encode(o, 3), 3)[0].transactional_id == "tx"


def _produce(records: object) -> object:
    P = m.ProduceRequest
    return P.new(acks=-1, timeout_ms=1000, topic_data=[
        P.TopicProduceData(name="t", partition_data=[P.PartitionProduceData(index=0, records=records)])])


@pytest.mark.parametrize("version", [3, 9])
def test_records_are_zero_copy_on_decode(version: int) -> None:
    payload = bytes(range(200))
    frame = m.ProduceRequest.encode(_produce(payload), version)
    obj, _ = m.ProduceRequest.decode(frame, version)
    rec = obj.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec == payload
    assert rec.obj is frame  # a view of the input, not a copy


class _Chunked:
    def __init__(self, *chunks: bytes) -> None:
        self._chunks = list(chunks)

    def __len__(self) -> int:
        return sum(len(c) for c in self._chunks)

    def chunks(self) -> list[bytes]:
        return self._chunks


@pytest.mark.parametrize("version", [3, 9])
def test_records_values_and_encode_parts(version: int) -> None:
    P = m.ProduceRequest
    a, b = b"A" * 50, b"B" * 70
    plain = P.encode(_produce(a + b), version)
    for value in (a + b, bytearray(a + b), memoryview(a + b), [a, memoryview(b)], _Chunked(a, b)):
        assert P.encode(_produce(value), version) == plain
    parts = P.encode_parts(_produce(_Chunked(a, b)), version)
    assert b"".join(bytes(p) for p in parts) == plain
    assert any(p is a for p in parts) and any(p is b for p in parts)  # payloads not copied
    # null records
    back, _ = P.decode(P.encode(_produce(None), version), version)
    assert back.topic_data[0].partition_data[0].records is None


def test_fetch_response_encode_parts_keeps_chunks() -> None:
    R = m.FetchResponse
    chunks = [b"x" * 100, b"y" * 100]
    resp = R.new(responses=[R.FetchableTopicResponse(topic="t", partitions=[
        R.PartitionData(partition_index=i, high_watermark=10, records=list(chunks)) for i in range(3)])])
    parts = R.encode_parts(resp, 11)
    assert sum(1 for p in parts if p is chunks[0]) == 3
    joined = b"".join(bytes(p) for p in parts)
    assert joined == R.encode(resp, 11)
    back, _ = R.decode(joined, 11)
    assert bytes(back.responses[0].partitions[2].records) == b"".join(chunks)


def test_unknown_tags_are_kept_and_written_back() -> None:
    R = m.ApiVersionsRequest
    o = R.new(client_software_name="c", client_software_version="1", _unknown_tags={7: b"\x01\x02", 3: b""})
    buf = R.encode(o, 3)
    assert buf.endswith(bytes([2, 3, 0, 7, 2, 1, 2]))  # sorted by tag
    back, _ = R.decode(buf, 3)
    assert back._unknown_tags == {3: b"", 7: b"\x01\x02"}
    assert R.encode(back, 3) == buf


def test_known_tagged_fields_written_only_when_not_default() -> None:
    R = m.FetchRequest
    base = R.new(max_wait_ms=1, min_bytes=1)
    plain = R.encode(base, 12)
    assert plain.endswith(b"\x00")  # no tagged fields
    base.cluster_id = "c1"
    tagged = R.encode(base, 12)
    assert tagged.endswith(bytes([1, 0, 3, 3]) + b"c1")  # one field, tag 0, size 3, compact "c1"
    back, _ = R.decode(tagged, 12)
    assert back.cluster_id == "c1"
    # tagged struct: written only when it differs from the default struct
    base.cluster_id = None
    base.replica_state = R.ReplicaState(replica_id=5, replica_epoch=7)
    back, _ = R.decode(R.encode(base, 15), 15)
    assert back.replica_state == R.ReplicaState(replica_id=5, replica_epoch=7)
    base.replica_state = R.ReplicaState()
    assert R.encode(base, 15).endswith(b"\x00")


def test_nullable_struct() -> None:
    R = m.ConsumerGroupHeartbeatResponse
    assert R.new().assignment is None
    o = R.new(member_id="m", assignment=R.Assignment(topic_partitions=[
        R.TopicPartitions(topic_id=uuid.UUID(int=5), partitions=[1, 2])]))
    back, _ = R.decode(R.encode(o, 1), 1)
    assert back == o
    back, _ = R.decode(R.encode(R.new(), 0), 0)
    assert back.assignment is None


def test_decode_errors_are_protocol_decode_errors() -> None:
    with pytest.raises(ProtocolDecodeError):
        m.MetadataRequest.decode(b"\x00\x00", 0)
    # absurd array length: refused before allocating anything
    with pytest.raises(ProtocolDecodeError):
        m.MetadataRequest.decode(struct.pack(">i", 0x7FFFFFFF), 0)
    with pytest.raises(ProtocolDecodeError):
        m.MetadataRequest.decode(b"\xff\xff\xff\xff\x7f", 9)  # varint too long
    with pytest.raises(ProtocolDecodeError):
        m.MetadataRequest.decode(struct.pack(">i", -2), 0)  # negative non-null length
    # invalid utf-8 is not a decode error: as Kafka's readString (new String(bytes, UTF_8)), each malformed
    # byte becomes U+FFFD and the request is answered (a topic named so is INVALID_TOPIC_EXCEPTION)
    bad = struct.pack(">ih", 1, 2) + b"\xff\xfe"
    assert m.MetadataRequest.decode(bad, 0)[0].topics[0].name == "\ufffd\ufffd"
    with pytest.raises(ProtocolDecodeError):
        m.MetadataRequest.decode(b"", 99)  # unsupported version


def test_encode_errors() -> None:
    with pytest.raises(ProtocolEncodeError):
        m.ProduceRequest.encode(m.ProduceRequest.new(acks=1 << 20), 3)  # int16 overflow
    with pytest.raises(ProtocolEncodeError):
        m.ProduceRequest.encode(m.ProduceRequest.new(), 99)


def test_custom_declaration_features() -> None:
    msg = Message("TestMsg", None, "data", "0-2", flexible="2+", fields=[
        F("A", "int32", "0+"),
        F("B", "[]int64", "1+", nullable="1+", default=None),
        F("C", "string", "0+", flexible="none"),
        F("D", "[]Sub", "0+", fields=[F("X", "uuid", "0+"), F("Y", "float64", "0+"), F("Z", "uint16", "0+")]),
        F("T", "bytes", "2+", tag=4, tagged="2+", nullable="2+", default=None),
    ])
    o = msg.new(a=1, b=[5, -6], c="hi", d=[msg.Sub(x=uuid.UUID(int=9), y=2.5, z=65535)], t=b"zz")
    for v in range(3):
        back, _end = msg.decode(msg.encode(o, v), v)
        assert back.a == 1 and back.c == "hi" and back.d[0].z == 65535
        assert back.b == ([5, -6] if v >= 1 else None)
        assert back.t == (b"zz" if v == 2 else None)
    # C stays a non-compact string in the flexible version
    assert msg.encode(msg.new(c="hi"), 2)[4:9] == b"\x00\x00\x02hi"  # null compact array, then c
    assert "def d_TestMsg" in msg.source(2)

"""__consumer_offsets record formats: byte-exact against an independent encoder (kafka-python's JSON-schema
codec fed with Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value definitions from apache/kafka's
group-coordinator/src/main/resources/common/message), plus the partition hashing of FindCoordinator."""

from __future__ import annotations

import copy
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.protocol import consumer_offsets as fmt

kafka_api_data = pytest.importorskip("kafka.protocol.api_data")
from kafka.protocol.schemas.load_json import _resolve_common_structs  # noqa: E402

# Kafka's definitions (the "coordinator-key" types are written here as "data" structs; the int16 record
# type in front of a key is the key's apiKey, the int16 in front of a value is its version).
OFFSET_COMMIT_KEY = {
    "type": "data",
    "name": "OffsetCommitKey",
    "validVersions": "0",
    "flexibleVersions": "none",
    "fields": [
        {"name": "group", "type": "string", "versions": "0"},
        {"name": "topic", "type": "string", "versions": "0"},
        {"name": "partition", "type": "int32", "versions": "0"},
    ],
}
GROUP_METADATA_KEY = {
    "type": "data",
    "name": "GroupMetadataKey",
    "validVersions": "0",
    "flexibleVersions": "none",
    "fields": [{"name": "group", "type": "string", "versions": "0"}],
}
OFFSET_COMMIT_VALUE = {
    "type": "data",
    "name": "OffsetCommitValue",
    "validVersions": "0-4",
    "flexibleVersions": "4+",
    "fields": [
        {"name": "offset", "type": "int64", "versions": "0+"},
        {"name": "leaderEpoch", "type": "int32", "versions": "3+", "default": -1, "ignorable": True},
        {"name": "metadata", "type": "string", "versions": "0+"},
        {"name": "commitTimestamp", "type": "int64", "versions": "0+"},
        {"name": "expireTimestamp", "type": "int64", "versions": "1", "default": -1, "ignorable": True},
    ],
}
GROUP_METADATA_VALUE = {
    "type": "data",
    "name": "GroupMetadataValue",
    "validVersions": "0-4",
    "flexibleVersions": "4+",
    "fields": [
        {"name": "protocolType", "versions": "0+", "type": "string"},
        {"name": "generation", "versions": "0+", "type": "int32"},
        {"name": "protocol", "versions": "0+", "type": "string", "nullableVersions": "0+"},
        {"name": "leader", "versions": "0+", "type": "string", "nullableVersions": "0+"},
        {
            "name": "currentStateTimestamp",
            "versions": "2+",
            "type": "int64",
            "default": -1,
            "ignorable": True,
        },
        {"name": "members", "versions": "0+", "type": "[]MemberMetadata"},
    ],
    "commonStructs": [
        {
            "name": "MemberMetadata",
            "versions": "0+",
            "fields": [
                {"name": "memberId", "versions": "0+", "type": "string"},
                {
                    "name": "groupInstanceId",
                    "versions": "3+",
                    "type": "string",
                    "default": "null",
                    "nullableVersions": "3+",
                    "ignorable": True,
                },
                {"name": "clientId", "versions": "0+", "type": "string"},
                {"name": "clientHost", "versions": "0+", "type": "string"},
                {"name": "rebalanceTimeout", "versions": "1+", "type": "int32", "ignorable": True},
                {"name": "sessionTimeout", "versions": "0+", "type": "int32"},
                {"name": "subscription", "versions": "0+", "type": "bytes"},
                {"name": "assignment", "versions": "0+", "type": "bytes"},
            ],
        }
    ],
}


def _reference_class(schema: dict):
    data = copy.deepcopy(schema)
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    if common:
        _resolve_common_structs(data["fields"], common)
    orig = kafka_api_data.load_json
    kafka_api_data.load_json = lambda name, package=None: data
    try:
        return kafka_api_data.JsonSchemaData(
            schema["name"], (kafka_api_data.ApiData,), {"__module__": __name__}
        )
    finally:
        kafka_api_data.load_json = orig


RefOffsetKey = _reference_class(OFFSET_COMMIT_KEY)
RefGroupKey = _reference_class(GROUP_METADATA_KEY)
RefOffsetValue = _reference_class(OFFSET_COMMIT_VALUE)
RefGroupValue = _reference_class(GROUP_METADATA_VALUE)


def ref_encode(cls, version: int, prefix: int, **fields) -> bytes:
    return struct.pack(">h", prefix) + cls(version=version, **fields).encode(version=version, header=False)


# ------------------------------------------------------------------------------------------------ keys


def test_offset_commit_key_matches_kafka():
    ours = fmt.encode_offset_commit_key("my-group", "orders", 7)
    ref = ref_encode(RefOffsetKey, 0, 1, group="my-group", topic="orders", partition=7)
    assert ours == ref
    assert ours[:2] == b"\x00\x01"
    k = fmt.decode_key(ours)
    assert k == fmt.OffsetCommitKey("my-group", "orders", 7, 1)


def test_group_metadata_key_matches_kafka():
    ours = fmt.encode_group_metadata_key("grüppe")
    assert ours == ref_encode(RefGroupKey, 0, 2, group="grüppe")
    assert fmt.decode_key(ours) == fmt.GroupMetadataKey("grüppe")


def test_legacy_key_version_0_decodes_as_offset_commit():
    raw = ref_encode(RefOffsetKey, 0, 0, group="g", topic="t", partition=1)
    k = fmt.decode_key(raw)
    assert (
        isinstance(k, fmt.OffsetCommitKey)
        and k.version == 0
        and (k.group, k.topic, k.partition) == ("g", "t", 1)
    )


def test_kip848_keys_are_kept_opaque():
    raw = struct.pack(">h", 3) + b"\x00\x01g"
    k = fmt.decode_key(raw)
    assert isinstance(k, fmt.OtherKey) and k.version == 3 and k.raw == raw


# ---------------------------------------------------------------------------------------------- values


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_value_every_version_matches_kafka(version):
    v = fmt.OffsetCommitValue(
        offset=123456789012,
        metadata="meta\u00e9",
        commit_timestamp=1_700_000_000_123,
        leader_epoch=9 if version >= 3 else -1,
        expire_timestamp=1_700_000_100_000 if version == 1 else -1,
    )
    ours = fmt.encode_offset_commit_value(v, version)
    fields = dict(offset=v.offset, metadata=v.metadata, commit_timestamp=v.commit_timestamp)
    if version >= 3:
        fields["leader_epoch"] = v.leader_epoch
    if version == 1:
        fields["expire_timestamp"] = v.expire_timestamp
    assert ours == ref_encode(RefOffsetValue, version, version, **fields)
    back = fmt.decode_offset_commit_value(ours)
    assert (
        back.offset,
        back.metadata,
        back.commit_timestamp,
        back.leader_epoch,
        back.expire_timestamp,
        back.version,
    ) == (v.offset, v.metadata, v.commit_timestamp, v.leader_epoch, v.expire_timestamp, version)


def test_offset_commit_value_version_choice_follows_kafka():
    assert fmt.offset_commit_value_version(fmt.OffsetCommitValue(1, "", 5)) == 3
    assert fmt.offset_commit_value_version(fmt.OffsetCommitValue(1, "", 5, expire_timestamp=10)) == 1
    assert fmt.encode_offset_commit_value(fmt.OffsetCommitValue(1, "", 5))[:2] == b"\x00\x03"


def _members(version: int) -> list[fmt.MemberMetadataRecord]:
    return [
        fmt.MemberMetadataRecord(
            member_id="c1-aaaa",
            client_id="c1",
            client_host="/127.0.0.1",
            session_timeout=45000,
            subscription=b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff",
            assignment=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff",
            rebalance_timeout=300000 if version >= 1 else 45000,
            group_instance_id="inst-1" if version >= 3 else None,
        ),
        fmt.MemberMetadataRecord(
            member_id="c2-bbbb",
            client_id="c2",
            client_host="/10.0.0.2",
            session_timeout=10000,
            subscription=b"",
            assignment=b"",
            rebalance_timeout=60000 if version >= 1 else 10000,
            group_instance_id=None,
        ),
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_every_version_matches_kafka(version):
    members = _members(version)
    value = fmt.GroupMetadataValue(
        protocol_type="consumer",
        generation=17,
        protocol="range",
        leader="c1-aaaa",
        current_state_timestamp=1_700_000_000_999 if version >= 2 else -1,
        members=members,
    )
    ours = fmt.encode_group_metadata_value(value, version)
    ref_members = []
    for m in members:
        d = dict(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout=m.session_timeout,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        if version >= 1:
            d["rebalance_timeout"] = m.rebalance_timeout
        if version >= 3:
            d["group_instance_id"] = m.group_instance_id
        ref_members.append(RefGroupValue.MemberMetadata(version=version, **d))
    fields = dict(
        protocol_type="consumer", generation=17, protocol="range", leader="c1-aaaa", members=ref_members
    )
    if version >= 2:
        fields["current_state_timestamp"] = value.current_state_timestamp
    assert ours == ref_encode(RefGroupValue, version, version, **fields)
    back = fmt.decode_group_metadata_value(ours)
    assert back.version == version
    assert (back.protocol_type, back.generation, back.protocol, back.leader) == (
        "consumer",
        17,
        "range",
        "c1-aaaa",
    )
    assert back.current_state_timestamp == value.current_state_timestamp
    assert back.members == members


def test_empty_group_metadata_value_with_null_protocol_and_leader():
    value = fmt.GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol=None,
        leader=None,
        current_state_timestamp=5,
        members=[],
    )
    ours = fmt.encode_group_metadata_value(value)
    assert ours == ref_encode(
        RefGroupValue,
        3,
        3,
        protocol_type="consumer",
        generation=3,
        protocol=None,
        leader=None,
        current_state_timestamp=5,
        members=[],
    )
    assert fmt.decode_group_metadata_value(ours) == value


def test_decode_reference_encoded_value():
    raw = ref_encode(RefOffsetValue, 3, 3, offset=42, leader_epoch=4, metadata="x", commit_timestamp=99)
    assert fmt.decode_offset_commit_value(raw) == fmt.OffsetCommitValue(42, "x", 99, 4, -1, 3)


def test_truncated_and_unknown_versions_raise():
    good = fmt.encode_offset_commit_value(fmt.OffsetCommitValue(1, "abc", 2))
    with pytest.raises(fmt.RecordFormatError):
        fmt.decode_offset_commit_value(good[:-3])
    with pytest.raises(fmt.RecordFormatError):
        fmt.decode_offset_commit_value(b"\x00\x09" + good[2:])
    with pytest.raises(fmt.RecordFormatError):
        fmt.decode_group_metadata_value(b"\x00\x03\x00")


@settings(max_examples=60, deadline=None)
@given(
    offset=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    meta=st.text(max_size=50),
    ts=st.integers(-1, 2**62),
    version=st.sampled_from([0, 1, 2, 3, 4]),
)
def test_offset_commit_value_roundtrip_property(offset, epoch, meta, ts, version):
    v = fmt.OffsetCommitValue(
        offset, meta, ts, epoch if version >= 3 else -1, ts if version == 1 else -1, version
    )
    assert fmt.decode_offset_commit_value(fmt.encode_offset_commit_value(v, version)) == v


# ------------------------------------------------------------------------------------------- dump hook


def test_decode_offsets_record_for_dump():
    key = fmt.encode_offset_commit_key("g", "t", 3)
    val = fmt.encode_offset_commit_value(fmt.OffsetCommitValue(10, "meta", 1234, 2))
    d = fmt.decode_offsets_record(key, val)
    assert d == {
        "type": "offset_commit",
        "key_version": 1,
        "group": "g",
        "topic": "t",
        "partition": 3,
        "value_version": 3,
        "offset": 10,
        "leader_epoch": 2,
        "metadata": "meta",
        "commit_timestamp": 1234,
    }
    assert fmt.decode_offsets_record(key, None)["tombstone"] is True
    gkey = fmt.encode_group_metadata_key("g")
    gval = fmt.encode_group_metadata_value(
        fmt.GroupMetadataValue("consumer", 2, "range", "m1", 7, _members(3))
    )
    gd = fmt.decode_offsets_record(gkey, gval)
    assert gd["type"] == "group_metadata" and gd["generation"] == 2 and len(gd["members"]) == 2
    assert gd["members"][0]["group_instance_id"] == "inst-1"
    assert fmt.decode_offsets_record(b"\x00", b"")["type"] == "unknown"
    assert "error" in fmt.decode_offsets_record(key, b"\x00\x03")


# --------------------------------------------------------------------------------------------- hashing


@pytest.mark.parametrize(
    "s,h",
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE: Utils.abs maps it to 0
        ("\u00e9", 233),
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # UTF-16 surrogate pair
        ("console-consumer-12345", None),
    ],
)
def test_java_string_hash(s, h):
    got = fmt.java_string_hash(s)
    if h is not None:
        assert got == h
    # always in int32 range and equal to the textbook definition
    ref = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        ref = (ref * 31 + int.from_bytes(units[i : i + 2], "big")) % 2**32
    assert got == (ref - 2**32 if ref >= 2**31 else ref)


def test_partition_for_uses_kafka_abs():
    assert fmt.partition_for("polygenelubricants", 50) == 0
    assert fmt.partition_for("hello", 50) == 99162322 % 50
    # a negative hash: abs, then modulo
    neg = next(s for s in (f"consumer-group-{i}" for i in range(1000)) if fmt.java_string_hash(s) < 0)
    assert fmt.partition_for(neg, 50) == abs(fmt.java_string_hash(neg)) % 50


def test_dump_fields_look_like_kafka_offsets_decoder():
    key = fmt.encode_offset_commit_key("g", "t", 3)
    val = fmt.encode_offset_commit_value(fmt.OffsetCommitValue(10, "", 1234, 2))
    d = fmt.dump_fields(key, val)
    assert d["key"] == '{"type":"1","data":{"group":"g","topic":"t","partition":3}}'
    assert (
        d["payload"]
        == '{"version":"3","data":{"offset":10,"leaderEpoch":2,"metadata":"","commitTimestamp":1234}}'
    )
    assert fmt.dump_fields(fmt.encode_group_metadata_key("g"), None)["payload"] == "<DELETE>"


def test_log_dump_decodes_consumer_offsets_partition(tmp_path):
    from moldau.log.dump import dump_segment
    from moldau.protocol.records import BatchBuilder

    part = tmp_path / "__consumer_offsets-7"
    part.mkdir()
    b = BatchBuilder()
    b.append(
        1000,
        fmt.encode_offset_commit_key("grp", "orders", 0),
        fmt.encode_offset_commit_value(fmt.OffsetCommitValue(5, "m", 1000)),
    )
    b.append(1001, fmt.encode_group_metadata_key("grp"), None)
    (part / "00000000000000000000.log").write_bytes(b.build(0))
    lines = list(dump_segment(str(part / "00000000000000000000.log")))
    assert any(
        'key: {"type":"1","data":{"group":"grp","topic":"orders","partition":0}}' in ln for ln in lines
    )
    assert any("payload: <DELETE>" in ln for ln in lines)
    records = next(
        x
        for x in dump_segment(str(part / "00000000000000000000.log"), json=True)
        if isinstance(x, dict) and "records" in x
    )["records"]
    assert records[0]["decoded"]["offset"] == 5 and records[1]["decoded"]["tombstone"] is True

"""Assignors and the consumer protocol encoding (no broker)."""

from __future__ import annotations

import struct

import pytest

from moldau.client.assignors import (
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
    get_assignor,
)
from moldau.client.types import TopicPartition as TP


def subs(**members):
    return {mid: MemberSubscription(mid, topics) for mid, topics in members.items()}


def test_range_assignor_like_kafka():
    out = RangeAssignor().assign({"a": 3, "b": 3}, subs(m1=["a", "b"], m2=["a", "b"]))
    assert out == {"m1": [TP("a", 0), TP("a", 1), TP("b", 0), TP("b", 1)], "m2": [TP("a", 2), TP("b", 2)]}
    out = RangeAssignor().assign({"a": 5}, subs(c=["a"], a=["a"], b=["a"]))
    assert out == {"a": [TP("a", 0), TP("a", 1)], "b": [TP("a", 2), TP("a", 3)], "c": [TP("a", 4)]}


def test_roundrobin_assignor_like_kafka():
    out = RoundRobinAssignor().assign({"a": 3, "b": 3}, subs(m1=["a", "b"], m2=["a", "b"]))
    assert out == {"m1": [TP("a", 0), TP("a", 2), TP("b", 1)], "m2": [TP("a", 1), TP("b", 0), TP("b", 2)]}
    # a member not subscribed to a topic is skipped
    out = RoundRobinAssignor().assign({"a": 2, "b": 2}, subs(m1=["a"], m2=["a", "b"]))
    assert out == {"m1": [TP("a", 0)], "m2": [TP("a", 1), TP("b", 0), TP("b", 1)]}


def test_cooperative_sticky_keeps_owned_and_withholds_moves():
    a = CooperativeStickyAssignor()
    s = subs(m1=["t"])
    first = a.assign({"t": 6}, s)
    assert first == {"m1": [TP("t", p) for p in range(6)]}
    # m2 joins: m1 keeps 3, the 3 that move are withheld this generation (m1 must revoke them first)
    s = subs(m1=["t"], m2=["t"])
    s["m1"].owned_partitions = first["m1"]
    s["m1"].generation_id = 1
    second = a.assign({"t": 6}, s)
    assert len(second["m1"]) == 3 and second["m2"] == []
    # follow-up round: m1 owns its 3, the other 3 are free and go to m2
    s["m1"].owned_partitions = second["m1"]
    third = a.assign({"t": 6}, s)
    assert third["m1"] == second["m1"] and len(third["m2"]) == 3
    assert set(third["m1"]) | set(third["m2"]) == {TP("t", p) for p in range(6)}


def test_cooperative_sticky_is_balanced_with_uneven_subscriptions():
    a = CooperativeStickyAssignor()
    s = subs(m1=["a", "b"], m2=["a"], m3=["b"])
    out = a.sticky_assignment({"a": 4, "b": 4}, s)
    counts = sorted(len(v) for v in out.values())
    assert sum(counts) == 8 and counts[-1] - counts[0] <= 1
    for mid, tps in out.items():
        assert all(tp.topic in s[mid].topics for tp in tps)


def test_subscription_roundtrip_and_version_prefix():
    data = encode_subscription(["b", "a"], [TP("a", 1), TP("a", 0)], generation_id=4, rack_id="r1")
    assert struct.unpack_from(">h", data)[0] == 3
    s = decode_subscription("m", data)
    assert s.topics == ["a", "b"] and sorted(s.owned_partitions) == [TP("a", 0), TP("a", 1)]
    assert (s.generation_id, s.rack_id) == (4, "r1")
    v0 = encode_subscription(["x"], version=0)
    assert decode_subscription("m", v0).topics == ["x"]


def test_subscription_v0_bytes_per_the_protocol_guide():
    # ConsumerProtocolMetadata v0: version int16, topics [string], user_data nullable bytes
    expected = (struct.pack(">hi", 0, 2) + struct.pack(">h", 2) + b"t1" + struct.pack(">h", 2) + b"t2"
                + struct.pack(">i", -1))
    assert encode_subscription(["t2", "t1"], version=0) == expected
    assert decode_subscription("m", expected).topics == ["t1", "t2"]


def test_assignment_roundtrip():
    data = encode_assignment([TP("b", 2), TP("a", 0), TP("b", 1)])
    assert sorted(decode_assignment(data)) == [TP("a", 0), TP("b", 1), TP("b", 2)]
    assert decode_assignment(b"") == []


def test_get_assignor_names():
    assert get_assignor("range").name == "range"
    assert get_assignor("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").cooperative
    with pytest.raises(ValueError):
        get_assignor("sticky-ish")


def test_sticky_user_data_is_the_java_layout():
    # [previous_assignment: [topic: int16-length string, partitions: int32 array]], generation: int32;
    # int32 array counts, no version prefix (Java's StickyAssignor STICKY_ASSIGNOR_USER_DATA_V1)
    want = (b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x00\x00\x02"
            + b"\x00\x00\x00\x07")
    assert encode_sticky_user_data([TP("t", 2), TP("t", 0)], 7) == want
    assert decode_sticky_user_data(want) == ([TP("t", 0), TP("t", 2)], 7)
    assert decode_sticky_user_data(want[:-4]) == ([TP("t", 0), TP("t", 2)], -1)  # v0: no generation
    assert decode_sticky_user_data(b"") == ([], -1)


def _sticky_subs(owned, generations=None):
    out = {}
    for mid, tps in owned.items():
        g = (generations or {}).get(mid, 3)
        out[mid] = MemberSubscription(
            mid, ["t"], encode_sticky_user_data(tps, g) if tps is not None else None
        )
    return out


def test_sticky_keeps_previous_assignments_through_an_eager_rebalance():
    a = StickyAssignor()
    assert a.name == "sticky" and not a.cooperative
    first = a.assign({"t": 6}, _sticky_subs({"m1": None, "m2": None}))
    assert sorted(len(v) for v in first.values()) == [3, 3]
    # m3 joins: m1 and m2 (having revoked everything, eager) report their old partitions in the user data;
    # each keeps two, m3 gets one from each, nothing else moves
    second = a.assign({"t": 6}, _sticky_subs({"m1": first["m1"], "m2": first["m2"], "m3": None}))
    assert [len(second[m]) for m in ("m1", "m2", "m3")] == [2, 2, 2]
    assert set(second["m1"]) <= set(first["m1"]) and set(second["m2"]) <= set(first["m2"])
    assert {tp for v in second.values() for tp in v} == {TP("t", p) for p in range(6)}
    # range would have moved partitions between m1 and m2 too
    ranged = RangeAssignor().assign({"t": 6}, subs(m1=["t"], m2=["t"], m3=["t"]))
    assert set(ranged["m2"]) - set(first["m2"])


def test_sticky_conflicting_claims_go_to_the_newer_generation_and_garbage_is_ignored():
    a = StickyAssignor()
    s = _sticky_subs({"m1": [TP("t", 0), TP("t", 1)], "m2": [TP("t", 1)]}, {"m1": 4, "m2": 5})
    out = a.assign({"t": 2}, s)
    assert out == {"m1": [TP("t", 0)], "m2": [TP("t", 1)]}
    s["m1"].user_data = b"\x00\x01"  # not the sticky layout: m1 starts from nothing, no exception
    out = a.assign({"t": 2}, s)
    assert sorted(out["m1"] + out["m2"]) == [TP("t", 0), TP("t", 1)]


def test_sticky_by_java_class_name():
    assert get_assignor("org.apache.kafka.clients.consumer.StickyAssignor").name == "sticky"

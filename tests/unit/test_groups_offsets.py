"""Committed offsets, their persistence in __consumer_offsets, expiry, and the group admin APIs."""

from __future__ import annotations

from moldau.broker.groups.group import ClassicGroupState as S
from moldau.broker.groups.group import CommittedOffset, encode_assignment, encode_subscription
from moldau.broker.groups.model import PartitionOffset
from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode as E

from harness.groups_harness import Harness, aio

DAY = 24 * 3600 * 1000


def co(offset: int, metadata: str = "", ts: int = 0, epoch: int = -1, expire: int = -1) -> CommittedOffset:
    return CommittedOffset(offset, epoch, metadata, ts, expire)


@aio
async def test_simple_consumer_commit_creates_group_and_round_trips():
    h = Harness()
    res = await h.coord.offsets.commit_offsets(
        "simple", "", -1, None, {("t", 0): co(42, "m\u00e9ta", 1000, 7)}, 2)
    assert res == {("t", 0): E.NONE}
    err, parts = h.coord.offsets.fetch_offsets("simple", [("t", 0), ("t", 1), ("u", 0)])
    assert err == E.NONE
    assert parts == [
        PartitionOffset("t", 0, 42, 7, "m\u00e9ta"),
        PartitionOffset("t", 1),
        PartitionOffset("u", 0),
    ]
    # all partitions (topics null)
    assert h.coord.offsets.fetch_offsets("simple", None)[1] == [PartitionOffset("t", 0, 42, 7, "m\u00e9ta")]
    g = h.coord.classic_group("simple")
    assert g.state is S.EMPTY and g.protocol_type is None
    listed = h.coord.list_groups()
    assert [(x.group_id, x.protocol_type, x.state) for x in listed] == [("simple", "", "Empty")]
    # the record on disk is Kafka's OffsetCommitKey/Value v3
    ((k, v),) = h.storage.partitions[h.coord.partition_for("simple")]
    assert fmt.decode_key(k) == fmt.OffsetCommitKey("simple", "t", 0)
    assert fmt.decode_offset_commit_value(v) == fmt.OffsetCommitValue(42, "m\u00e9ta", 1000, 7, -1, 3)


@aio
async def test_empty_group_id_is_allowed_for_commits():
    h = Harness()
    assert await h.coord.offsets.commit_offsets("", "", -1, None, {("t", 0): co(1)}) == {("t", 0): E.NONE}
    assert h.coord.offsets.fetch_offsets("", [("t", 0)])[1][0].offset == 1


@aio
async def test_fetch_unknown_group():
    h = Harness()
    assert h.coord.offsets.fetch_offsets("none", None) == (E.NONE, [])
    assert h.coord.offsets.fetch_offsets(
        "none", [("t", 3)]) == (E.NONE, [PartitionOffset("t", 3, -1, -1, "")])


@aio
async def test_commit_validation_for_members():
    h = Harness()
    leader, follower = await h.stable_group("g", 2)
    gen = h.coord.classic_group("g").generation_id
    ok = await h.coord.offsets.commit_offsets("g", leader, gen, None, {("t", 0): co(5)})
    assert ok == {("t", 0): E.NONE}
    assert await h.coord.offsets.commit_offsets("g", leader, gen - 1, None, {("t", 0): co(5)}) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert await h.coord.offsets.commit_offsets("g", "ghost", gen, None, {("t", 0): co(5)}) == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    # a simple consumer may not commit for an active group
    assert await h.coord.offsets.commit_offsets("g", "", -1, None, {("t", 0): co(5)}, 1) == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    # while the group is preparing a rebalance, members of the current generation can still commit
    h.join_new("g", client_id="c9")
    assert h.coord.classic_group("g").state is S.PREPARING_REBALANCE
    assert await h.coord.offsets.commit_offsets(
        "g", follower, gen, None, {("t", 1): co(6)}) == {("t", 1): E.NONE}
    # after the join phase, before SyncGroup: REBALANCE_IN_PROGRESS
    h.join("g", leader)
    h.join("g", follower)
    g = h.coord.classic_group("g")
    assert g.state is S.COMPLETING_REBALANCE
    assert await h.coord.offsets.commit_offsets("g", leader, g.generation_id, None, {("t", 0): co(7)}) == {
        ("t", 0): E.REBALANCE_IN_PROGRESS
    }


@aio
async def test_commit_unknown_group_with_generation():
    h = Harness()
    assert await h.coord.offsets.commit_offsets("x", "m", 3, None, {("t", 0): co(1)}, api_version=8) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert await h.coord.offsets.commit_offsets("x", "m", 3, None, {("t", 0): co(1)}, api_version=9) == {
        ("t", 0): E.GROUP_ID_NOT_FOUND
    }
    assert "x" not in h.coord.groups


@aio
async def test_offset_metadata_too_large():
    h = Harness(offset_metadata_max_bytes=10)
    res = await h.coord.offsets.commit_offsets(
        "g", "", -1, None, {("t", 0): co(1, "x" * 11), ("t", 1): co(2, "y" * 10)}
    )
    assert res == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    assert [p.offset for p in h.coord.offsets.fetch_offsets("g", [("t", 0), ("t", 1)])[1]] == [-1, 2]


@aio
async def test_storage_failure_reported_and_not_applied():
    h = Harness()
    h.storage.fail_next = OSError("disk full")
    res = await h.coord.offsets.commit_offsets("g", "", -1, None, {("t", 0): co(1)})
    assert res == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert h.coord.offsets.fetch_offsets("g", [("t", 0)])[1][0].offset == -1


@aio
async def test_offsets_and_group_survive_restart():
    h = Harness()
    leader, follower = await h.stable_group("g", 2)
    g = h.coord.classic_group("g")
    gen = g.generation_id
    await h.coord.offsets.commit_offsets("g", leader, gen, None, {("t", 0): co(10, "a", h.timer.now_ms(), 3)})
    await h.coord.offsets.commit_offsets("g", follower, gen, None, {("t", 1): co(20, "b", h.timer.now_ms())})
    await h.coord.offsets.commit_offsets("g", leader, gen, None, {("t", 0): co(11, "c", h.timer.now_ms(), 4)})
    await h.coord.offsets.commit_offsets("solo", "", -1, None, {("u", 0): co(99)})
    assignments = {m.member_id: m.assignment for m in g.members.values()}
    h2 = h.restart()
    g2 = h2.coord.classic_group("g")
    assert g2.state is S.STABLE and g2.generation_id == gen and g2.leader_id == leader
    assert {m.member_id: m.assignment for m in g2.members.values()} == assignments
    assert g2.protocol_name == "range" and g2.subscribed_topics == {"t"}
    assert h2.coord.offsets.fetch_offsets("g", [("t", 0), ("t", 1)])[1] == [
        PartitionOffset("t", 0, 11, 4, "c"),
        PartitionOffset("t", 1, 20, -1, "b"),
    ]
    assert h2.coord.offsets.fetch_offsets("solo", None)[1] == [PartitionOffset("u", 0, 99, -1, "")]
    # the members carry on with their generation after the restart
    assert h2.coord.classic.sync.heartbeat("g", gen, follower) == E.NONE
    assert h2.sync("g", gen, follower).result.assignment == assignments[follower]
    # and a member that never comes back is expired by its session timeout
    for _ in range(4):
        h2.timer.advance(4000)
        h2.coord.classic.sync.heartbeat("g", gen, follower)
    assert leader not in g2.members and g2.state is S.PREPARING_REBALANCE


@aio
async def test_deleted_things_stay_deleted_after_restart():
    h = Harness()
    await h.coord.offsets.commit_offsets("a", "", -1, None, {("t", 0): co(1), ("t", 1): co(2)})
    await h.coord.offsets.commit_offsets("b", "", -1, None, {("t", 0): co(3)})
    assert await h.coord.offsets.delete_offsets("a", [("t", 1)]) == (E.NONE, {("t", 1): E.NONE})
    assert await h.coord.delete_groups(["b"]) == {"b": E.NONE}
    h2 = h.restart()
    assert h2.coord.offsets.fetch_offsets("a", None)[1] == [PartitionOffset("t", 0, 1, -1, "")]
    assert "b" not in h2.coord.groups


@aio
async def test_empty_group_offsets_expire_after_retention_from_when_it_became_empty():
    h = Harness(offsets_retention_ms=7 * DAY, max_session_timeout_ms=30 * DAY)
    [m1] = await h.stable_group("g", 1, session=20 * DAY)
    gen = h.coord.classic_group("g").generation_id
    await h.coord.offsets.commit_offsets("g", m1, gen, None, {("t", 0): co(5, ts=h.timer.now_ms())})
    h.timer.advance(6 * DAY)  # still a member (heartbeats are not needed for the check itself)
    h.coord.classic.sync.heartbeat("g", gen, m1)
    assert await h.coord.offsets.cleanup_expired_offsets() == 0  # stable, subscribed to t: kept
    await h.coord.classic.leave_group("g", [(m1, None, None)])
    await h.settle()
    h.timer.advance(6 * DAY)
    assert await h.coord.offsets.cleanup_expired_offsets() == 0  # empty for 6 days only
    h.timer.advance(1 * DAY)
    assert await h.coord.offsets.cleanup_expired_offsets() == 1
    assert "g" not in h.coord.groups  # empty and no offsets left: removed, with tombstones
    recs = h.storage.partitions[h.coord.partition_for("g")]
    assert recs[-2][1] is None and recs[-1][1] is None
    assert isinstance(fmt.decode_key(recs[-1][0]), fmt.GroupMetadataKey)


@aio
async def test_stable_group_offsets_of_unsubscribed_topics_expire():
    h = Harness(offsets_retention_ms=DAY, max_session_timeout_ms=30 * DAY)
    [m1] = await h.stable_group("g", 1, session=20 * DAY)
    gen = h.coord.classic_group("g").generation_id
    now = h.timer.now_ms()
    await h.coord.offsets.commit_offsets(
        "g", m1, gen, None, {("t", 0): co(1, ts=now), ("old", 0): co(2, ts=now)})
    h.timer.advance(DAY)
    h.coord.classic.sync.heartbeat("g", gen, m1)
    assert await h.coord.offsets.cleanup_expired_offsets() == 1
    assert [p.topic for p in h.coord.offsets.fetch_offsets("g", None)[1]] == ["t"]


@aio
async def test_simple_group_offsets_expire_from_commit_and_explicit_expire_timestamp():
    h = Harness(offsets_retention_ms=DAY)
    now = h.timer.now_ms()
    await h.coord.offsets.commit_offsets("s", "", -1, None, {("t", 0): co(1, ts=now)})
    h.timer.advance(DAY // 2)
    await h.coord.offsets.commit_offsets(
        "s", "", -1, None, {("t", 1): co(1, ts=h.timer.now_ms(), expire=h.timer.now_ms() + 3 * DAY)}
    )
    h.timer.advance(DAY // 2)
    assert await h.coord.offsets.cleanup_expired_offsets() == 1
    assert [p.partition for p in h.coord.offsets.fetch_offsets("s", None)[1]] == [1]
    h.timer.advance(2 * DAY)
    assert await h.coord.offsets.cleanup_expired_offsets() == 0
    h.timer.advance(DAY)
    assert await h.coord.offsets.cleanup_expired_offsets() == 1
    assert "s" not in h.coord.groups


@aio
async def test_periodic_cleanup_runs_from_the_timer():
    h = Harness(offsets_retention_ms=1000, offsets_retention_check_interval_ms=500)
    h.coord.start()
    await h.coord.offsets.commit_offsets("s", "", -1, None, {("t", 0): co(1, ts=h.timer.now_ms())})
    h.timer.advance(1500)
    await h.settle()
    assert "s" not in h.coord.groups


@aio
async def test_offset_delete_rules():
    h = Harness()
    assert await h.coord.offsets.delete_offsets("none", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    leader, _ = await h.stable_group("g", 2)
    gen = h.coord.classic_group("g").generation_id
    await h.coord.offsets.commit_offsets("g", leader, gen, None, {("t", 0): co(1), ("other", 0): co(2)})
    err, res = await h.coord.offsets.delete_offsets("g", [("t", 0), ("other", 0), ("never", 1)])
    assert err == E.NONE
    assert res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE, ("never", 1): E.NONE}
    assert [p.topic for p in h.coord.offsets.fetch_offsets("g", None)[1]] == ["t"]
    # a non-consumer protocol group that is not empty: NON_EMPTY_GROUP
    _m, _b = h.join_new("conn", protocol_type="connect", protocols=[("v1", b"")])
    assert await h.coord.offsets.delete_offsets("conn", [("t", 0)]) == (E.NON_EMPTY_GROUP, {})


@aio
async def test_delete_groups():
    h = Harness()
    await h.stable_group("busy", 1)
    await h.coord.offsets.commit_offsets("idle", "", -1, None, {("t", 0): co(1)})
    res = await h.coord.delete_groups(["busy", "idle", "ghost", ""])
    assert res == {
        "busy": E.NON_EMPTY_GROUP,
        "idle": E.NONE,
        "ghost": E.GROUP_ID_NOT_FOUND,
        "": E.INVALID_GROUP_ID,
    }
    assert "idle" not in h.coord.groups
    assert h.coord.offsets.fetch_offsets("idle", [("t", 0)])[1][0].offset == -1
    tomb = [fmt.decode_key(k) for k, v in h.storage.partitions[h.coord.partition_for("idle")] if v is None]
    assert fmt.OffsetCommitKey("idle", "t", 0) in tomb and fmt.GroupMetadataKey("idle") in tomb


@aio
async def test_list_and_describe_groups():
    h = Harness()
    leader, follower = await h.stable_group("g", 2)
    await h.coord.offsets.commit_offsets("simple", "", -1, None, {("t", 0): co(1)})
    h.join_new("prep")
    listed = {x.group_id: x for x in h.coord.list_groups()}
    assert {k: (v.state, v.protocol_type, v.group_type) for k, v in listed.items()} == {
        "g": ("Stable", "consumer", "classic"),
        "simple": ("Empty", "", "classic"),
        "prep": ("CompletingRebalance", "consumer", "classic"),
    }
    assert [x.group_id for x in h.coord.list_groups(["stable", "Empty"])] == ["g", "simple"]
    assert [x.group_id for x in h.coord.list_groups(None, ["Classic"])] == ["g", "simple", "prep"]
    assert h.coord.list_groups(None, ["consumer"]) == []
    d = h.coord.describe_group("g")
    assert (d.error, d.state, d.protocol_type, d.protocol) == (E.NONE, "Stable", "consumer", "range")
    assert sorted(m.member_id for m in d.members) == sorted([leader, follower])
    mem = {m.member_id: m for m in d.members}
    assert mem[leader].metadata == encode_subscription(["t"]) and mem[leader].client_host == "/127.0.0.1"
    assert mem[leader].assignment == h.coord.classic_group("g").members[leader].assignment
    # not stable: no protocol, no metadata
    d = h.coord.describe_group("prep")
    assert d.state == "CompletingRebalance" and d.protocol == "" and d.members[0].metadata == b""
    d = h.coord.describe_group("ghost")
    assert d.error == E.GROUP_ID_NOT_FOUND and d.state == "Dead"


@aio
async def test_transactional_offsets_are_pending_until_commit():
    h = Harness()
    await h.coord.offsets.commit_transactional_offsets("g", 1000, "", -1, None, {("t", 0): co(50)})
    _err, parts = h.coord.offsets.fetch_offsets("g", [("t", 0)], require_stable=True)
    assert parts[0].error == E.UNSTABLE_OFFSET_COMMIT
    assert h.coord.offsets.fetch_offsets("g", [("t", 0)])[1][0].offset == -1
    await h.coord.offsets.complete_transaction(1000, committed=True)
    assert h.coord.offsets.fetch_offsets("g", [("t", 0)], require_stable=True)[1][0].offset == 50
    await h.coord.offsets.commit_transactional_offsets("g", 1001, "", -1, None, {("t", 0): co(60)})
    await h.coord.offsets.complete_transaction(1001, committed=False)
    assert h.coord.offsets.fetch_offsets("g", [("t", 0)], require_stable=True)[1][0].offset == 50


@aio
async def test_assignment_bytes_round_trip_through_storage():
    h = Harness()
    mid, _box = h.join_new("g")
    a = encode_assignment({"t": [0, 1, 2]}, b"user")
    h.sync("g", 1, mid, {mid: a})
    await h.settle()
    h2 = h.restart()
    assert h2.coord.classic_group("g").members[mid].assignment == a

"""The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) driven with an injected clock."""

from __future__ import annotations

import pytest

from moldau.broker.groups.group import ClassicGroupState as S
from moldau.broker.groups.group import encode_assignment, encode_subscription
from moldau.protocol.errors import ErrorCode as E

from harness.groups_harness import SUB_T, Harness, aio

A0 = encode_assignment({"t": [0, 1]})
A1 = encode_assignment({"t": [2, 3]})


# ----------------------------------------------------------------------------------------------- join


@aio
async def test_first_join_v4_needs_member_id_then_completes_at_once():
    h = Harness()
    first = h.join("g", client_id="app").result
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-") and len(first.member_id) == len("app-") + 36
    assert first.generation_id == -1
    second = h.join("g", first.member_id, client_id="app")
    r = second.result  # answered at once: the only known member has joined
    assert r.error == E.NONE
    assert (r.generation_id, r.leader_id, r.member_id, r.protocol_name, r.protocol_type) == (
        1,
        first.member_id,
        first.member_id,
        "range",
        "consumer",
    )
    assert r.members == [(first.member_id, None, SUB_T)]
    assert h.coord.classic_group("g").state is S.COMPLETING_REBALANCE


@aio
async def test_join_v3_gets_member_id_and_generation_in_one_go():
    h = Harness()
    r = h.join("g", version=3).result
    assert r.error == E.NONE and r.generation_id == 1 and r.member_id.startswith("c-")


@aio
async def test_sync_leader_assignment_makes_group_stable():
    h = Harness()
    mid, box = h.join_new("g")
    gen = box.result.generation_id
    s = h.sync("g", gen, mid, {mid: A0}, protocol_type="consumer", protocol_name="range")
    assert not s.done  # waits for the assignment to be stored
    await h.settle()
    assert s.result.error == E.NONE and s.result.assignment == A0
    assert (s.result.protocol_type, s.result.protocol_name) == ("consumer", "range")
    g = h.coord.classic_group("g")
    assert g.state is S.STABLE
    # the group metadata record was written to the group's __consumer_offsets partition
    assert h.storage.partitions[h.coord.partition_for("g")][-1][0][:2] == b"\x00\x02"


@aio
async def test_second_member_triggers_rebalance_and_leader_sees_all_members():
    h = Harness()
    m1, _ = (await h.stable_group("g", 1))[0], None
    m2, box2 = h.join_new("g", client_id="c2")
    assert not box2.done
    g = h.coord.classic_group("g")
    assert g.state is S.PREPARING_REBALANCE
    assert h.coord.classic.sync.heartbeat("g", 1, m1) == E.REBALANCE_IN_PROGRESS
    box1 = h.join("g", m1)
    r1, r2 = box1.result, box2.result
    assert r1.generation_id == r2.generation_id == 2
    assert r1.leader_id == r2.leader_id == m1
    assert sorted(m for m, _, _ in r1.members) == sorted([m1, m2])
    assert r2.members == []  # followers get no member list
    s2 = h.sync("g", 2, m2)
    assert not s2.done  # followers wait for the leader
    s1 = h.sync("g", 2, m1, {m1: A0, m2: A1})
    await h.settle()
    assert s1.result.assignment == A0 and s2.result.assignment == A1
    assert g.state is S.STABLE
    assert h.coord.classic.sync.heartbeat("g", 2, m2) == E.NONE


@aio
async def test_protocol_selection_and_inconsistent_protocol():
    h = Harness()
    p_both = [("cooperative-sticky", b"x"), ("range", b"y")]
    m1, _b1 = h.join_new("g", protocols=p_both, version=9)
    h.sync("g", 1, m1, {m1: b""})
    await h.settle()
    # a member that supports only range: range is the only common protocol
    _m2, b2 = h.join_new("g", protocols=[("range", b"z")], client_id="c2")
    h.join("g", m1, protocols=p_both)
    assert b2.result.protocol_name == "range"
    # no protocol in common
    bad = h.join("g", protocols=[("roundrobin", b"")]).result
    assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
    # another protocol type
    bad = h.join("g", protocols=[("range", b"")], protocol_type="connect").result
    assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
    # empty protocol list or type on an empty group
    assert h.join("g2", protocols=[]).result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g3", protocol_type="").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert "g2" not in h.coord.groups and "g3" not in h.coord.groups


@aio
async def test_vote_majority_prefers_first_choice():
    h = Harness(initial_rebalance_delay_ms=1000)
    pa = [("a", b""), ("b", b"")]
    pb = [("b", b""), ("a", b"")]
    ids = []
    boxes = []
    for protos in (pa, pb, pb):
        mid = h.join("g", protocols=protos).result.member_id
        ids.append(mid)
        boxes.append(h.join("g", mid, protocols=protos))
    h.timer.advance(2000)  # the delay, extended once because members arrived during it
    assert all(b.result.protocol_name == "b" for b in boxes)


@aio
async def test_empty_group_accepts_a_different_protocol():
    h = Harness()
    [m1] = await h.stable_group("g", 1)
    err, errs = await h.coord.classic.leave_group("g", [(m1, None, "bye")])
    assert (err, errs) == (E.NONE, [E.NONE])
    g = h.coord.classic_group("g")
    assert g.state is S.EMPTY and g.generation_id == 2
    m2, b = h.join_new("g", protocols=[("cooperative-sticky", b"")], protocol_type="consumer")
    assert b.result.error == E.NONE and b.result.protocol_name == "cooperative-sticky"
    # even another protocol type once everybody is gone
    await h.coord.classic.leave_group("g", [(m2, None, None)])
    _m3, b = h.join_new("g", protocols=[("x", b"")], protocol_type="connect")
    assert b.result.error == E.NONE and b.result.protocol_type == "connect"


@aio
async def test_session_timeout_bounds():
    h = Harness(min_session_timeout_ms=6000, max_session_timeout_ms=30000)
    assert h.join("g", session=5999).result.error == E.INVALID_SESSION_TIMEOUT
    assert h.join("g", session=30001).result.error == E.INVALID_SESSION_TIMEOUT
    assert h.join("g", session=6000).result.error == E.MEMBER_ID_REQUIRED
    assert h.join("", session=6000).result.error == E.INVALID_GROUP_ID


@aio
async def test_unknown_member_id_cases():
    h = Harness()
    assert h.join("nope", "someone").result.error == E.UNKNOWN_MEMBER_ID
    assert "nope" not in h.coord.groups
    [_m1] = await h.stable_group("g", 1)
    assert h.join("g", "stranger").result.error == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", 1, "stranger").result.error == E.UNKNOWN_MEMBER_ID
    assert h.sync("nope", 1, "x").result.error == E.UNKNOWN_MEMBER_ID
    assert h.coord.classic.sync.heartbeat("g", 1, "stranger") == E.UNKNOWN_MEMBER_ID
    assert h.coord.classic.sync.heartbeat("nope", 1, "x") == E.UNKNOWN_MEMBER_ID


@aio
async def test_illegal_generation_and_rebalance_in_progress():
    h = Harness()
    [m1] = await h.stable_group("g", 1)
    assert h.coord.classic.sync.heartbeat("g", 0, m1) == E.ILLEGAL_GENERATION
    assert h.sync("g", 7, m1).result.error == E.ILLEGAL_GENERATION
    h.join_new("g", client_id="c2")
    assert h.sync("g", 1, m1).result.error == E.REBALANCE_IN_PROGRESS
    assert h.coord.classic.sync.heartbeat("g", 1, m1) == E.REBALANCE_IN_PROGRESS


@aio
async def test_sync_protocol_type_and_name_checked_in_v5():
    h = Harness()
    mid, _box = h.join_new("g")
    assert h.sync("g", 1, mid, protocol_type="connect").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", 1, mid, protocol_name="roundrobin").result.error == E.INCONSISTENT_GROUP_PROTOCOL


@aio
async def test_group_max_size():
    h = Harness(max_size=2)
    await h.stable_group("g", 2)
    r = h.join("g", client_id="c3").result
    assert r.error == E.GROUP_MAX_SIZE_REACHED
    assert h.coord.classic_group("g").state is S.STABLE


@aio
async def test_follower_rejoin_in_stable_without_change_gets_current_generation():
    h = Harness()
    leader, follower = await h.stable_group("g", 2)
    gen = h.coord.classic_group("g").generation_id
    r = h.join("g", follower, client_id="c1").result
    assert (r.error, r.generation_id, r.leader_id, r.members) == (E.NONE, gen, leader, [])
    assert h.coord.classic_group("g").state is S.STABLE
    # the leader rejoining forces a rebalance
    assert not h.join("g", leader, client_id="c0").done
    assert h.coord.classic_group("g").state is S.PREPARING_REBALANCE


@aio
async def test_lost_join_response_is_answered_again_in_completing_rebalance():
    h = Harness()
    mid, box = h.join_new("g")
    again = h.join("g", mid).result
    assert again.error == E.NONE and again.generation_id == box.result.generation_id
    assert again.members  # still the leader


@aio
async def test_heartbeat_allowed_in_completing_rebalance():
    h = Harness()
    mid, _box = h.join_new("g")
    assert h.coord.classic.sync.heartbeat("g", 1, mid) == E.NONE


# ----------------------------------------------------------------------------------- timers and expiry


@aio
async def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    leader, follower = await h.stable_group("g", 2, session=10_000)
    g = h.coord.classic_group("g")
    for _ in range(5):  # the leader keeps heartbeating, the follower is silent
        h.timer.advance(3000)
        h.coord.classic.sync.heartbeat("g", g.generation_id, leader)
    assert follower not in g.members
    assert g.state is S.PREPARING_REBALANCE
    r = h.join("g", leader).result
    assert r.error == E.NONE and [m for m, _, _ in r.members] == [leader]


@aio
async def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    h = Harness()
    leader, follower = await h.stable_group("g", 2, session=10_000, rebalance=20_000)
    g = h.coord.classic_group("g")
    new, box = h.join_new("g", client_id="c3", session=10_000, rebalance=20_000)
    b_leader = h.join("g", leader, session=10_000, rebalance=20_000)
    # the follower keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins
    for _ in range(6):
        h.timer.advance(3000)
        if follower in g.members:
            assert h.coord.classic.sync.heartbeat("g", 2, follower) == E.REBALANCE_IN_PROGRESS
    h.timer.advance(3000)
    assert box.done and b_leader.done
    assert follower not in g.members
    assert sorted(m for m, _, _ in b_leader.result.members) == sorted([leader, new])


@aio
async def test_member_waiting_in_join_is_not_expired_by_session_timeout():
    h = Harness()
    leader, follower = await h.stable_group("g", 2, session=6000, rebalance=60_000)
    g = h.coord.classic_group("g")
    b = h.join("g", leader, session=6000, rebalance=60_000)  # leader waits for the follower
    h.timer.advance(5000)
    assert h.coord.classic.sync.heartbeat("g", g.generation_id, follower) == E.REBALANCE_IN_PROGRESS
    h.timer.advance(5000)  # the leader has not heartbeated for 10 s, but it is waiting on us
    assert leader in g.members and not b.done
    bf = h.join("g", follower, session=6000, rebalance=60_000)
    assert b.result.error == E.NONE and bf.result.error == E.NONE


@aio
async def test_initial_rebalance_delay_waits_and_extends_for_new_members():
    h = Harness(initial_rebalance_delay_ms=3000)
    m1, b1 = h.join_new("g", client_id="c1", rebalance=60_000)
    assert not b1.done
    h.timer.advance(2000)
    m2, b2 = h.join_new("g", client_id="c2", rebalance=60_000)
    h.timer.advance(1000)  # first delay over, but a member arrived meanwhile: one more delay
    assert not b1.done and not b2.done
    h.timer.advance(3000)
    assert b1.result.generation_id == b2.result.generation_id == 1
    assert sorted(m for m, _, _ in b1.result.members + b2.result.members) == sorted([m1, m2])


@aio
async def test_initial_delay_zero_answers_immediately():
    h = Harness(initial_rebalance_delay_ms=0)
    _m1, b1 = h.join_new("g")
    assert b1.done and b1.result.generation_id == 1


@aio
async def test_initial_delay_applies_only_to_empty_groups():
    h = Harness(initial_rebalance_delay_ms=3000)
    m1, b1 = h.join_new("g")
    h.timer.advance(3000)
    h.sync("g", 1, m1, {m1: A0})
    await h.settle()
    _m2, b2 = h.join_new("g", client_id="c2")
    b1 = h.join("g", m1)
    assert b1.done and b2.done  # everyone known joined: no delay for a non-empty group


@aio
async def test_pending_member_id_expires_and_unblocks_join():
    h = Harness()
    [m1] = await h.stable_group("g", 1, session=10_000)
    pending = h.join("g", session=10_000).result.member_id  # MEMBER_ID_REQUIRED, never comes back
    _m3, b3 = h.join_new("g", client_id="c3", session=10_000)
    b1 = h.join("g", m1, session=10_000)
    assert not b1.done  # the pending member counts as not yet joined
    h.timer.advance(10_000)
    assert b1.done and b3.done
    assert pending not in h.coord.classic_group("g").members


@aio
async def test_leader_never_syncs_pending_sync_expires():
    h = Harness()
    leader, follower = await h.stable_group("g", 2, session=10_000, rebalance=15_000)
    g = h.coord.classic_group("g")
    b = [
        h.join("g", leader, session=10_000, rebalance=15_000),
        h.join("g", follower, session=10_000, rebalance=15_000),
    ]
    gen = b[0].result.generation_id
    s = h.sync("g", gen, follower)  # the leader has died before syncing
    h.timer.advance(15_000)
    assert leader not in g.members
    assert s.result.error == E.REBALANCE_IN_PROGRESS
    assert g.state is S.PREPARING_REBALANCE


@aio
async def test_new_member_that_never_rejoins_is_dropped_after_new_member_timeout():
    h = Harness(new_member_join_timeout_ms=300_000)
    [m1] = await h.stable_group("g", 1, session=10_000, rebalance=600_000)
    g = h.coord.classic_group("g")
    m2, b2 = h.join_new("g", client_id="c2", session=10_000, rebalance=600_000)
    # m1 heartbeats but never rejoins; m2 (new) waits; after 300 s the new member is dropped
    for _ in range(101):
        h.timer.advance(3000)
        if m1 in g.members:
            h.coord.classic.sync.heartbeat("g", 1, m1)
    assert b2.result.error == E.UNKNOWN_MEMBER_ID
    assert m2 not in g.members


# ---------------------------------------------------------------------------------------------- leave


@aio
async def test_leave_batched_and_errors():
    h = Harness()
    leader, follower = await h.stable_group("g", 2)
    err, errs = await h.coord.classic.leave_group("g", [(follower, None, "closing"), ("ghost", None, None)])
    assert err == E.NONE and errs == [E.NONE, E.UNKNOWN_MEMBER_ID]
    g = h.coord.classic_group("g")
    assert g.state is S.PREPARING_REBALANCE
    r = h.join("g", leader).result
    assert [m for m, _, _ in r.members] == [leader]
    err, errs = await h.coord.classic.leave_group("nope", [("x", None, None)])
    assert errs == [E.UNKNOWN_MEMBER_ID]


@aio
async def test_last_member_leaving_empties_group_and_writes_it():
    h = Harness()
    [m1] = await h.stable_group("g", 1)
    await h.coord.classic.leave_group("g", [(m1, None, None)])
    await h.settle()
    g = h.coord.classic_group("g")
    assert g.state is S.EMPTY and g.generation_id == 2 and g.protocol_name is None
    from moldau.protocol import consumer_offsets as fmt

    _last_key, last_value = h.storage.partitions[h.coord.partition_for("g")][-1]
    v = fmt.decode_group_metadata_value(last_value)
    assert (v.generation, v.members, v.protocol, v.protocol_type) == (2, [], None, "consumer")


@aio
async def test_leave_of_pending_member():
    h = Harness()
    pending = h.join("g").result.member_id
    _err, errs = await h.coord.classic.leave_group("g", [(pending, None, None)])
    assert errs == [E.NONE]
    assert not h.coord.classic_group("g").pending_members


@aio
async def test_leader_leaves_and_new_leader_is_elected():
    h = Harness()
    leader, follower = await h.stable_group("g", 2)
    await h.coord.classic.leave_group("g", [(leader, None, None)])
    r = h.join("g", follower).result
    assert r.leader_id == follower and r.generation_id == 3


# ------------------------------------------------------------------------------------- static members


async def _static_stable(h: Harness, instances: list[str]) -> dict[str, str]:
    ids: dict[str, str] = {}
    boxes = {}
    for inst in instances:
        r = h.join("g", instance=inst, client_id=inst)
        ids[inst] = r.result.member_id if r.done else None
        boxes[inst] = r
    # static members skip MEMBER_ID_REQUIRED; the first joined alone, the rest trigger rebalances
    for inst in instances:
        if not boxes[inst].done:
            continue
    g = h.coord.classic_group("g")
    # drive: everyone (re)joins until one generation holds them all
    pending = {
        inst: h.join("g", g.static_members[inst], instance=inst, client_id=inst)
        for inst in instances
        if inst in g.static_members
    }
    results = {inst: b.result for inst, b in pending.items()}
    gen = next(iter(results.values())).generation_id
    leader = next(iter(results.values())).leader_id
    assignment = {g.static_members[inst]: encode_assignment({"t": [i]}) for i, inst in enumerate(instances)}
    syncs = [
        h.sync(
            "g",
            gen,
            g.static_members[inst],
            assignment if g.static_members[inst] == leader else None,
            instance=inst,
        )
        for inst in instances
    ]
    await h.settle()
    assert all(s.result.error == E.NONE for s in syncs)
    assert g.state is S.STABLE
    return dict(g.static_members)


@aio
async def test_static_member_restart_keeps_assignment_without_rebalance():
    h = Harness()
    members = await _static_stable(h, ["i1", "i2"])
    g = h.coord.classic_group("g")
    gen = g.generation_id
    old_i2 = members["i2"]
    assignment_i2 = g.members[old_i2].assignment
    # i2 restarts: it joins with an empty member id and the same instance id
    box = h.join("g", instance="i2", client_id="i2")
    await h.settle()  # answered once the new member id is stored
    r = box.result
    assert r.error == E.NONE and r.member_id != old_i2 and r.generation_id == gen
    assert g.state is S.STABLE  # no rebalance
    s = h.sync("g", gen, r.member_id, instance="i2").result
    assert s.assignment == assignment_i2
    # the old incarnation is fenced
    assert h.coord.classic.sync.heartbeat("g", gen, old_i2, "i2") == E.FENCED_INSTANCE_ID
    assert h.sync("g", gen, old_i2, instance="i2").result.error == E.FENCED_INSTANCE_ID
    assert h.join("g", old_i2, instance="i2").result.error == E.FENCED_INSTANCE_ID
    _err, errs = await h.coord.classic.leave_group("g", [(old_i2, "i2", None)])
    assert errs == [E.FENCED_INSTANCE_ID]
    # the new one is fine; the replacement was persisted
    assert h.coord.classic.sync.heartbeat("g", gen, r.member_id, "i2") == E.NONE
    from moldau.protocol import consumer_offsets as fmt

    v = fmt.decode_group_metadata_value(h.storage.partitions[h.coord.partition_for("g")][-1][1])
    assert r.member_id in [m.member_id for m in v.members]


@aio
async def test_static_leader_restart_skip_assignment_v9_and_old_leader_id_before():
    h = Harness()
    members = await _static_stable(h, ["i1", "i2"])
    g = h.coord.classic_group("g")
    leader_inst = next(i for i, m in members.items() if m == g.leader_id)
    old_leader = g.leader_id
    r = h.join("g", instance=leader_inst, client_id=leader_inst, version=9)
    await h.settle()
    r = r.result
    assert r.skip_assignment and r.leader_id == r.member_id and len(r.members) == 2
    assert g.state is S.STABLE
    # before v9 the answer names the old leader id, so the new incarnation does not reassign
    old = r.member_id
    r8 = h.join("g", instance=leader_inst, client_id=leader_inst, version=8)
    await h.settle()
    r8 = r8.result
    assert r8.leader_id == old and r8.members == [] and not r8.skip_assignment
    assert old_leader != old


@aio
async def test_static_member_rejoin_during_completing_rebalance_triggers_rebalance():
    h = Harness()
    members = await _static_stable(h, ["i1", "i2"])
    g = h.coord.classic_group("g")
    # force a rebalance (the leader rejoins), let it complete the join phase
    leader_inst = next(i for i, m in members.items() if m == g.leader_id)
    other = "i2" if leader_inst == "i1" else "i1"
    h.join("g", members[leader_inst], instance=leader_inst)
    h.join("g", members[other], instance=other)
    assert g.state is S.COMPLETING_REBALANCE
    r = h.join("g", instance=other, client_id=other)
    assert g.state is S.PREPARING_REBALANCE and not r.done


@aio
async def test_admin_removes_static_member_by_instance_id():
    h = Harness()
    await _static_stable(h, ["i1", "i2"])
    _err, errs = await h.coord.classic.leave_group("g", [("", "i2", "admin"), ("", "nope", None)])
    assert errs == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert "i2" not in h.coord.classic_group("g").static_members


@aio
async def test_static_member_unknown_instance_on_heartbeat():
    h = Harness()
    [m1] = await h.stable_group("g", 1)
    assert h.coord.classic.sync.heartbeat("g", 1, m1, "not-registered") == E.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------------------------- concurrent rebalances


@pytest.mark.parametrize("seed", [4, 7, 17, 23])
@aio
async def test_concurrent_joins_and_leaves_never_lose_live_members(seed):
    """Clients that follow the protocol (rejoin on REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION, heartbeat every
    second) while members come and go at once; no live member may ever see UNKNOWN_MEMBER_ID, and the group
    must end Stable with exactly the live members."""
    import random

    rnd = random.Random(seed)
    h = Harness(initial_rebalance_delay_ms=0)
    g_id = "g"

    class Client:
        def __init__(self, name: str) -> None:
            self.name = name
            self.member_id = ""
            self.generation = -1
            self.join_box = None
            self.sync_box = None
            self.alive = True
            self.unknown = 0

        def start_join(self) -> None:
            self.join_box = h.join(
                g_id,
                self.member_id,
                client_id=self.name,
                protocols=[("cooperative-sticky", encode_subscription(["t"], self.name.encode()))],
                session=10_000,
                rebalance=20_000,
            )

        def step(self) -> None:
            if not self.alive:
                return
            if self.join_box is not None and self.join_box.done:
                r = self.join_box.result
                self.join_box = None
                if r.error == E.MEMBER_ID_REQUIRED:
                    self.member_id = r.member_id
                    self.start_join()
                    return
                if r.error == E.UNKNOWN_MEMBER_ID:
                    self.unknown += 1
                    self.member_id = ""
                    self.start_join()
                    return
                if r.error != E.NONE:
                    self.start_join()
                    return
                self.generation = r.generation_id
                assignment = (
                    {m: encode_assignment({"t": [i]}) for i, (m, _, _) in enumerate(r.members)}
                    if r.leader_id == self.member_id
                    else None
                )
                self.sync_box = h.sync(g_id, self.generation, self.member_id, assignment)
                return
            if self.sync_box is not None and self.sync_box.done:
                r = self.sync_box.result
                self.sync_box = None
                if r.error == E.UNKNOWN_MEMBER_ID:
                    self.unknown += 1
                    self.member_id = ""
                if r.error != E.NONE:
                    self.start_join()
                return
            if self.join_box is None and self.sync_box is None:
                err = h.coord.classic.sync.heartbeat(g_id, self.generation, self.member_id)
                if err == E.UNKNOWN_MEMBER_ID:
                    self.unknown += 1
                    self.member_id = ""
                if err != E.NONE:
                    self.start_join()

    clients: list[Client] = []
    for round_ in range(12):
        action = rnd.choice(["add", "add", "leave", "crash"]) if clients else "add"
        live = [c for c in clients if c.alive]
        if action == "add" or not live:
            c = Client(f"c{round_}")
            clients.append(c)
            c.start_join()
        elif action == "leave":
            c = rnd.choice(live)
            c.alive = False
            if c.member_id:
                await h.coord.classic.leave_group(g_id, [(c.member_id, None, None)])
        else:
            rnd.choice(live).alive = False  # vanishes: only the session timeout notices
        for _ in range(rnd.randint(0, 3)):
            for c in clients:
                c.step()
            await h.settle()
            h.timer.advance(rnd.choice([10, 200, 1000]))
    if not any(c.alive for c in clients):
        clients.append(Client("last"))
        clients[-1].start_join()
    for _ in range(120):  # let everything settle: 2 minutes of 1 s ticks
        for c in clients:
            c.step()
        await h.settle()
        h.timer.advance(1000)
    g = h.coord.classic_group(g_id)
    live = [c for c in clients if c.alive]
    assert g.state is S.STABLE
    assert sorted(g.members) == sorted(c.member_id for c in live)
    assert all(c.generation == g.generation_id for c in live)
    # a live member only sees UNKNOWN_MEMBER_ID if it was itself silent too long, which never happens here
    assert [c.name for c in live if c.unknown] == []

"""KIP-848 consumer groups (ConsumerGroupHeartbeat) with an injected clock, and the server assignors."""

from __future__ import annotations

import random

import pytest

from moldau.broker.groups import assignors
from moldau.broker.groups.consumer import ConsumerGroup
from moldau.broker.groups.group import ClassicGroup, CommittedOffset
from moldau.protocol.errors import ErrorCode as E

from harness.groups_harness import FakeTopics, Harness, aio


class Client:
    """A KIP-848 client: owns exactly what the last assignment said (revokes at once, then acknowledges)."""

    def __init__(
        self,
        h: Harness,
        group: str = "g",
        topics: list[str] | None = None,
        member_id: str = "",
        instance: str | None = None,
        regex: str | None = None,
        assignor: str | None = None,
        version: int = 1,
    ) -> None:
        self.h, self.group = h, group
        self.topics = ["t"] if topics is None and regex is None else topics
        self.regex = regex
        self.instance = instance
        self.assignor = assignor
        self.version = version
        self.member_id = member_id or (f"m-{random.random()}" if version >= 1 else "")
        self.epoch = 0
        self.owned: dict[str, set[int]] = {}
        self.last = None

    def owned_ids(self) -> list[tuple[object, list[int]]]:
        return [(self.h.topics.topic_id(t), sorted(ps)) for t, ps in sorted(self.owned.items())]

    def heartbeat(self, full: bool = False):
        first = self.epoch == 0
        r = self.h.coord.consumer.heartbeat(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance,
            rebalance_timeout_ms=30_000 if first or full else -1,
            subscribed_topic_names=self.topics if first or full else None,
            subscribed_topic_regex=self.regex if first or full else None,
            server_assignor=self.assignor if first else None,
            owned=[] if first else self.owned_ids(),
            client_id="cl",
            client_host="/127.0.0.1",
            api_version=self.version,
        )
        self.last = r
        if r.error == E.NONE:
            self.member_id = r.member_id
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = {t: set(ps) for t, ps in r.assignment.items()}
        return r

    def leave(self, static: bool = False):
        r = self.h.coord.consumer.heartbeat(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=-2 if static else -1,
            instance_id=self.instance,
            api_version=self.version,
        )
        self.owned = {}
        return r

    @property
    def n(self) -> int:
        return sum(len(p) for p in self.owned.values())


def harness(**counts: int) -> Harness:
    return Harness(topics=FakeTopics(**(counts or {"t": 6})))


def no_overlap(clients: list[Client]) -> None:
    seen: set[tuple[str, int]] = set()
    for c in clients:
        for t, ps in c.owned.items():
            for p in ps:
                assert (t, p) not in seen, f"{t}-{p} owned twice"
                seen.add((t, p))


def rounds(clients: list[Client], n: int = 4, step_ms: int = 1000) -> None:
    for _ in range(n):
        for c in clients:
            r = c.heartbeat()
            assert r.error == E.NONE, r
            no_overlap(clients)
        clients[0].h.timer.advance(step_ms)


@aio
async def test_single_member_gets_everything_at_once():
    h = harness()
    a = Client(h)
    r = a.heartbeat()
    assert r.error == E.NONE and r.member_epoch == 1 and r.member_id == a.member_id
    assert r.assignment == {"t": set(range(6))} and r.heartbeat_interval_ms == 5000
    g = h.coord.groups["g"]
    assert isinstance(g, ConsumerGroup) and g.state_name == "Stable"
    r = a.heartbeat()
    assert r.assignment is None  # unchanged: not repeated
    assert r.member_epoch == 1


@aio
async def test_v0_member_id_is_made_by_the_coordinator():
    h = harness()
    a = Client(h, version=0)
    r = a.heartbeat()
    assert r.error == E.NONE and len(r.member_id) == 36


@aio
async def test_second_member_partitions_move_after_revocation():
    h = harness()
    a, b = Client(h), Client(h)
    a.heartbeat()
    rb = b.heartbeat()
    assert rb.member_epoch == 2 and rb.assignment == {}  # everything is still owned by a
    g = h.coord.groups["g"]
    assert g.state_name == "Reconciling"
    ra = a.heartbeat()
    assert ra.member_epoch == 1 and a.n == 3  # a must give up three partitions first, keeping its epoch
    ra = a.heartbeat()  # a acknowledges (owns only its three)
    assert ra.member_epoch == 2
    rb = b.heartbeat()
    assert b.n == 3 and rb.member_epoch == 2
    no_overlap([a, b])
    assert g.state_name == "Stable"
    assert set().union(*(c.owned["t"] for c in (a, b))) == set(range(6))


@aio
async def test_three_members_balanced_and_leave_rebalances():
    h = harness(t=6)
    cs = [Client(h) for _ in range(3)]
    rounds(cs, 4)
    assert sorted(c.n for c in cs) == [2, 2, 2]
    kept = {id(c): set(c.owned["t"]) for c in cs[:2]}
    assert cs[2].leave().member_epoch == -1
    rounds(cs[:2], 3)
    assert sorted(c.n for c in cs[:2]) == [3, 3]
    for c in cs[:2]:
        assert kept[id(c)] <= c.owned["t"]  # sticky: nobody lost anything


@aio
async def test_session_timeout_removes_silent_member():
    h = harness()
    a, b = Client(h), Client(h)
    rounds([a, b], 3)
    for _ in range(10):  # 50 s: b is silent
        h.timer.advance(5000)
        a.heartbeat()
    assert b.member_id not in h.coord.groups["g"].members
    assert a.n == 6
    assert b.heartbeat().error == E.UNKNOWN_MEMBER_ID


@aio
async def test_member_that_never_revokes_is_fenced_after_rebalance_timeout():
    h = harness()
    a = Client(h)
    a.heartbeat()
    b = Client(h)
    b.heartbeat()
    g = h.coord.groups["g"]
    # a learns it must revoke but keeps reporting all six partitions
    h.coord.consumer.heartbeat(
        group_id="g", member_id=a.member_id, member_epoch=1, owned=[(h.topics.topic_id("t"), list(range(6)))]
    )
    assert g.members[a.member_id].state == "unrevoked_partitions"
    for _ in range(7):
        h.timer.advance(5000)
        h.coord.consumer.heartbeat(
            group_id="g",
            member_id=a.member_id,
            member_epoch=1,
            owned=[(h.topics.topic_id("t"), list(range(6)))],
        )
        b.heartbeat()
    assert a.member_id not in g.members
    assert b.n == 6


@aio
async def test_epoch_errors_and_invalid_requests():
    h = harness()
    a = Client(h)
    a.heartbeat()
    hb = h.coord.consumer.heartbeat
    assert hb(group_id="g", member_id=a.member_id, member_epoch=5).error == E.FENCED_MEMBER_EPOCH
    assert hb(group_id="g", member_id="nobody", member_epoch=1).error == E.UNKNOWN_MEMBER_ID
    assert hb(group_id="nogroup", member_id="x", member_epoch=3).error == E.UNKNOWN_MEMBER_ID
    assert hb(group_id="", member_id="x", member_epoch=0).error == E.INVALID_REQUEST
    assert (
        hb(group_id="g", member_id="new", member_epoch=0, subscribed_topic_names=["t"], owned=[]).error
        == E.INVALID_REQUEST
    )  # no rebalance timeout
    assert (
        hb(
            group_id="g", member_id="new", member_epoch=0, rebalance_timeout_ms=1000, owned=[], api_version=1
        ).error
        == E.INVALID_REQUEST
    )  # no subscription
    assert (
        hb(
            group_id="g",
            member_id="",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            owned=[],
            subscribed_topic_names=["t"],
            api_version=1,
        ).error
        == E.INVALID_REQUEST
    )  # v1: client makes the id
    assert (
        hb(
            group_id="g",
            member_id="new",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            owned=[],
            subscribed_topic_names=["t"],
            server_assignor="sticky",
        ).error
        == E.UNSUPPORTED_ASSIGNOR
    )
    assert (
        hb(
            group_id="g",
            member_id="new",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            owned=[],
            subscribed_topic_regex="([",
            api_version=1,
        ).error
        == E.INVALID_REGULAR_EXPRESSION
    )
    assert hb(group_id="g", member_id="x", member_epoch=-7).error == E.INVALID_REQUEST


@aio
async def test_lost_response_previous_epoch_accepted():
    h = harness()
    a, b = Client(h), Client(h)
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()  # revoke to 3
    old_epoch = a.epoch
    r = a.heartbeat()  # epoch 2 now
    assert r.member_epoch == old_epoch + 1
    # the answer was lost: the client heartbeats with the previous epoch and a subset of its assignment
    r = h.coord.consumer.heartbeat(
        group_id="g", member_id=a.member_id, member_epoch=old_epoch, owned=a.owned_ids()
    )
    assert r.error == E.NONE and r.member_epoch == old_epoch + 1


@aio
async def test_rejoin_with_epoch_zero_resets_member():
    h = harness()
    a, b = Client(h), Client(h)
    rounds([a, b], 3)
    a.epoch, a.owned = 0, {}  # fenced client abandons everything and rejoins with its id
    r = a.heartbeat()
    assert r.error == E.NONE
    rounds([a, b], 3)
    assert sorted(c.n for c in (a, b)) == [3, 3]


@aio
async def test_static_member_restart_takes_over_without_rebalance():
    h = harness()
    a = Client(h, instance="i-a")
    b = Client(h, instance="i-b")
    rounds([a, b], 3)
    g = h.coord.groups["g"]
    epoch = g.group_epoch
    owned_b = {t: set(p) for t, p in b.owned.items()}
    # the new incarnation cannot join while the old one is active
    b2 = Client(h, instance="i-b")
    assert b2.heartbeat().error == E.UNRELEASED_INSTANCE_ID
    assert b.leave(static=True).member_epoch == -2
    r = b2.heartbeat()
    assert r.error == E.NONE and b2.owned == owned_b
    assert g.group_epoch == epoch  # no rebalance
    assert b.member_id not in g.members and b2.member_id in g.members
    rounds([a, b2], 2)
    assert b2.owned == owned_b


@aio
async def test_static_member_not_back_in_time_is_removed():
    h = harness()
    a, b = Client(h, instance="i-a"), Client(h, instance="i-b")
    rounds([a, b], 3)
    b.leave(static=True)
    for _ in range(10):
        h.timer.advance(5000)
        a.heartbeat()
    assert a.n == 6


@aio
async def test_partition_count_change_triggers_new_assignment():
    h = harness(t=2)
    a, b = Client(h), Client(h)
    rounds([a, b], 3)
    assert sorted(c.n for c in (a, b)) == [1, 1]
    h.topics.set("t", 6)
    rounds([a, b], 4)
    assert sorted(c.n for c in (a, b)) == [3, 3]


@aio
async def test_regex_subscription():
    h = harness(**{"orders-1": 2, "orders-2": 2, "other": 2})
    a = Client(h, topics=None, regex="orders-.*")
    a.heartbeat()
    assert a.owned == {"orders-1": {0, 1}, "orders-2": {0, 1}}
    h.topics.set("orders-3", 1)
    rounds([a], 2)
    assert "orders-3" in a.owned and "other" not in a.owned


@aio
async def test_range_assignor_chosen_by_members():
    h = harness(t=4, u=4)
    a = Client(h, topics=["t", "u"], assignor="range")
    b = Client(h, topics=["t", "u"], assignor="range")
    rounds([a, b], 4)
    assert h.coord.groups["g"].assignor_name == "range"
    # co-partitioned: the same partition numbers of both topics go to the same member
    for c in (a, b):
        assert c.owned["t"] == c.owned["u"]


@aio
async def test_offsets_with_member_epochs():
    h = harness()
    a = Client(h)
    a.heartbeat()
    co = {("t", 0): CommittedOffset(5)}
    assert await h.coord.offsets.commit_offsets("g", a.member_id, a.epoch, None, co, 9) == {("t", 0): E.NONE}
    assert await h.coord.offsets.commit_offsets("g", a.member_id, a.epoch + 1, None, co, 9) == {
        ("t", 0): E.STALE_MEMBER_EPOCH
    }
    assert await h.coord.offsets.commit_offsets(
        "g", "x", a.epoch, None, co, 9) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await h.coord.offsets.commit_offsets("g", a.member_id, a.epoch, None, co, 8) == {
        ("t", 0): E.UNSUPPORTED_VERSION
    }
    assert (
        h.coord.offsets.fetch_offsets(
            "g", [("t", 0)], member_id=a.member_id, member_epoch=a.epoch)[1][0].offset == 5
    )
    assert (
        h.coord.offsets.fetch_offsets("g", [("t", 0)], member_id=a.member_id, member_epoch=9)[0]
        == E.STALE_MEMBER_EPOCH
    )
    assert h.coord.offsets.fetch_offsets("g", [("t", 0)])[1][0].offset == 5  # admin: no member
    # OffsetDelete refuses subscribed topics; DeleteGroups refuses a group with members
    _err, res = await h.coord.offsets.delete_offsets("g", [("t", 0)])
    assert res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC}
    assert await h.coord.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}
    a.leave()
    assert await h.coord.delete_groups(["g"]) == {"g": E.NONE}


@aio
async def test_conversions_between_classic_and_consumer_keep_offsets():
    h = harness()
    await h.coord.offsets.commit_offsets("g", "", -1, None, {("t", 1): CommittedOffset(9)})
    assert isinstance(h.coord.groups["g"], ClassicGroup)
    a = Client(h)
    assert a.heartbeat().error == E.NONE
    assert isinstance(h.coord.groups["g"], ConsumerGroup)
    assert h.coord.offsets.fetch_offsets("g", [("t", 1)])[1][0].offset == 9
    # a classic member is refused while the consumer group has members...
    assert h.join("g").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    a.leave()
    # ...and converts it back once it is empty
    _mid, box = h.join_new("g")
    assert box.result.error == E.NONE and isinstance(h.coord.groups["g"], ClassicGroup)
    assert h.coord.offsets.fetch_offsets("g", [("t", 1)])[1][0].offset == 9
    # a consumer member cannot join a non-empty classic group
    assert Client(h).heartbeat().error == E.GROUP_ID_NOT_FOUND


@aio
async def test_list_and_describe():
    h = harness()
    a = Client(h)
    a.heartbeat()
    listed = h.coord.list_groups()
    assert [(x.group_id, x.protocol_type, x.state, x.group_type) for x in listed] == [
        ("g", "consumer", "Stable", "consumer")
    ]
    assert h.coord.list_groups(types_filter=["classic"]) == []
    assert h.coord.describe_group("g").error == E.GROUP_ID_NOT_FOUND
    err, _msg, g = h.coord.consumer.describe("g")
    assert err == E.NONE and g.members[a.member_id].assigned == {"t": set(range(6))}
    assert h.coord.consumer.describe("nope")[0] == E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("seed", [1, 2, 3])
@aio
async def test_churn_never_double_assigns_and_converges(seed):
    rnd = random.Random(seed)
    h = harness(t=12, u=5)
    live: list[Client] = []
    for step in range(40):
        action = rnd.random()
        if action < 0.3 or len(live) < 2:
            live.append(Client(h, topics=["t", "u"]))
        elif action < 0.4:
            live.pop(rnd.randrange(len(live))).leave()
        elif action < 0.45:
            live.pop(rnd.randrange(len(live)))  # vanishes; the session timeout will notice
        for c in rnd.sample(live, k=len(live)):
            r = c.heartbeat()
            assert r.error in (E.NONE,), r
            no_overlap(live)
        h.timer.advance(rnd.choice([100, 1000, 3000]))
    for _ in range(30):  # let sessions of vanished members expire and everyone converge
        for c in live:
            c.heartbeat()
            no_overlap(live)
        h.timer.advance(2000)
    g = h.coord.groups["g"]
    assert g.state_name == "Stable"
    counts = sorted(c.n for c in live)
    assert sum(counts) == 17 and counts[-1] - counts[0] <= 1


# --------------------------------------------------------------------------------------------- assignors


def test_uniform_balances_and_is_sticky():
    spec = {m: assignors.MemberSpec({"t"}) for m in ("a", "b", "c")}
    first = assignors.uniform(spec, {"t": 7})
    assert sorted(len(a["t"]) for a in first.values()) == [2, 2, 3]
    assert set().union(*(a["t"] for a in first.values())) == set(range(7))
    # a fourth member: only what it needs moves
    spec2 = {m: assignors.MemberSpec({"t"}, first[m]) for m in first}
    spec2["d"] = assignors.MemberSpec({"t"})
    second = assignors.uniform(spec2, {"t": 7})
    moved = sum(len(first[m]["t"] - second[m].get("t", set())) for m in first)
    assert moved == len(second["d"]["t"]) and sorted(len(a.get("t", ())) for a in second.values()) == [
        1,
        2,
        2,
        2,
    ]


def test_uniform_heterogeneous_subscriptions():
    spec = {
        "a": assignors.MemberSpec({"t"}),
        "b": assignors.MemberSpec({"t", "u"}),
        "c": assignors.MemberSpec({"u"}),
    }
    out = assignors.uniform(spec, {"t": 4, "u": 4})
    assert set().union(*(a.get("t", set()) for a in out.values())) == set(range(4))
    assert "u" not in out["a"] and "t" not in out["c"]
    assert sorted(sum(len(p) for p in a.values()) for a in out.values()) in ([2, 3, 3], [3, 3, 2], [2, 3, 3])


def test_range_assignor():
    spec = {m: assignors.MemberSpec({"t"}) for m in ("b", "a")}
    out = assignors.range_assign(spec, {"t": 5})
    assert out == {"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4}}}
    with pytest.raises(assignors.UnsupportedAssignor):
        assignors.assign("sticky", spec, {"t": 5})

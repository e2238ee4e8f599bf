"""Partition assignors of the classic consumer protocol, and the subscription/assignment encoding.

``range``, ``roundrobin`` and ``sticky`` are eager (every member gives up everything before a rebalance;
``sticky`` then hands members back what they had as far as balance allows, from the previous assignment each
member sends in its subscription's user data, in the Java StickyAssignor's format); ``cooperative-sticky``
is incremental: members keep what they own, and a partition that moves is first
revoked by its old owner (left out of this generation's assignment), then assigned in a follow-up
rebalance.

Member metadata is Kafka's ``ConsumerProtocolSubscription`` and the leader's answer
``ConsumerProtocolAssignment``, each prefixed by its int16 version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol, cast

from moldau.protocol import messages as m

from .types import TopicPartition

__all__ = [
    "MemberSubscription",
    "Assignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "CooperativeStickyAssignor",
    "StickyAssignor",
    "encode_sticky_user_data",
    "decode_sticky_user_data",
    "ASSIGNORS",
    "get_assignor",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
]

_I16 = struct.Struct(">h")
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3


@dataclass(slots=True)
class MemberSubscription:
    member_id: str
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None


def encode_subscription(topics: Iterable[str], owned: Iterable[TopicPartition] = (), generation_id: int = -1,
                        rack_id: str | None = None, user_data: bytes | None = None,
                        version: int = SUBSCRIPTION_VERSION) -> bytes:
    M = m.ConsumerProtocolSubscription
    by_topic: dict[str, list[int]] = {}
    for tp in owned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    obj = M.new(
        topics=sorted(set(topics)),
        user_data=user_data,
        owned_partitions=[
            M.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())
        ],
        generation_id=generation_id,
        rack_id=rack_id,
    )
    version = min(version, M.max_version)
    return _I16.pack(version) + M.encode(obj, version)


def decode_subscription(
    member_id: str, data: bytes, group_instance_id: str | None = None
) -> MemberSubscription:
    M = m.ConsumerProtocolSubscription
    (version,) = _I16.unpack_from(data, 0)
    # newer versions only append fields: read them as the newest version we know
    obj, _ = M.decode(data, min(version, M.max_version), 2)
    owned = [
        TopicPartition(t.topic, p)
        for t in (getattr(obj, "owned_partitions", None) or [])
        for p in t.partitions
    ]
    return MemberSubscription(member_id, list(obj.topics), obj.user_data, owned,
                              getattr(obj, "generation_id", -1) if version >= 2 else -1,
                              getattr(obj, "rack_id", None) if version >= 3 else None, group_instance_id)


def encode_assignment(partitions: Iterable[TopicPartition], user_data: bytes | None = None,
                      version: int = ASSIGNMENT_VERSION) -> bytes:
    M = m.ConsumerProtocolAssignment
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    obj = M.new(
        assigned_partitions=[
            M.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())
        ],
        user_data=user_data,
    )
    version = min(version, M.max_version)
    return _I16.pack(version) + M.encode(obj, version)


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    if not data:
        return []
    M = m.ConsumerProtocolAssignment
    (version,) = _I16.unpack_from(data, 0)
    obj, _ = M.decode(data, min(version, M.max_version), 2)
    return [TopicPartition(t.topic, p) for t in obj.assigned_partitions for p in t.partitions]


class Assignor(Protocol):
    name: str
    cooperative: bool

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]: ...


def _member_order(subscriptions: dict[str, MemberSubscription]) -> list[str]:
    # Kafka orders by group instance id when every member has one (static membership), else member id
    if subscriptions and all(s.group_instance_id for s in subscriptions.values()):
        return sorted(subscriptions, key=lambda mid: (subscriptions[mid].group_instance_id, mid))
    return sorted(subscriptions)


class RangeAssignor:
    """Per topic: the sorted partitions in contiguous ranges over the sorted members subscribed to it."""

    name = "range"
    cooperative = False

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {mid: [] for mid in subscriptions}
        order = _member_order(subscriptions)
        for topic in sorted(partitions_per_topic):
            n = partitions_per_topic[topic]
            members = [mid for mid in order if topic in subscriptions[mid].topics]
            if not members or n <= 0:
                continue
            per, extra = divmod(n, len(members))
            start = 0
            for i, mid in enumerate(members):
                count = per + (1 if i < extra else 0)
                out[mid].extend(TopicPartition(topic, p) for p in range(start, start + count))
                start += count
        return out


class RoundRobinAssignor:
    """All partitions of all topics, sorted, dealt one by one to the members (skipping the unsubscribed)."""

    name = "roundrobin"
    cooperative = False

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {mid: [] for mid in subscriptions}
        order = _member_order(subscriptions)
        if not order:
            return out
        i = 0
        for topic in sorted(partitions_per_topic):
            for p in range(partitions_per_topic[topic]):
                for _ in range(len(order)):
                    mid = order[i % len(order)]
                    i += 1
                    if topic in subscriptions[mid].topics:
                        out[mid].append(TopicPartition(topic, p))
                        break
        return out


class CooperativeStickyAssignor:
    """Balanced and sticky; partitions that change owner are withheld for one generation (cooperative)."""

    name = "cooperative-sticky"
    cooperative = True

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
        target = self.sticky_assignment(partitions_per_topic, subscriptions)
        # cooperative: a partition owned by another member in the last generation is not handed over yet
        owner: dict[TopicPartition, str] = {}
        for mid, sub in subscriptions.items():
            for tp in sub.owned_partitions:
                owner.setdefault(tp, mid)
        out: dict[str, list[TopicPartition]] = {}
        for mid, tps in target.items():
            out[mid] = [tp for tp in tps if owner.get(tp, mid) == mid]
        return out

    def sticky_assignment(self, partitions_per_topic: dict[str, int],
                          subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
        members = _member_order(subscriptions)
        out: dict[str, list[TopicPartition]] = {mid: [] for mid in members}
        if not members:
            return out
        all_tps = [
            TopicPartition(t, p) for t in sorted(partitions_per_topic) for p in range(partitions_per_topic[t])
        ]
        valid = set(all_tps)
        # keep current ownership; if two members claim a partition, the higher generation wins
        claimed: dict[TopicPartition, tuple[int, str]] = {}
        for mid in members:
            sub = subscriptions[mid]
            for tp in sub.owned_partitions:
                if tp not in valid or tp.topic not in sub.topics:
                    continue
                prev = claimed.get(tp)
                if prev is None or sub.generation_id > prev[0]:
                    claimed[tp] = (sub.generation_id, mid)
        for tp, (_g, mid) in claimed.items():
            out[mid].append(tp)
        # members may not keep more than their fair share
        total = len(all_tps)
        quota_max = -(-total // len(members))
        for mid in members:
            if len(out[mid]) > quota_max:
                out[mid].sort()
                out[mid] = out[mid][:quota_max]
        assigned = {tp for tps in out.values() for tp in tps}
        # hand out the rest, each to the least loaded member subscribed to its topic
        for tp in all_tps:
            if tp in assigned:
                continue
            cands = [mid for mid in members if tp.topic in subscriptions[mid].topics]
            if not cands:
                continue
            mid = min(cands, key=lambda c: (len(out[c]), members.index(c)))
            out[mid].append(tp)
        # balance: move partitions from the most to the least loaded member while the gap is > 1
        for _ in range(total * 2 + 1):
            moved = False
            order = sorted(members, key=lambda c: len(out[c]))
            for lo in order:
                for hi in reversed(order):
                    if len(out[hi]) - len(out[lo]) <= 1:
                        continue
                    movable = [tp for tp in sorted(out[hi]) if tp.topic in subscriptions[lo].topics]
                    if movable:
                        tp = movable[-1]
                        out[hi].remove(tp)
                        out[lo].append(tp)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                break
        for mid in out:
            out[mid].sort()
        return out


_I32 = struct.Struct(">i")


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """The Java StickyAssignor's user data (``StickyAssignorUserData`` v1): the member's previous assignment
    as [topic: string, partitions: [int32]] then, in v1, the generation (int32). Old-style (non-flexible)
    encoding: int32 array counts, int16 string lengths, no version prefix."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, parts in sorted(by_topic.items()):
        name = topic.encode("utf-8")
        out += _I16.pack(len(name)) + name + _I32.pack(len(parts))
        for p in sorted(parts):
            out += _I32.pack(p)
    if generation is not None:
        out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes | None) -> tuple[list[TopicPartition], int]:
    """-> (previous assignment, generation or -1 when the v0 layout has none); ([], -1) for empty data."""
    if not data:
        return [], -1
    pos = 0
    (n,) = _I32.unpack_from(data, pos)
    pos += 4
    out: list[TopicPartition] = []
    for _ in range(n):
        (ln,) = _I16.unpack_from(data, pos)
        pos += 2
        topic = bytes(data[pos:pos + ln]).decode("utf-8")
        pos += ln
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        for _ in range(count):
            out.append(TopicPartition(topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
    generation = _I32.unpack_from(data, pos)[0] if len(data) - pos >= 4 else -1
    return out, generation


class StickyAssignor(CooperativeStickyAssignor):
    """Kafka's eager ``sticky`` assignor: balanced, and members get back what they had before the rebalance.

    Members revoke everything before joining (eager), so each reports its previous assignment and generation
    in the subscription's user data (``encode_sticky_user_data``, the Java client's layout, so mixed groups
    with Java or kafka-python ``sticky`` members work); subscriptions that carry owned partitions (v1+)
    are used as they are."""

    name = "sticky"
    cooperative = False

    def subscription_user_data(self, previous: Iterable[TopicPartition], generation: int) -> bytes:
        return encode_sticky_user_data(previous, generation)

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
        subs: dict[str, MemberSubscription] = {}
        for mid, sub in subscriptions.items():
            if not sub.owned_partitions and sub.user_data:
                try:
                    owned, generation = decode_sticky_user_data(sub.user_data)
                except (struct.error, UnicodeDecodeError, ValueError):
                    owned, generation = [], -1  # not the sticky layout: start this member from scratch
                sub = MemberSubscription(sub.member_id, sub.topics, sub.user_data, owned,
                                         generation if sub.generation_id < 0 else sub.generation_id,
                                         sub.rack_id, sub.group_instance_id)
            subs[mid] = sub
        return self.sticky_assignment(partitions_per_topic, subs)


ASSIGNORS: dict[str, Callable[[], Assignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
_JAVA_NAMES = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.stickyassignor": "sticky",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
}


def get_assignor(spec: object) -> Assignor:
    """An assignor from a name ('range', 'roundrobin', 'sticky', 'cooperative-sticky', Java class names) or
    object."""
    if isinstance(spec, str):
        key = spec.strip().lower()
        key = _JAVA_NAMES.get(key, key)
        cls = ASSIGNORS.get(key)
        if cls is None:
            raise ValueError(
                f"unknown partition.assignment.strategy {spec!r} (known: {', '.join(ASSIGNORS)})"
            )
        return cls()
    if isinstance(spec, type):
        spec = spec()
    if hasattr(spec, "assign") and hasattr(spec, "name"):
        return cast(Assignor, spec)
    raise ValueError(f"not an assignor: {spec!r}")

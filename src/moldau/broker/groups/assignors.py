"""Server-side assignors for KIP-848 consumer groups (ConsumerGroupHeartbeat ``ServerAssignor``).

    assign(name, members, partition_counts) -> {member_id: {topic: {partitions}}}

``members`` maps a member id to its ``MemberSpec`` (subscribed topics, current assignment, rack).
``partition_counts`` maps every subscribed, existing topic to its number of partitions.

* ``uniform`` (Kafka's default): every partition of every subscribed topic goes to one subscribed member;
  counts differ by at most one between members that could take each other's partitions; sticky: a member keeps
  what it owns as long as the balance allows, so a rebalance moves only what it must.
* ``range``: per topic, the subscribed members sorted by member id get consecutive ranges (the first
  ``partitions % members`` one more), so co-partitioned topics land together; sticky where the ranges allow
  (a member keeps its range position when membership does not change).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Assignment = dict[str, set[int]]


@dataclass(slots=True)
class MemberSpec:
    topics: set[str]
    current: Assignment = field(default_factory=dict)
    rack: str | None = None


class UnsupportedAssignor(ValueError):
    pass


ASSIGNORS = ("uniform", "range")


def assign(
    name: str, members: dict[str, MemberSpec], partition_counts: dict[str, int]
) -> dict[str, Assignment]:
    if name == "uniform":
        return uniform(members, partition_counts)
    if name == "range":
        return range_assign(members, partition_counts)
    raise UnsupportedAssignor(name)


def _empty(members: dict[str, MemberSpec]) -> dict[str, Assignment]:
    return {m: {} for m in members}


def uniform(members: dict[str, MemberSpec], partition_counts: dict[str, int]) -> dict[str, Assignment]:
    result = _empty(members)
    if not members:
        return result
    eligible: dict[str, list[str]] = {
        t: sorted(m for m, spec in members.items() if t in spec.topics) for t in partition_counts
    }
    owner: dict[tuple[str, int], str] = {}
    count = {m: 0 for m in members}

    def give(tp: tuple[str, int], m: str) -> None:
        owner[tp] = m
        result[m].setdefault(tp[0], set()).add(tp[1])
        count[m] += 1

    def take(tp: tuple[str, int]) -> None:
        m = owner.pop(tp)
        result[m][tp[0]].discard(tp[1])
        if not result[m][tp[0]]:
            del result[m][tp[0]]
        count[m] -= 1

    # fair share per member when every member subscribes to the same topics; an upper bound otherwise
    total = sum(n for t, n in partition_counts.items() if eligible[t])
    cap = -(-total // len(members))
    # 1. stickiness: keep what members own, while it is still valid, up to the fair share
    for m in sorted(members, key=lambda x: (-sum(len(p) for p in members[x].current.values()), x)):
        for t in sorted(members[m].current):
            if t not in partition_counts or t not in members[m].topics:
                continue
            for p in sorted(members[m].current[t]):
                if p < partition_counts[t] and (t, p) not in owner and count[m] < cap:
                    give((t, p), m)
    # 2. the rest, to the least loaded eligible member (topics with fewer candidates first)
    for t in sorted(partition_counts, key=lambda x: (len(eligible[x]), x)):
        cands = eligible[t]
        if not cands:
            continue
        for p in range(partition_counts[t]):
            if (t, p) not in owner:
                give((t, p), min(cands, key=lambda x: (count[x], x)))
    # 3. balance: move single partitions from the most to the least loaded member that can take them
    for _ in range(total * 2 + 1):
        moved = False
        for src in sorted(members, key=lambda x: (-count[x], x)):
            best: tuple[tuple[str, int], str] | None = None
            for t in sorted(result[src]):
                for dst in eligible[t]:
                    if count[dst] + 1 < count[src] and (best is None or count[dst] < count[best[1]]):
                        best = ((t, min(result[src][t])), dst)
            if best is not None:
                tp, dst = best
                # prefer moving a partition the source did not own before (keeps stickiness)
                t = tp[0]
                prev = members[src].current.get(t, set())
                fresh = sorted(result[src][t] - prev)
                tp = (t, fresh[0]) if fresh else (t, max(result[src][t]))
                take(tp)
                give(tp, dst)
                moved = True
                break
        if not moved:
            break
    return result


def range_assign(members: dict[str, MemberSpec], partition_counts: dict[str, int]) -> dict[str, Assignment]:
    result = _empty(members)
    for t in sorted(partition_counts):
        subs = sorted(m for m, spec in members.items() if t in spec.topics)
        if not subs:
            continue
        n = partition_counts[t]
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            size = per + (1 if i < extra else 0)
            if size:
                result[m][t] = set(range(start, start + size))
            start += size
    return result

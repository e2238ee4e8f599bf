"""Test harness for the group coordinator (used by tests/unit/test_groups_*.py): a ManualTimer, in-memory
storage and helpers that send JoinGroup/SyncGroup like a client would and collect the answers."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from moldau.broker.coordinator.memory import MemoryCoordinatorLog
from moldau.broker.groups.coordinator import GroupCoordinator
from moldau.broker.groups.group import JoinResult, encode_assignment, encode_subscription
from moldau.broker.groups.model import GroupConfig, JoinRequest
from moldau.broker.groups.timer import ManualTimer
from moldau.protocol.errors import ErrorCode

SUB_T = encode_subscription(["t"])


def aio(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run an ``async def`` test in a fresh event loop (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@dataclass
class Box:
    results: list[Any] = field(default_factory=list)

    def __call__(self, r: Any) -> None:
        self.results.append(r)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def result(self) -> Any:
        assert len(self.results) == 1, f"expected exactly one answer, got {self.results}"
        return self.results[0]


class Harness:
    def __init__(
        self,
        storage: MemoryCoordinatorLog | None = None,
        timer: ManualTimer | None = None,
        topics: Any = None,
        **config: Any,
    ) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.timer = timer or ManualTimer()
        self.storage = storage if storage is not None else MemoryCoordinatorLog()
        self.config = GroupConfig(**config)
        self.topics = topics
        self.coord = GroupCoordinator(self.config, self.timer, self.storage, topics)
        self.coord.follow(self.storage)

    def restart(self) -> "Harness":
        """A new coordinator over the same storage (a broker restart), loaded."""
        self.coord.shutdown()
        h = Harness(
            self.storage,
            self.timer,
            self.topics,
            **{k: getattr(self.config, k) for k in self.config.__slots__},
        )
        return h

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        instance: str | None = None,
        session: int = 10_000,
        rebalance: int = 30_000,
        client_id: str = "c",
        version: int = 9,
        reason: str | None = None,
    ) -> Box:
        box = Box()
        req = JoinRequest(
            group_id=group,
            member_id=member_id,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocol_type=protocol_type,
            protocols=protocols if protocols is not None else [("range", SUB_T)],
            group_instance_id=instance,
            client_id=client_id,
            client_host="/127.0.0.1",
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
            reason=reason,
        )
        self.coord.classic.handle_join(req, box)
        return box

    def join_new(self, group: str = "g", **kw: Any) -> tuple[str, Box]:
        """First join (MEMBER_ID_REQUIRED) then the join with the given id; returns (member id, box)."""
        first = self.join(group, **kw).result
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED, first
        return first.member_id, self.join(group, first.member_id, **kw)

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Box:
        box = Box()
        self.coord.classic.sync.handle_sync(
            group, generation, member_id, instance, protocol_type, protocol_name, assignments or {}, box
        )
        return box

    async def settle(self) -> None:
        """Let background tasks (appends to storage) finish."""
        for _ in range(50):
            await asyncio.sleep(0)
            if not self.coord.runtime.tasks:
                return
        raise AssertionError("background tasks did not finish")

    async def stable_group(self, group: str = "g", n: int = 1, **kw: Any) -> list[str]:
        """Bring ``n`` members into a Stable generation; returns their member ids (leader first)."""
        ids: list[str] = []
        boxes: list[Box] = []
        for i in range(n):
            mid, box = self.join_new(group, client_id=f"c{i}", **kw)
            ids.append(mid)
            boxes.append(box)
            if i == 0:
                assert box.done
                res: JoinResult = box.result
                self.sync(group, res.generation_id, mid, {mid: encode_assignment({"t": [0]})})
                await self.settle()
            else:
                # the earlier members learn about the rebalance from their heartbeats and rejoin
                for j, other in enumerate(ids[:-1]):
                    boxes[j] = self.join(group, other, client_id=f"c{j}", **kw)
        g = self.coord.classic_group(group)
        assert g is not None
        results = {mid: b.result for mid, b in zip(ids, boxes)}
        gen = next(iter(results.values())).generation_id
        leader = next(r.leader_id for r in results.values())
        if n > 1:
            assignment = {mid: encode_assignment({"t": [i]}) for i, mid in enumerate(ids)}
            sync_boxes = {
                mid: self.sync(group, gen, mid, assignment if mid == leader else None) for mid in ids
            }
            await self.settle()
            for b in sync_boxes.values():
                assert b.result.error == 0, b.result
        assert g.state.value == "Stable"
        return [leader] + [m for m in ids if m != leader]


class FakeTopics:
    """A TopicLookup for unit tests: topic name -> partition count, with stable ids."""

    def __init__(self, **counts: int) -> None:
        import uuid as _uuid

        self.counts = dict(counts)
        self.ids = {t: _uuid.uuid5(_uuid.NAMESPACE_DNS, t) for t in counts}

    def set(self, topic: str, count: int) -> None:
        import uuid as _uuid

        self.counts[topic] = count
        self.ids.setdefault(topic, _uuid.uuid5(_uuid.NAMESPACE_DNS, topic))

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)

    def topic_id(self, topic: str) -> Any:
        return self.ids.get(topic)

    def topic_name(self, topic_id: Any) -> str | None:
        return next((t for t, i in self.ids.items() if i == topic_id), None)

    def topic_names(self) -> list[str]:
        return sorted(self.counts)

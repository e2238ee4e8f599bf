"""Admin operations for share groups (KIP-932), mixed into ``AsyncAdmin``.

ListGroups with the type filter ``share``, ShareGroupDescribe (77), DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92) and DeleteGroups.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, TypeVar

from moldau.protocol import messages as m

from .errors import Codes, broker_error
from .types import GroupListing, TopicPartition

if TYPE_CHECKING:
    from moldau.protocol.messages._types import ApiMessage, ApiRequest

    from .cluster import Cluster

_Resp = TypeVar("_Resp", bound="ApiMessage")

__all__ = ["ShareGroupAdmin", "ShareGroupDescription", "ShareMemberDescription", "ShareOffset"]

_SHARE_GROUP_DESCRIBE, _DESCRIBE_OFFSETS, _ALTER_OFFSETS, _DELETE_OFFSETS = 77, 90, 91, 92
_RETRY = frozenset({Codes.COORDINATOR_LOAD_IN_PROGRESS, Codes.COORDINATOR_NOT_AVAILABLE,
                    Codes.NOT_COORDINATOR})


@dataclass(slots=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: list[TopicPartition] = field(default_factory=list)
    subscribed_topics: list[str] = field(default_factory=list)
    rack_id: str | None = None


@dataclass(slots=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription]


@dataclass(slots=True)
class ShareOffset:
    """A share-partition's start offset (SPSO; -1: not initialized) and lag (-1: unknown)."""

    start_offset: int
    leader_epoch: int = -1
    lag: int = -1


def _err(code: int, what: str, message: str | None) -> BaseException:
    return broker_error(code, f"{what}: {message}" if message else what)


class ShareGroupAdmin:
    """Share-group operations of ``AsyncAdmin`` (uses its cluster, coordinator lookup and deadlines)."""

    _cluster: Cluster
    _backoff: float

    if TYPE_CHECKING:  # AsyncAdmin's
        def _check(self) -> None: ...

        def _deadline(self, timeout: float | None) -> float: ...

        async def _coordinator(self, group_id: str, deadline: float) -> int: ...

        async def list_consumer_groups(self, states: Iterable[str] | None = None,
                                       types: Iterable[str] | None = None) -> list[GroupListing]: ...

        async def delete_consumer_groups(self, group_ids: Iterable[str], *, timeout: float | None = None,
                                         raise_errors: bool = True) -> dict[str, BaseException | None]: ...

    async def _share_send(self, group_id: str, api_key: int, req: ApiRequest[_Resp], deadline: float,
                          code_of: Callable[[_Resp], int]) -> _Resp:
        while True:
            node = await self._coordinator(group_id, deadline)
            resp = await self._cluster.send(node, api_key, req)
            code = code_of(resp)
            if code in _RETRY and time.monotonic() < deadline:
                await asyncio.sleep(self._backoff)
                continue
            return resp

    async def list_share_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Share groups known to the brokers (ListGroups with the type filter ``share``)."""
        return await self.list_consumer_groups(states=states, types=["share"])

    async def describe_share_groups(self, group_ids: Iterable[str], timeout: float | None = None
                                    ) -> dict[str, ShareGroupDescription]:
        """ShareGroupDescribe: state, epochs, assignor and members with their assignments."""
        self._check()
        deadline = self._deadline(timeout)
        out: dict[str, ShareGroupDescription] = {}
        for gid in group_ids:
            req = m.ShareGroupDescribeRequest.new(group_ids=[gid], include_authorized_operations=False)
            resp = await self._share_send(gid, _SHARE_GROUP_DESCRIBE, req, deadline,
                                          lambda r: r.groups[0].error_code)
            g = resp.groups[0]
            if g.error_code:
                raise _err(g.error_code, f"share group {gid!r}", g.error_message)
            members = [ShareMemberDescription(
                mem.member_id, mem.client_id, mem.client_host, mem.member_epoch,
                sorted(TopicPartition(t.topic_name, p) for t in mem.assignment.topic_partitions
                       for p in t.partitions),
                list(mem.subscribed_topic_names), mem.rack_id) for mem in g.members]
            out[gid] = ShareGroupDescription(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch,
                                             g.assignor_name, members)
        return out

    async def list_share_group_offsets(self, group_id: str, topics: Iterable[str] | None = None,
                                       timeout: float | None = None) -> dict[TopicPartition, ShareOffset]:
        """DescribeShareGroupOffsets: each share-partition's start offset (SPSO) and lag, for all the group's
        topics or those named."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.DescribeShareGroupOffsetsRequest
        req_topics = None
        if topics is not None:
            req_topics = []
            for t in topics:
                parts = self._cluster.partitions_for(t)
                if parts is None:
                    await self._cluster.refresh([t])
                    parts = self._cluster.partitions_for(t) or []
                req_topics.append(R.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=parts))
        req = R.new(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=req_topics)])
        resp = await self._share_send(group_id, _DESCRIBE_OFFSETS, req, deadline,
                                      lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code:
            raise _err(g.error_code, f"share group {group_id!r}", g.error_message)
        out: dict[TopicPartition, ShareOffset] = {}
        for rt in g.topics:
            for p in rt.partitions:
                if p.error_code:
                    raise _err(p.error_code, f"share group {group_id!r} {rt.topic_name}-{p.partition_index}",
                               p.error_message)
                out[TopicPartition(rt.topic_name, p.partition_index)] = ShareOffset(
                    p.start_offset, p.leader_epoch, getattr(p, "lag", -1))
        return out

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *,
                                        timeout: float | None = None, raise_errors: bool = True
                                        ) -> dict[TopicPartition, BaseException | None]:
        """AlterShareGroupOffsets: set share-partitions' start offsets (the group must have no members)."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.AlterShareGroupOffsetsRequest
        by_topic: dict[str, list[m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition]] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                R.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=off))
        req = R.new(group_id=group_id,
                    topics=[R.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                            for t, ps in by_topic.items()])
        resp = await self._share_send(group_id, _ALTER_OFFSETS, req, deadline, lambda r: r.error_code)
        if resp.error_code:
            err = _err(resp.error_code, f"share group {group_id!r}", resp.error_message)
            if raise_errors:
                raise err
            return {tp: err for tp in offsets}
        out: dict[TopicPartition, BaseException | None] = {}
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic_name, p.partition_index)
                out[tp] = (_err(p.error_code, f"{tp.topic}-{tp.partition}", p.error_message)
                           if p.error_code else None)
        if raise_errors:
            for e in out.values():
                if e is not None:
                    raise e
        return out

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str], *,
                                         timeout: float | None = None, raise_errors: bool = True
                                         ) -> dict[str, BaseException | None]:
        """DeleteShareGroupOffsets: forget the group's state for whole topics (the group must be empty)."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.DeleteShareGroupOffsetsRequest
        names = list(topics)
        req = R.new(group_id=group_id,
                    topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in names])
        resp = await self._share_send(group_id, _DELETE_OFFSETS, req, deadline, lambda r: r.error_code)
        if resp.error_code:
            err = _err(resp.error_code, f"share group {group_id!r}", resp.error_message)
            if raise_errors:
                raise err
            return {t: err for t in names}
        out: dict[str, BaseException | None] = {
            t.topic_name: _err(t.error_code, t.topic_name, t.error_message) if t.error_code else None
            for t in resp.responses}
        if raise_errors:
            for e in out.values():
                if e is not None:
                    raise e
        return out

    async def delete_share_groups(self, group_ids: Iterable[str], *, timeout: float | None = None,
                                  raise_errors: bool = True) -> dict[str, BaseException | None]:
        """DeleteGroups for share groups (they must have no members)."""
        return await self.delete_consumer_groups(group_ids, timeout=timeout, raise_errors=raise_errors)

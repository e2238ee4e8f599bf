"""Consumer-group operations of ``AsyncAdmin``: list, describe, delete, and the groups' committed offsets."""

from __future__ import annotations

import asyncio
import time
from typing import Iterable, Mapping

from moldau.protocol import messages as m

from .admin_base import (
    _CONSUMER_GROUP_DESCRIBE,
    _DELETE_GROUPS,
    _DESCRIBE_GROUPS,
    _LIST_GROUPS,
    _OFFSET_COMMIT,
    _OFFSET_DELETE,
    _OFFSET_FETCH,
    _RETRY,
    AdminBase,
    _results,
)
from .assignors import decode_assignment
from .errors import (
    Codes,
    UnsupportedVersionError,
    broker_error,
)
from .types import (
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["ConsumerGroupAdmin"]


class ConsumerGroupAdmin(AdminBase):
    """Consumer-group operations of ``AsyncAdmin`` (ListGroups, DescribeGroups, ConsumerGroupDescribe,
    DeleteGroups, OffsetFetch, OffsetCommit, OffsetDelete)."""

    async def list_consumer_groups(self, states: Iterable[str] | None = None,
                                   types: Iterable[str] | None = None) -> list[GroupListing]:
        """Groups known to every broker (consumer groups and others; ``protocol_type`` tells), optionally only
        those in ``states`` (ListGroups v4+) or of ``types`` ("classic", "consumer"; v5+)."""
        self._check()
        out: dict[str, GroupListing] = {}
        states = list(states or [])
        types = list(types or [])
        for node in list(self._cluster.brokers):
            conn = await self._cluster.connection(node)
            version = conn.api_version(_LIST_GROUPS)
            if types and version < 5:
                raise UnsupportedVersionError(
                    f"broker {node} cannot filter groups by type (ListGroups v{version})"
                )
            req = m.ListGroupsRequest.new(states_filter=states, types_filter=types)
            resp = await conn.send(_LIST_GROUPS, req)
            if resp.error_code:
                raise broker_error(resp.error_code, f"ListGroups on node {node}")
            for g in resp.groups:
                state = getattr(g, "group_state", None) if version >= 4 else None
                gtype = getattr(g, "group_type", None) if version >= 5 else None
                if states and version < 4:
                    pass  # old brokers cannot filter; the caller gets everything
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type, state or None, gtype or None)
        return sorted(out.values(), key=lambda g: g.group_id)

    async def describe_consumer_groups(self, group_ids: Iterable[str],
                                       timeout: float | None = None) -> dict[str, GroupDescription]:
        self._check()
        deadline = self._deadline(timeout)
        out: dict[str, GroupDescription] = {}
        for gid in group_ids:
            while True:
                node = await self._coordinator(gid, deadline)
                conn = await self._cluster.connection(node)
                if conn.supports(_CONSUMER_GROUP_DESCRIBE):
                    # a KIP-848 group is described only by ConsumerGroupDescribe (DescribeGroups says Dead);
                    # a classic group answers GROUP_ID_NOT_FOUND there, then DescribeGroups
                    desc = await self._describe_consumer_protocol_group(node, gid, deadline)
                    if desc is not None:
                        out[gid] = desc
                        break
                resp = await self._cluster.send(node, _DESCRIBE_GROUPS,
                                                m.DescribeGroupsRequest.new(groups=[gid],
                                                                            include_authorized_operations=False))
                g = resp.groups[0]
                if g.error_code in _RETRY and time.monotonic() < deadline:
                    await asyncio.sleep(self._backoff)
                    continue
                if g.error_code:
                    raise broker_error(g.error_code, f"group {gid!r}")
                members = []
                for mem in g.members:
                    try:
                        assignment = (
                            decode_assignment(mem.member_assignment) if g.protocol_type == "consumer" else []
                        )
                    except Exception:  # noqa: BLE001 - not the consumer protocol's encoding
                        assignment = []
                    members.append(MemberDescription(mem.member_id, getattr(mem, "group_instance_id", None),
                                                     mem.client_id, mem.client_host, assignment))
                out[gid] = GroupDescription(
                    g.group_id, g.group_state, g.protocol_type, g.protocol_data, members
                )
                break
        return out

    async def _describe_consumer_protocol_group(
        self, node: int, gid: str, deadline: float
    ) -> GroupDescription | None:
        while True:
            resp = await self._cluster.send(
                node,
                _CONSUMER_GROUP_DESCRIBE,
                m.ConsumerGroupDescribeRequest.new(group_ids=[gid], include_authorized_operations=False),
            )
            g = resp.groups[0]
            if g.error_code == Codes.GROUP_ID_NOT_FOUND:
                return None
            if g.error_code in _RETRY and time.monotonic() < deadline:
                await asyncio.sleep(self._backoff)
                continue
            if g.error_code:
                raise broker_error(g.error_code, f"group {gid!r}: {g.error_message or ''}".rstrip(": "))

            def tps(a: m.ConsumerGroupDescribeResponse.Assignment) -> list[TopicPartition]:
                return sorted(
                    TopicPartition(t.topic_name, p) for t in a.topic_partitions for p in t.partitions
                )

            members = [MemberDescription(mem.member_id, mem.instance_id, mem.client_id, mem.client_host,
                                         tps(mem.assignment), mem.member_epoch, tps(mem.target_assignment))
                       for mem in g.members]
            return GroupDescription(g.group_id, g.group_state, "consumer", g.assignor_name, members,
                                    group_type="consumer", group_epoch=g.group_epoch)

    async def delete_consumer_groups(self, group_ids: Iterable[str], *, timeout: float | None = None,
                                     raise_errors: bool = True) -> dict[str, BaseException | None]:
        self._check()
        deadline = self._deadline(timeout)
        out: dict[str, BaseException | None] = {}
        for gid in group_ids:
            while True:
                node = await self._coordinator(gid, deadline)
                resp = await self._cluster.send(
                    node, _DELETE_GROUPS, m.DeleteGroupsRequest.new(groups_names=[gid])
                )
                code = resp.results[0].error_code
                if code in _RETRY and time.monotonic() < deadline:
                    await asyncio.sleep(self._backoff)
                    continue
                out[gid] = broker_error(code, f"group {gid!r}") if code else None
                break
        return _results(out, raise_errors)

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group (all of them, or of ``partitions``)."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.OffsetFetchRequest
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [R.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        while True:
            node = await self._coordinator(group_id, deadline)
            resp = await self._cluster.send(node, _OFFSET_FETCH, R.new(group_id=group_id, topics=topics,
                                                                         require_stable=False))
            code = getattr(resp, "error_code", 0)
            if code in _RETRY and time.monotonic() < deadline:
                await asyncio.sleep(self._backoff)
                continue
            if code:
                raise broker_error(code, f"group {group_id!r}")
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise broker_error(p.error_code, f"group {group_id!r} {t.name}-{p.partition_index}")
                    if p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1))
            return out

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
        raise_errors: bool = True,
    ) -> dict[TopicPartition, BaseException | None]:
        """Set a group's committed offsets (``{tp: offset | OffsetAndMetadata}``): an OffsetCommit outside the
        group (generation -1, no member id), as Kafka's admin client does, so the group must have no active
        members (else UNKNOWN_MEMBER_ID for each partition)."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.OffsetCommitRequest
        items = {tp: (om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om)))
                 for tp, om in offsets.items()}
        by_topic: dict[str, list[m.OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for tp, om in items.items():
            by_topic.setdefault(tp.topic, []).append(
                R.OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    commit_timestamp=-1,
                    committed_metadata=om.metadata or "",
                )
            )
        req = R.new(group_id=group_id, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    retention_time_ms=-1, topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps)
                                                  for t, ps in by_topic.items()])
        out: dict[TopicPartition, BaseException | None] = {}
        while True:
            node = await self._coordinator(group_id, deadline)
            resp = await self._cluster.send(node, _OFFSET_COMMIT, req)
            codes = {
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in resp.topics
                for p in t.partitions
            }
            if any(c in _RETRY for c in codes.values()) and time.monotonic() < deadline:
                await asyncio.sleep(self._backoff)
                continue
            for tp in items:
                code = codes.get(tp, Codes.UNKNOWN_SERVER_ERROR)
                out[tp] = (
                    broker_error(code, f"group {group_id!r} {tp.topic}-{tp.partition}") if code else None
                )
            return _results(out, raise_errors)

    async def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout: float | None = None,
        raise_errors: bool = True,
    ) -> dict[TopicPartition, BaseException | None]:
        """Delete a group's committed offsets of ``partitions`` (OffsetDelete). An active consumer group keeps
        the offsets of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); a group-level error (unknown
        group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) is raised whatever ``raise_errors`` says."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.OffsetDeleteRequest
        tps = list(dict.fromkeys(partitions))
        by_topic: dict[str, list[m.OffsetDeleteRequest.OffsetDeleteRequestPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                R.OffsetDeleteRequestPartition(partition_index=tp.partition)
            )
        req = R.new(group_id=group_id, topics=[R.OffsetDeleteRequestTopic(name=t, partitions=ps)
                                               for t, ps in by_topic.items()])
        while True:
            node = await self._coordinator(group_id, deadline)
            resp = await self._cluster.send(node, _OFFSET_DELETE, req)
            if resp.error_code in _RETRY and time.monotonic() < deadline:
                await asyncio.sleep(self._backoff)
                continue
            if resp.error_code:
                raise broker_error(resp.error_code, f"OffsetDelete for group {group_id!r}")
            codes = {
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in resp.topics
                for p in t.partitions
            }
            out: dict[TopicPartition, BaseException | None] = {}
            for tp in tps:
                code = codes.get(tp, Codes.UNKNOWN_SERVER_ERROR)
                out[tp] = (
                    broker_error(code, f"group {group_id!r} {tp.topic}-{tp.partition}") if code else None
                )
            return _results(out, raise_errors)

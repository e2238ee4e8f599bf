"""The admin client: topics, partitions, configs, consumer groups, records, offsets, cluster.

Each call raises the broker's error (``KafkaError`` with the code, naming the topic/group) when an item
failed; pass ``raise_errors=False`` to calls that act on several items to get ``{item: exception|None}``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable, Mapping

from moldau.protocol import messages as m

from .assignors import decode_assignment
from .cluster import Cluster
from .config import resolve_config
from .errors import (
    Codes,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    RequestTimedOutError,
    UnsupportedVersionError,
    broker_error,
)
from .share_admin import ShareGroupAdmin
from .types import (
    AlterConfigOp,
    BrokerMetadata,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    GroupDescription,
    GroupListing,
    ListOffsetsResult,
    MemberDescription,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    TopicDescription,
    TopicPartition,
)

log = logging.getLogger(__name__)

__all__ = ["AsyncAdmin"]

_LIST_OFFSETS, _METADATA, _OFFSET_COMMIT, _OFFSET_FETCH = 2, 3, 8, 9
_DESCRIBE_GROUPS, _LIST_GROUPS, _CREATE_TOPICS, _DELETE_TOPICS = 15, 16, 19, 20
_DELETE_RECORDS, _DESCRIBE_CONFIGS, _CREATE_PARTITIONS, _DELETE_GROUPS = 21, 32, 37, 42
_ALTER_REASSIGNMENTS, _LIST_REASSIGNMENTS = 45, 46
_INCREMENTAL_ALTER_CONFIGS, _OFFSET_DELETE, _DESCRIBE_CLUSTER, _CONSUMER_GROUP_DESCRIBE = 44, 47, 60, 69
_NOT_CONTROLLER = 41
_RETRY = frozenset(
    {
        Codes.NOT_COORDINATOR,
        Codes.COORDINATOR_NOT_AVAILABLE,
        Codes.COORDINATOR_LOAD_IN_PROGRESS,
        _NOT_CONTROLLER,
        Codes.REQUEST_TIMED_OUT,
        Codes.LEADER_NOT_AVAILABLE,
        Codes.NOT_LEADER_OR_FOLLOWER,
    }
)

_SPEC = {"earliest": -2, "latest": -1, "max_timestamp": -3}


def _results(results: dict[Any, BaseException | None], raise_errors: bool) -> dict[Any, BaseException | None]:
    if raise_errors:
        for exc in results.values():
            if exc is not None:
                raise exc
    return results


class AsyncAdmin(ShareGroupAdmin):
    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = resolve_config("admin", config, kwargs)
        self._cluster = Cluster(self.config, allow_auto_topic_creation=False)
        self._timeout_ms = self.config["default.api.timeout.ms"]
        self._backoff = self.config["retry.backoff.ms"] / 1000.0
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self._cluster.start()
            self._started = True

    async def close(self) -> None:
        if self._started:
            self._started = False
            await self._cluster.close()

    async def __aenter__(self) -> "AsyncAdmin":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _check(self) -> None:
        if not self._started:
            raise IllegalStateError("admin client not started")

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (timeout if timeout is not None else self._timeout_ms / 1000.0)

    async def _controller_send(self, api_key: int, req: Any) -> Any:
        node = self._cluster.controller_id
        if node < 0 or node not in self._cluster.brokers:
            return await self._cluster.send_any(api_key, req)
        try:
            return await self._cluster.send(node, api_key, req)
        except KafkaConnectionError:
            return await self._cluster.send_any(api_key, req)

    async def _retrying(self, fn: Any, deadline: float) -> Any:
        """Run ``fn()`` (returns (result, retry_reason|None)) until no retry is asked or the deadline."""
        while True:
            try:
                result, retry = await fn()
            except (KafkaConnectionError, RequestTimedOutError) as exc:
                result, retry = None, str(exc)
            if retry is None:
                return result
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"admin call did not complete in time ({retry})")
            await self._cluster.refresh(timeout_ms=max(int((deadline - time.monotonic()) * 1000), 1))
            await asyncio.sleep(self._backoff)

    # ------------------------------------------------------------------------------------------------
    # topics

    async def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        timeout: float | None = None,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[str, BaseException | None]:
        self._check()
        R = m.CreateTopicsRequest
        items = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        pending = {t.name: t for t in items}
        out: dict[str, BaseException | None] = {}
        deadline = self._deadline(timeout)
        tmo = int(max(deadline - time.monotonic(), 0.001) * 1000)

        async def once() -> tuple[None, str | None]:
            req = R.new(topics=[R.CreatableTopic(
                name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                assignments=[R.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                             for p, b in sorted((t.replica_assignment or {}).items())],
                configs=[R.CreatableTopicConfig(name=k, value=None if v is None else str(v))
                         for k, v in (t.config or {}).items()],
            ) for t in pending.values()], timeout_ms=tmo, validate_only=validate_only)
            resp = await self._controller_send(_CREATE_TOPICS, req)
            retry = None
            for r in resp.topics:
                if r.error_code in (_NOT_CONTROLLER,):
                    retry = "NOT_CONTROLLER"
                    continue
                out[r.name] = (
                    broker_error(r.error_code, f"topic {r.name!r}: {r.error_message or ''}".rstrip(": "))
                    if r.error_code
                    else None
                )
                pending.pop(r.name, None)
            return None, retry

        await self._retrying(once, deadline)
        if not validate_only:
            created = [n for n, e in out.items() if e is None]
            if created:
                await self._wait_topics(created, deadline)
        return _results(out, raise_errors)

    async def _wait_topics(self, names: list[str], deadline: float) -> None:
        """Wait until new topics show up in metadata with leaders (creation is asynchronous in Kafka)."""
        self._cluster.add_topics(names)
        while time.monotonic() < deadline:
            await self._cluster.refresh(timeout_ms=max(int((deadline - time.monotonic()) * 1000), 1))
            if all(self._cluster.num_partitions(n) and len(self._cluster.available_partitions(n)) ==
                   self._cluster.num_partitions(n) for n in names):
                return
            await asyncio.sleep(self._backoff)

    async def delete_topics(self, names: Iterable[str], *, timeout: float | None = None,
                            raise_errors: bool = True) -> dict[str, BaseException | None]:
        self._check()
        names = list(names)
        out: dict[str, BaseException | None] = {}
        deadline = self._deadline(timeout)
        R = m.DeleteTopicsRequest

        async def once() -> tuple[None, str | None]:
            todo = [n for n in names if n not in out]
            req = R.new(topic_names=todo, timeout_ms=int(max(deadline - time.monotonic(), 0.001) * 1000))
            resp = await self._controller_send(_DELETE_TOPICS, req)
            retry = None
            for r in resp.responses:
                if r.error_code == _NOT_CONTROLLER:
                    retry = "NOT_CONTROLLER"
                    continue
                out[r.name] = broker_error(r.error_code, f"topic {r.name!r}") if r.error_code else None
            return None, retry

        await self._retrying(once, deadline)
        self._cluster.set_topics(set(self._cluster._wanted) - set(names))
        return _results(out, raise_errors)

    async def _metadata(self, topics: list[str] | None) -> Any:
        conn = await self._cluster.any_connection()
        return await conn.send(
            _METADATA,
            m.MetadataRequest.new(
                topics=None
                if topics is None
                else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )

    async def list_topics(self, include_internal: bool = False) -> dict[str, int]:
        """{topic: number of partitions}."""
        self._check()
        resp = await self._metadata(None)
        return {t.name: len(t.partitions) for t in resp.topics
                if t.error_code == 0 and (include_internal or not t.is_internal)}

    async def describe_topics(self, names: Iterable[str]) -> dict[str, TopicDescription]:
        self._check()
        from .types import PartitionMetadata

        names = list(names)
        resp = await self._metadata(names)
        out: dict[str, TopicDescription] = {}
        for t in resp.topics:
            if t.error_code:
                raise broker_error(t.error_code, f"topic {t.name!r}")
            parts = [PartitionMetadata(t.name, p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                                       list(p.replica_nodes), list(p.isr_nodes),
                                       list(getattr(p, "offline_replicas", []) or []), p.error_code)
                     for p in sorted(t.partitions, key=lambda p: p.partition_index)]
            out[t.name] = TopicDescription(t.name, getattr(t, "topic_id", None), bool(t.is_internal), parts)
        return out

    async def create_partitions(
        self,
        new: Mapping[str, NewPartitions | int],
        *,
        timeout: float | None = None,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[str, BaseException | None]:
        self._check()
        R = m.CreatePartitionsRequest
        items = {k: (v if isinstance(v, NewPartitions) else NewPartitions(int(v))) for k, v in new.items()}
        out: dict[str, BaseException | None] = {}
        deadline = self._deadline(timeout)

        async def once() -> tuple[None, str | None]:
            req = R.new(topics=[R.CreatePartitionsTopic(
                name=name, count=np.total_count,
                assignments=None if np.new_assignments is None else
                [R.CreatePartitionsAssignment(broker_ids=list(b)) for b in np.new_assignments])
                for name, np in items.items() if name not in out],
                timeout_ms=int(max(deadline - time.monotonic(), 0.001) * 1000), validate_only=validate_only)
            resp = await self._controller_send(_CREATE_PARTITIONS, req)
            retry = None
            for r in resp.results:
                if r.error_code == _NOT_CONTROLLER:
                    retry = "NOT_CONTROLLER"
                    continue
                out[r.name] = (
                    broker_error(r.error_code, f"topic {r.name!r}: {r.error_message or ''}".rstrip(": "))
                    if r.error_code
                    else None
                )
            return None, retry

        await self._retrying(once, deadline)
        return _results(out, raise_errors)

    async def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartition, list[int] | None],
        *,
        timeout: float | None = None,
        raise_errors: bool = True,
    ) -> dict[TopicPartition, BaseException | None]:
        """AlterPartitionReassignments (45): the target replica list per partition (None cancels an ongoing
        reassignment). Returns when the controller accepted it; the data moves in the background
        (``list_partition_reassignments`` shows what is still moving)."""
        self._check()
        R = m.AlterPartitionReassignmentsRequest
        pending = {TopicPartition(tp.topic, tp.partition): v for tp, v in targets.items()}
        out: dict[TopicPartition, BaseException | None] = {}
        deadline = self._deadline(timeout)

        async def once() -> tuple[None, str | None]:
            by_topic: dict[str, list[Any]] = {}
            for tp, replicas in pending.items():
                by_topic.setdefault(tp.topic, []).append(R.ReassignablePartition(
                    partition_index=tp.partition, replicas=None if replicas is None else list(replicas)))
            req = R.new(timeout_ms=int(max(deadline - time.monotonic(), 0.001) * 1000),
                        allow_replication_factor_change=True,
                        topics=[R.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
            resp = await self._controller_send(_ALTER_REASSIGNMENTS, req)
            if resp.error_code == _NOT_CONTROLLER:
                return None, "NOT_CONTROLLER"
            if resp.error_code:
                err = broker_error(resp.error_code, resp.error_message or "")
                for tp in list(pending):
                    out[tp] = err
                    pending.pop(tp)
                return None, None
            retry = None
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == _NOT_CONTROLLER:
                        retry = "NOT_CONTROLLER"
                        continue
                    what = f"{tp.topic}-{tp.partition}: {p.error_message or ''}".rstrip(": ")
                    out[tp] = broker_error(p.error_code, what) if p.error_code else None
                    pending.pop(tp, None)
            return None, retry

        await self._retrying(once, deadline)
        return _results(out, raise_errors)

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, dict[str, list[int]]]:
        """ListPartitionReassignments (46): the ongoing reassignments,
        {partition: {"replicas": [...], "adding": [...], "removing": [...]}}."""
        self._check()
        R = m.ListPartitionReassignmentsRequest
        topics: dict[str, list[int]] | None = None
        if partitions is not None:
            topics = {}
            for tp in partitions:
                topics.setdefault(tp.topic, []).append(tp.partition)
        deadline = self._deadline(timeout)

        async def once() -> tuple[dict[TopicPartition, dict[str, list[int]]] | None, str | None]:
            req = R.new(timeout_ms=int(max(deadline - time.monotonic(), 0.001) * 1000),
                        topics=None if topics is None else [
                            R.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                            for t, ps in topics.items()])
            resp = await self._controller_send(_LIST_REASSIGNMENTS, req)
            if resp.error_code == _NOT_CONTROLLER:
                return None, "NOT_CONTROLLER"
            if resp.error_code:
                raise broker_error(resp.error_code, resp.error_message or "")
            return {TopicPartition(t.name, p.partition_index): {
                "replicas": list(p.replicas), "adding": list(p.adding_replicas),
                "removing": list(p.removing_replicas)} for t in resp.topics for p in t.partitions}, None

        result: dict[TopicPartition, dict[str, list[int]]] = await self._retrying(once, deadline)
        return result

    # ------------------------------------------------------------------------------------------------
    # configs

    def _config_node(self, res: ConfigResource) -> int | None:
        if res.resource_type in (ConfigResource.BROKER, ConfigResource.BROKER_LOGGER) and res.name:
            try:
                return int(res.name)
            except ValueError:
                return None
        return None

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        self._check()
        R = m.DescribeConfigsRequest
        by_node: dict[int | None, list[ConfigResource]] = {}
        for res in resources:
            by_node.setdefault(self._config_node(res), []).append(res)
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        for node, items in by_node.items():
            req = R.new(
                resources=[
                    R.DescribeConfigsResource(
                        resource_type=r.resource_type, resource_name=r.name, configuration_keys=None
                    )
                    for r in items
                ],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            resp = await (self._cluster.send(node, _DESCRIBE_CONFIGS, req) if node is not None
                          else self._cluster.send_any(_DESCRIBE_CONFIGS, req))
            for r in resp.results:
                res = ConfigResource(r.resource_type, r.resource_name)
                if r.error_code:
                    raise broker_error(r.error_code, f"{res}: {r.error_message or ''}")
                entries: dict[str, ConfigEntry] = {}
                for c in r.configs:
                    source = getattr(c, "config_source", -1)
                    is_default = bool(getattr(c, "is_default", False)) or source == 5
                    entries[c.name] = ConfigEntry(
                        c.name, c.value, source, is_default, bool(c.read_only), bool(c.is_sensitive),
                        [(s.name, s.value, s.source) for s in (getattr(c, "synonyms", None) or [])],
                        getattr(c, "config_type", 0), getattr(c, "documentation", None))
                out[res] = entries
        return out

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[ConfigResource, BaseException | None]:
        self._check()
        R = m.IncrementalAlterConfigsRequest
        by_node: dict[int | None, list[ConfigResource]] = {}
        for res in changes:
            by_node.setdefault(self._config_node(res), []).append(res)
        out: dict[ConfigResource, BaseException | None] = {}
        for node, items in by_node.items():
            req = R.new(resources=[R.AlterConfigsResource(
                resource_type=res.resource_type, resource_name=res.name,
                configs=[R.AlterableConfig(name=op.name, config_operation=op.op,
                                           value=None if op.value is None else str(op.value))
                         for op in changes[res]]) for res in items], validate_only=validate_only)
            resp = await (self._cluster.send(node, _INCREMENTAL_ALTER_CONFIGS, req) if node is not None
                          else self._cluster.send_any(_INCREMENTAL_ALTER_CONFIGS, req))
            for r in resp.responses:
                res = ConfigResource(r.resource_type, r.resource_name)
                out[res] = (
                    broker_error(r.error_code, f"{res}: {r.error_message or ''}") if r.error_code else None
                )
        return _results(out, raise_errors)

    # ------------------------------------------------------------------------------------------------
    # groups

    async def _coordinator(self, group_id: str, deadline: float) -> int:
        while True:
            code, node = await self._cluster.find_coordinator(group_id)
            if code == 0:
                return node
            if code not in _RETRY or time.monotonic() >= deadline:
                raise broker_error(code, f"FindCoordinator for group {group_id!r}")
            await asyncio.sleep(self._backoff)

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

            def tps(a: Any) -> list[TopicPartition]:
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
        by_topic: dict[str, list[Any]] = {}
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
        by_topic: dict[str, list[Any]] = {}
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

    # ------------------------------------------------------------------------------------------------
    # records and offsets

    async def _by_leader(
        self, tps: Iterable[TopicPartition], deadline: float
    ) -> dict[int, list[TopicPartition]]:
        tps = list(tps)
        topics = {tp.topic for tp in tps}
        for t in topics:
            await self._cluster.wait_for_topic(t, max(int((deadline - time.monotonic()) * 1000), 1))
        out: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            node = self._cluster.leader(tp.topic, tp.partition)
            if node < 0:
                raise broker_error(Codes.LEADER_NOT_AVAILABLE, f"{tp.topic}-{tp.partition}")
            out.setdefault(node, []).append(tp)
        return out

    async def delete_records(self, before: Mapping[TopicPartition, int], *,
                             timeout: float | None = None) -> dict[TopicPartition, int]:
        """Delete records before the given offsets (-1: the high watermark); returns the new low
        watermarks."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.DeleteRecordsRequest
        out: dict[TopicPartition, int] = {}
        for node, tps in (await self._by_leader(before, deadline)).items():
            by_topic: dict[str, list[Any]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(
                    R.DeleteRecordsPartition(partition_index=tp.partition, offset=before[tp])
                )
            req = R.new(topics=[R.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                        timeout_ms=int(max(deadline - time.monotonic(), 0.001) * 1000))
            resp = await self._cluster.send(node, _DELETE_RECORDS, req)
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise broker_error(p.error_code, f"DeleteRecords {t.name}-{p.partition_index}")
                    out[TopicPartition(t.name, p.partition_index)] = p.low_watermark
        return out

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, str | int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout: float | None = None,
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """Offsets per partition: 'earliest', 'latest', 'max_timestamp' or a timestamp in ms."""
        self._check()
        deadline = self._deadline(timeout)
        R = m.ListOffsetsRequest
        out: dict[TopicPartition, ListOffsetsResult] = {}
        iso = 1 if isolation_level == "read_committed" else 0
        for node, tps in (await self._by_leader(specs, deadline)).items():
            by_topic: dict[str, list[Any]] = {}
            for tp in tps:
                spec = specs[tp]
                ts = _SPEC[spec] if isinstance(spec, str) else int(spec)
                by_topic.setdefault(tp.topic, []).append(R.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1))
            req = R.new(replica_id=-1, isolation_level=iso,
                        topics=[R.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                        timeout_ms=int(max(deadline - time.monotonic(), 0.001) * 1000))
            resp = await self._cluster.send(node, _LIST_OFFSETS, req)
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise broker_error(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                    out[TopicPartition(t.name, p.partition_index)] = ListOffsetsResult(p.offset, p.timestamp,
                                                                                       p.leader_epoch)
        return out

    # ------------------------------------------------------------------------------------------------
    # cluster

    async def describe_cluster(self) -> ClusterDescription:
        self._check()
        conn = await self._cluster.any_connection()
        if conn.supports(_DESCRIBE_CLUSTER):
            resp = await conn.send(_DESCRIBE_CLUSTER, m.DescribeClusterRequest.new(
                include_cluster_authorized_operations=False))
            if resp.error_code:
                raise broker_error(resp.error_code, resp.error_message)
            return ClusterDescription(
                resp.cluster_id,
                resp.controller_id,
                [BrokerMetadata(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers],
            )
        resp = await self._metadata([])
        return ClusterDescription(resp.cluster_id, resp.controller_id,
                                  [BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in resp.brokers])

"""The admin client: topics, partitions, configs, consumer groups, records, offsets, cluster.

Each call raises the broker's error (``KafkaError`` with the code, naming the topic/group) when an item
failed; pass ``raise_errors=False`` to calls that act on several items to get ``{item: exception|None}``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterable, Mapping

from moldau.protocol import messages as m

from .admin_base import (
    _ALTER_REASSIGNMENTS,
    _CREATE_PARTITIONS,
    _CREATE_TOPICS,
    _DELETE_RECORDS,
    _DELETE_TOPICS,
    _DESCRIBE_CLUSTER,
    _DESCRIBE_CONFIGS,
    _INCREMENTAL_ALTER_CONFIGS,
    _LIST_OFFSETS,
    _LIST_REASSIGNMENTS,
    _METADATA,
    _NOT_CONTROLLER,
    _SPEC,
    _results,
)
from .errors import Codes, broker_error
from .group_admin import ConsumerGroupAdmin
from .share_admin import ShareGroupAdmin
from .types import (
    AlterConfigOp,
    BrokerMetadata,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ListOffsetsResult,
    NewPartitions,
    NewTopic,
    TopicDescription,
    TopicPartition,
)

log = logging.getLogger(__name__)

__all__ = ["AsyncAdmin"]


class AsyncAdmin(ConsumerGroupAdmin, ShareGroupAdmin):
    """The admin client: topics, partitions, configs, records, offsets and the cluster here; consumer groups
    from ``ConsumerGroupAdmin``, share groups from ``ShareGroupAdmin``; all on ``AdminBase``."""

    async def __aenter__(self) -> "AsyncAdmin":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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
                name = r.name or ""  # deleted by name: the broker echoes it
                out[name] = broker_error(r.error_code, f"topic {name!r}") if r.error_code else None
            return None, retry

        await self._retrying(once, deadline)
        self._cluster.set_topics(set(self._cluster._wanted) - set(names))
        return _results(out, raise_errors)

    async def _metadata(self, topics: list[str] | None) -> m.MetadataResponse:
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
        return {t.name or "": len(t.partitions) for t in resp.topics
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
            name = t.name or ""  # asked by name: the broker echoes it
            parts = [PartitionMetadata(name, p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                                       list(p.replica_nodes), list(p.isr_nodes),
                                       list(getattr(p, "offline_replicas", []) or []), p.error_code)
                     for p in sorted(t.partitions, key=lambda p: p.partition_index)]
            out[name] = TopicDescription(name, getattr(t, "topic_id", None), bool(t.is_internal), parts)
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
            by_topic: dict[str, list[m.AlterPartitionReassignmentsRequest.ReassignablePartition]] = {}
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

        async def once() -> tuple[dict[TopicPartition, dict[str, list[int]]], str | None]:
            req = R.new(timeout_ms=int(max(deadline - time.monotonic(), 0.001) * 1000),
                        topics=None if topics is None else [
                            R.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                            for t, ps in topics.items()])
            resp = await self._controller_send(_LIST_REASSIGNMENTS, req)
            if resp.error_code == _NOT_CONTROLLER:
                return {}, "NOT_CONTROLLER"
            if resp.error_code:
                raise broker_error(resp.error_code, resp.error_message or "")
            return {TopicPartition(t.name, p.partition_index): {
                "replicas": list(p.replicas), "adding": list(p.adding_replicas),
                "removing": list(p.removing_replicas)} for t in resp.topics for p in t.partitions}, None

        return await self._retrying(once, deadline)

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
            by_topic: dict[str, list[m.DeleteRecordsRequest.DeleteRecordsPartition]] = {}
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
            by_topic: dict[str, list[m.ListOffsetsRequest.ListOffsetsPartition]] = {}
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
        md = await self._metadata([])
        return ClusterDescription(md.cluster_id, md.controller_id,
                                  [BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in md.brokers])

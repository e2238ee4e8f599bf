"""Metadata (key 3), v0-13.

* Brokers: every live broker (the metadata store's view; this node alone without a cluster), with the
  host/port advertised for the listener the client connected on (rack from ``broker.rack``, v1+).
* cluster_id (v2+), controller_id (v1+): the active controller (this node without a cluster).
* Topics: v0 an empty list means all topics; v1+ null means all topics and an empty list none. v12+ may name
  topics by id (name null): unknown id -> UNKNOWN_TOPIC_ID, a known one answered with its name. v10-11
  declare the ids but a null name or a topic id there is Kafka's INVALID_REQUEST for every requested topic
  (KafkaApis.handleTopicMetadataRequest; the response's name is not nullable before v12).
* Unknown topic: auto-created with ``num.partitions`` / ``default.replication.factor`` when
  ``auto.create.topics.enable`` and the request allows it (``allow_auto_topic_creation``, v4+; always before
  v4); a freshly created topic is answered at once with its partitions (one node: the leader is known), no
  LEADER_NOT_AVAILABLE round trip. Otherwise UNKNOWN_TOPIC_OR_PARTITION; bad names INVALID_TOPIC_EXCEPTION.
  In a cluster, a topic another broker auto-created meanwhile that this broker does not know yet is answered
  LEADER_NOT_AVAILABLE, as Kafka answers its TopicExistsException.
* Partitions: in a cluster the controller's view (leader, leader_epoch v7+, replicas, ISR, offline replicas
  v5+; LEADER_NOT_AVAILABLE while a partition has no leader); on one node leader = this node, replicas = isr
  = [node].
* topic_authorized_operations (v8+) / cluster_authorized_operations (v8-10): -2147483648 unless requested;
  when requested, the operations the principal may do (every operation the type supports without an
  authorizer, as Kafka).
* ACLs (moldau.broker.security.authorizer): topics the principal may not Describe are left out of "all
  topics" and answered TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs Create on the cluster or the
  topic (TOPIC_AUTHORIZATION_FAILED otherwise).
* v13: top-level error_code 0.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.log.checkpoint import deferred_writes
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError, error_code_of
from moldau.protocol.primitives import ZERO_UUID

from ..context import RequestContext
from ..metadata import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, is_valid_topic_name
from ..registry import handler
from ..security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE, TOPIC, allowed, allowed_create_topic
from ..security.authorizer import authorized_operations as _authorized_ops

log = logging.getLogger(__name__)

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def broker_entries(ctx: RequestContext, msg: Any) -> list[Any]:
    """Every live broker with its endpoint on the listener the request came in on (the metadata store's
    cluster view: this node alone without a cluster)."""
    return [msg.MetadataResponseBroker(node_id=nid, host=host, port=port, rack=rack)
            for nid, host, port, rack in ctx.services.metadata.live_brokers(ctx.connection.listener_name)]


def _auto_create(ctx: RequestContext, name: str) -> Any:
    svc = ctx.services
    cfg = svc.config
    if name == OFFSETS_TOPIC:
        return svc.metadata.create_topic(name, int(cfg.get("offsets.topic.num.partitions")),
                                            int(cfg.get("offsets.topic.replication.factor")),
                                            {"cleanup.policy": "compact", "compression.type": "producer",
                                             "segment.bytes": str(cfg.get("offsets.topic.segment.bytes"))})
    if name == TRANSACTION_STATE_TOPIC:
        configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                   "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes")),
                   "min.insync.replicas": str(cfg.get("transaction.state.log.min.isr"))}
        return svc.metadata.create_topic(name, int(cfg.get("transaction.state.log.num.partitions")),
                                         int(cfg.get("transaction.state.log.replication.factor")), configs)
    return svc.metadata.create_topic(name, -1, -1, {})


def partition_fields(ctx: RequestContext, topic: Any, i: int) -> dict[str, Any]:
    """One partition as Metadata / DescribeTopicPartitions answer it (field name -> value): in a cluster the
    controller's view (UpdateMetadata), on one node this broker's replica."""
    svc = ctx.services
    store = svc.metadata
    view = store.partition_state(topic.name, i)
    if view is not None:  # a cluster: the controller's view (UpdateMetadata)
        return dict(error_code=ErrorCode.LEADER_NOT_AVAILABLE if view.leader < 0 else ErrorCode.NONE,
                    partition_index=i, leader_id=view.leader, leader_epoch=view.leader_epoch,
                    replica_nodes=list(view.replicas), isr_nodes=list(view.isr),
                    offline_replicas=list(view.offline))
    p = svc.replica_manager.get_partition(topic.name, i)
    if p is None:
        replicas = store.replicas_of(topic.name, i) or [svc.node_id]
        return dict(error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=i, leader_id=-1,
                    leader_epoch=-1, replica_nodes=replicas, isr_nodes=[], offline_replicas=[])
    return dict(error_code=ErrorCode.NONE, partition_index=i, leader_id=p.leader_id,
                leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
                offline_replicas=[])


def topic_entry(ctx: RequestContext, msg: Any, topic: Any, include_ops: bool) -> Any:
    parts = [msg.MetadataResponsePartition(**partition_fields(ctx, topic, i))
             for i in range(topic.num_partitions)]
    return msg.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        partitions=parts,
        topic_authorized_operations=(topic_operations(ctx, topic.name) if include_ops
                                     else AUTHORIZED_OPERATIONS_OMITTED))


def topic_operations(ctx: RequestContext, name: str) -> int:
    """The TOPIC operations the principal may do on ``name`` (every one without an authorizer)."""
    return _ops(ctx, TOPIC, name, TOPIC_OPERATIONS)


def _ops(ctx: RequestContext, resource_type: int, name: str, everything: int) -> int:
    return everything if ctx.services.authorizer is None else _authorized_ops(ctx, resource_type, name)


def _denied(ctx: RequestContext, msg: Any, name: str | None, topic_id: Any = None) -> Any:
    return msg.MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                     is_internal=False,
                                     partitions=[], topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                                     **({"topic_id": topic_id} if topic_id is not None else {}))


@handler(api_key=3, min_version=0, max_version=13)
async def metadata(ctx: RequestContext, req: m.MetadataRequest) -> m.MetadataResponse:
    svc = ctx.services
    msg = m.MetadataResponse
    v = ctx.version
    include_topic_ops = bool(v >= 8 and req.include_topic_authorized_operations)
    include_cluster_ops = bool(8 <= v <= 10 and req.include_cluster_authorized_operations)
    store = svc.metadata
    topics_out: list[Any] = []

    requested = req.topics
    if requested and v < 12 and any(rt.name is None or rt.topic_id != ZERO_UUID for rt in requested):
        # v10-11 declare topic ids but Kafka serves them from v12 only (the response's name is not nullable
        # before v12): Kafka's InvalidRequestException, answered by MetadataRequest.getErrorResponse
        return msg.new(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
            msg.MetadataResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=rt.name or "",
                                      topic_id=rt.topic_id, is_internal=False, partitions=[],
                                      topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
            for rt in requested], cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, error_code=0)
    if requested is None or (v == 0 and not requested):
        for info in sorted(store.topics.values(), key=lambda t: t.name):
            if allowed(ctx, DESCRIBE, TOPIC, info.name):  # hidden when not describable
                topics_out.append(topic_entry(ctx, msg, info, include_topic_ops))
    else:
        allow_auto = bool(svc.config.get("auto.create.topics.enable")) and (
            v < 4 or bool(req.allow_auto_topic_creation))
        seen: set[Any] = set()
        for rt in requested:
            name = rt.name
            if name is None:  # v12+ (refused above before)
                tid = rt.topic_id
                if tid in seen:
                    continue
                seen.add(tid)
                t = store.get_by_id(tid)
                if t is None:
                    topics_out.append(msg.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=tid, is_internal=False,
                        partitions=[],
                        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
                elif not allowed(ctx, DESCRIBE, TOPIC, t.name):
                    topics_out.append(_denied(ctx, msg, None, tid))
                else:
                    topics_out.append(topic_entry(ctx, msg, t, include_topic_ops))
                continue
            assert name is not None
            if name in seen:
                continue
            seen.add(name)
            if not allowed(ctx, DESCRIBE, TOPIC, name):
                topics_out.append(_denied(ctx, msg, name))
                continue
            t = store.get(name)
            if t is None:
                error: int = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if allow_auto and not allowed_create_topic(ctx, name):
                    error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif allow_auto:
                    try:
                        with deferred_writes() as batch:  # fsynced in the writer thread, not on the loop
                            t = _auto_create(ctx, name)
                        await batch.flush()
                    except KafkaError as e:
                        error = error_code_of(e)
                        if error == ErrorCode.TOPIC_ALREADY_EXISTS:  # created concurrently
                            t = store.get(name)
                            if t is None:
                                # by another broker of a cluster, and not yet in this broker's view: as
                                # Kafka, LEADER_NOT_AVAILABLE (the client asks again), not the create's error
                                error = ErrorCode.LEADER_NOT_AVAILABLE
                elif not is_valid_topic_name(name):
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                if t is None:
                    topics_out.append(msg.MetadataResponseTopic(
                        error_code=error, name=name, is_internal=False, partitions=[],
                        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
                    continue
            topics_out.append(topic_entry(ctx, msg, t, include_topic_ops))

    return msg.new(
        throttle_time_ms=0,
        brokers=broker_entries(ctx, msg),
        cluster_id=svc.cluster_id,
        controller_id=svc.metadata.controller_id(),
        topics=topics_out,
        cluster_authorized_operations=(_ops(ctx, CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
                                       if include_cluster_ops
                                       else AUTHORIZED_OPERATIONS_OMITTED),
        error_code=0,
    )

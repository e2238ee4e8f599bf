"""CreateTopics (key 19), v0-7 (Kafka 4.1: 2-7; moldau keeps v0-1 for old clients).

* v1+: validate_only; error messages.  v4: num_partitions / replication_factor -1 = broker defaults
  (accepted in every version here).  v5+: the response carries num_partitions, replication_factor and the
  topic's configs (name, value, read_only, config_source, is_sensitive).  v7+: topic_id.
* Replica assignments may name only this broker's node id (INVALID_REPLICA_ASSIGNMENT otherwise); when
  assignments are given, num_partitions and replication_factor must be -1 (INVALID_REQUEST).
* Topic configs are validated by moldau.broker.topic_config (INVALID_CONFIG with a message naming the key).
* A name given twice in one request: INVALID_REQUEST "Duplicate topic name." for it, as Kafka.
* In a cluster the answer waits (at most timeout_ms) until this broker's metadata has a leader for every new
  partition, as Kafka's DelayedCreatePartitions; a topic still without one gets REQUEST_TIMED_OUT (it exists).
  On one node a large topic's partitions are created in the background (replica_manager) and the answer
  waits for them the same way.
* Bounds (moldau.broker.limits), checked before anything is created: more than 10,000 partitions in the
  request refuses every topic with POLICY_VIOLATION "Excessively large number of partitions per request."
  (Kafka's MAX_PARTITIONS_PER_BATCH); a topic over ``max.topic.partitions`` or a broker over
  ``max.broker.partitions`` refuses that topic with POLICY_VIOLATION.
* ``controller_mutation_rate`` (KIP-599): each topic's partitions are charged after its validation; v6+
  strict (THROTTLING_QUOTA_EXCEEDED for the topics met while the quota is exhausted), older versions
  permissive; the response's throttle_time_ms and a muted connection carry the throttle.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from moldau.log.checkpoint import deferred_writes
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError

from .. import topic_config as tc
from ..context import RequestContext
from ..limits import PartitionCeilings, check_partitions_per_request, requested_partitions
from ..quotas import ControllerMutationQuota, mutation_throttle, request_mutation_quota
from ..registry import handler
from ..security.authorizer import allowed_create_topic
from ._common import attempt, split_duplicates, wait_for_leaders
from ._common import err as _err

log = logging.getLogger(__name__)

REQ = m.CreateTopicsRequest
RESP = m.CreateTopicsResponse
ZERO_UUID = uuid.UUID(int=0)


def _live_broker_ids(ctx: RequestContext) -> set[int]:
    """The registered brokers (the metadata store's view: this node alone without a cluster)."""
    live = ctx.services.metadata.live_brokers(ctx.connection.listener_name)
    return {b[0] for b in live} or {ctx.services.node_id}


def _broker_count(ctx: RequestContext) -> int:
    return len(_live_broker_ids(ctx))


def _check_assignments(ctx: RequestContext, topic: Any) -> tuple[int, int]:
    """Validate manual replica assignments; return (num_partitions, replication_factor) they imply."""
    if topic.replication_factor != -1:
        raise _err(ErrorCode.INVALID_REQUEST,
                   "A manual partition assignment was specified, but replication factor was not set to -1.")
    if topic.num_partitions != -1:
        raise _err(ErrorCode.INVALID_REQUEST,
                   "A manual partition assignment was specified, but numPartitions was not set to -1.")
    live = _live_broker_ids(ctx)
    rf: int | None = None
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                   "Partitions should be a consecutive 0-based integer sequence.")
    for a in sorted(topic.assignments, key=lambda a: a.partition_index):
        brokers = list(a.broker_ids or [])
        if not brokers:
            raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes an empty replica list.")
        seen: set[int] = set()
        for b in brokers:
            if b in seen:
                raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes the broker {b} more than once.")
            seen.add(b)
            if b not in live:
                raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes broker {b}, but no such broker is "
                           "registered.")
        if rf is None:
            rf = len(brokers)
        elif rf != len(brokers):
            raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"The manual partition assignment includes a partition with {len(brokers)} "
                       f"replica(s), but this is not consistent with previous partitions, which have {rf} "
                       "replica(s).")
    return len(indexes), rf or 1


def _configs_of(topic: Any) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for c in topic.configs or []:
        out[c.name] = c.value
    return out


def _create_one(ctx: RequestContext, topic: Any, validate_only: bool, ceilings: PartitionCeilings,
                quota: ControllerMutationQuota) -> Any:
    from ..metadata import validate_topic_name

    md = ctx.services.metadata
    name = topic.name
    if not allowed_create_topic(ctx, name):  # Create on the cluster or the topic
        raise _err(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    validate_topic_name(name)
    if name in md.topics:
        raise _err(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    num_partitions, replication_factor = topic.num_partitions, topic.replication_factor
    if topic.assignments:
        num_partitions, replication_factor = _check_assignments(ctx, topic)
    else:
        if num_partitions == 0 or num_partitions < -1:
            raise _err(ErrorCode.INVALID_PARTITIONS,
                       "Number of partitions was set to an invalid non-positive value.")
        if replication_factor == 0 or replication_factor < -1:
            raise _err(ErrorCode.INVALID_REPLICATION_FACTOR,
                       "Replication factor must be larger than 0, or -1 to use the default value.")
    if replication_factor == -1:
        replication_factor = int(ctx.services.config.get("default.replication.factor"))
    if replication_factor > _broker_count(ctx):
        raise _err(ErrorCode.INVALID_REPLICATION_FACTOR,
                   f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                   f"factor of {replication_factor} cannot be reached because only {_broker_count(ctx)} "
                   "broker(s) are registered.")
    configs = tc.normalize_topic_configs(_configs_of(topic))
    tc.broker_dynamic_configs(ctx.services)
    manual = ({a.partition_index: list(a.broker_ids) for a in topic.assignments} if topic.assignments
              else None)
    info = md.create_topic(name, num_partitions, replication_factor, configs, validate_only=True,
                           assignment=manual)
    ceilings.check(name, info.num_partitions, info.num_partitions * replication_factor)
    quota.record(info.num_partitions)  # after every other check, as Kafka's ReplicationControlManager
    if validate_only:
        return info, configs
    info = md.create_topic(name, num_partitions, replication_factor, configs, assignment=manual)
    ceilings.add(info.num_partitions * replication_factor)
    return info, configs


def _result(ctx: RequestContext, name: str, info: Any = None, configs: dict[str, str] | None = None,
            exc: BaseException | None = None) -> Any:
    if exc is not None:
        return RESP.CreatableTopicResult(
            name=name, topic_id=ZERO_UUID, error_code=tc.error_code_of(exc),
            error_message=tc.error_message_of(exc), num_partitions=-1, replication_factor=-1, configs=[])
    entries = tc.describe_topic_configs(configs or {}, ctx.services.config, include_synonyms=False,
                                       include_documentation=False)
    return RESP.CreatableTopicResult(
        name=name, topic_id=info.topic_id, error_code=0, error_message=None,
        num_partitions=info.num_partitions, replication_factor=info.replication_factor,
        configs=[RESP.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                            config_source=e.source, is_sensitive=e.sensitive)
                 for e in entries])


@handler(19, REQ.min_version, REQ.max_version)
async def create_topics(ctx: RequestContext, req: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
    validate_only = bool(req.validate_only)
    topics, duplicates = split_duplicates(req.topics, lambda t: t.name)
    results = []
    new: dict[str, range] = {}
    try:  # the whole request first (the topics it may create, as Kafka's ControllerApis): nothing is created
        # when it asks for too many partitions
        default_partitions = int(ctx.services.config.get("num.partitions"))
        permitted = {t.name for t in topics if allowed_create_topic(ctx, t.name)}
        check_partitions_per_request(requested_partitions([t for t in topics if t.name in permitted],
                                                          default_partitions))
    except KafkaError as refusal:
        log.info("CreateTopics of %d topic(s) refused: %s", len(topics), refusal)
        denied = _err(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        results = [_result(ctx, t.name, exc=refusal if t.name in permitted else denied) for t in topics]
        topics = []
    ceilings = PartitionCeilings(ctx.services.config, ctx.services.metadata.topics.values() if topics else (),
                                 _broker_count(ctx))
    quota = request_mutation_quota(ctx)
    for t in topics:
        # the topic's files (metadata, partition.metadata ...) are fsynced in the writer thread, not on the
        # event loop: other connections go on meanwhile (deferred_writes, moldau.log.checkpoint)
        with deferred_writes() as batch:
            created, exc = attempt(log, f"create topic {t.name}", _create_one, ctx, t, validate_only,
                                   ceilings, quota)
        await batch.flush()
        if created is None:
            results.append(_result(ctx, t.name, exc=exc))
            continue
        results.append(_result(ctx, t.name, *created))
        new[t.name] = range(created[0].num_partitions)
    if new and not validate_only and req.timeout_ms > 0:
        late = await wait_for_leaders(ctx, new, req.timeout_ms)
        for i, r in enumerate(results):
            if r.name in late:
                results[i] = _result(ctx, r.name, exc=_err(
                    ErrorCode.REQUEST_TIMED_OUT, f"Topic '{r.name}' was created, but not every partition "
                    f"had a leader within {req.timeout_ms} ms."))
    for name in duplicates:
        results.append(_result(ctx, name, exc=_err(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")))
    return RESP.new(throttle_time_ms=mutation_throttle(ctx, quota), topics=results)

"""CreatePartitions (key 37), v0-3.

* ``count`` is the new total: INVALID_PARTITIONS when it is not above the current count.
* ``assignments`` (nullable): one broker list per new partition; registered brokers only, with the
  topic's replication factor, no duplicates (INVALID_REPLICA_ASSIGNMENT otherwise).
* ``validate_only``: checks only.  Otherwise the metadata store grows the topic and its listeners (replica
  manager) create the new partition logs at once, so they can be produced to right away.
* A topic named twice: INVALID_REQUEST "Duplicate topic name.", as Kafka.
* Bounds (moldau.broker.limits), checked before anything grows: more than 10,000 new partitions in the
  request refuses every topic with POLICY_VIOLATION "Excessively large number of partitions per request.";
  a topic over ``max.topic.partitions`` or a broker over ``max.broker.partitions`` refuses that topic with
  POLICY_VIOLATION. Many new partitions are created in the background (replica_manager) and the answer
  waits for them (at most timeout_ms).
* ``controller_mutation_rate`` (KIP-599): the new partitions are charged after the topic's validation; v3+
  strict (THROTTLING_QUOTA_EXCEEDED), older versions permissive; throttle_time_ms carries the throttle.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.log.checkpoint import deferred_writes
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError

from .. import topic_config as tc
from ..context import RequestContext
from ..limits import PartitionCeilings, check_partitions_per_request
from ..metadata import TopicInfo
from ..quotas import ControllerMutationQuota, mutation_throttle, request_mutation_quota
from ..registry import handler
from ..security.authorizer import ALTER, TOPIC, allowed, require
from ._common import attempt, split_duplicates, wait_for_leaders
from ._common import err as _err

log = logging.getLogger(__name__)

REQ = m.CreatePartitionsRequest
RESP = m.CreatePartitionsResponse


def _check(ctx: RequestContext, topic: Any) -> TopicInfo:
    require(ctx, ALTER, TOPIC, topic.name)
    md = ctx.services.metadata
    info = md.topics.get(topic.name)
    if info is None:
        raise _err(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic.name}' does not exist.")
    current = info.num_partitions
    if topic.count < current:
        raise _err(ErrorCode.INVALID_PARTITIONS,
                   f"Topic currently has {current} partitions, which is higher than the requested "
                   f"{topic.count}.")
    if topic.count == current:
        raise _err(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    if topic.assignments is not None:
        added = topic.count - current
        if len(topic.assignments) != added:
            raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Attempted to add {added} additional partition(s), but only "
                       f"{len(topic.assignments)} assignment(s) were specified.")
        rf = info.replication_factor or 1
        listener = ctx.connection.listener_name
        live = {b[0] for b in ctx.services.metadata.live_brokers(listener)} or {ctx.services.node_id}
        for a in topic.assignments:
            brokers = list(a.broker_ids or [])
            if not brokers:
                raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "The manual partition assignment includes an empty replica list.")
            if len(set(brokers)) != len(brokers):
                raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "The manual partition assignment includes a broker more than once.")
            for b in brokers:
                if b not in live:
                    raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"The manual partition assignment includes broker {b}, but no such broker is "
                               "registered.")
            if len(brokers) != rf:
                raise _err(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes a partition with {len(brokers)} "
                           f"replica(s), but this is not consistent with previous partitions, which have "
                           f"{rf} replica(s).")
    return info


def _grow(ctx: RequestContext, topic: Any, validate_only: bool, ceilings: PartitionCeilings,
          quota: ControllerMutationQuota) -> None:
    info = _check(ctx, topic)
    added = topic.count - info.num_partitions
    new_replicas = added * max(1, info.replication_factor or 1)
    ceilings.check(topic.name, topic.count, new_replicas)
    quota.record(added)
    manual = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    ctx.services.metadata.create_partitions(topic.name, topic.count, validate_only=validate_only,
                                            assignment=manual)
    if not validate_only:
        ceilings.add(new_replicas)


def _added_partitions(ctx: RequestContext, topics: list[Any]) -> int:
    """New partitions the request asks for (topics that exist, that it may alter and that would grow)."""
    md = ctx.services.metadata
    total = 0
    for t in topics:
        info = md.topics.get(t.name) if allowed(ctx, ALTER, TOPIC, t.name) else None
        if info is not None and t.count > info.num_partitions:
            total += t.count - info.num_partitions
    return total


@handler(37, REQ.min_version, REQ.max_version)
async def create_partitions(ctx: RequestContext,
                            req: m.CreatePartitionsRequest) -> m.CreatePartitionsResponse:
    validate_only = bool(req.validate_only)
    topics, duplicates = split_duplicates(req.topics, lambda t: t.name)
    results = []
    try:  # the whole request first: nothing grows when it asks for too many partitions
        check_partitions_per_request(_added_partitions(ctx, topics))
    except KafkaError as refusal:
        log.info("CreatePartitions of %d topic(s) refused: %s", len(topics), refusal)
        denied = KafkaError.for_code(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))  # what require() raises
        for t in topics:
            why = refusal if allowed(ctx, ALTER, TOPIC, t.name) else denied
            results.append(RESP.CreatePartitionsTopicResult(name=t.name, error_code=tc.error_code_of(why),
                                                            error_message=tc.error_message_of(why)))
        topics = []
    listener = ctx.connection.listener_name
    ceilings = PartitionCeilings(ctx.services.config, ctx.services.metadata.topics.values() if topics else (),
                                 len(ctx.services.metadata.live_brokers(listener)) or 1)
    quota = request_mutation_quota(ctx)
    for t in topics:
        with deferred_writes() as batch:  # the new partitions' files are fsynced in the writer thread
            _, exc = attempt(log, f"create partitions for {t.name}", _grow, ctx, t, validate_only, ceilings,
                             quota)
        await batch.flush()
        results.append(RESP.CreatePartitionsTopicResult(
            name=t.name, error_code=0 if exc is None else tc.error_code_of(exc),
            error_message=None if exc is None else tc.error_message_of(exc)))
    grown = {t.name: range(t.count) for t, r in zip(topics, results) if r.error_code == 0}
    if grown and not validate_only and req.timeout_ms > 0:
        late = await wait_for_leaders(ctx, grown, req.timeout_ms)
        for r in results:
            if r.name in late:
                r.error_code = int(ErrorCode.REQUEST_TIMED_OUT)
                r.error_message = (f"The partitions of '{r.name}' were created, but not every one had a "
                                   f"leader within {req.timeout_ms} ms.")
    for name in duplicates:
        results.append(RESP.CreatePartitionsTopicResult(
            name=name, error_code=int(ErrorCode.INVALID_REQUEST), error_message="Duplicate topic name."))
    return RESP.new(throttle_time_ms=mutation_throttle(ctx, quota), results=results)

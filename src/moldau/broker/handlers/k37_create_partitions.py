"""CreatePartitions (key 37), v0-3.

* ``count`` is the new total: INVALID_PARTITIONS when it is not above the current count.
* ``assignments`` (nullable): one broker list per new partition; registered brokers only, with the
  topic's replication factor, no duplicates (INVALID_REPLICA_ASSIGNMENT otherwise).
* ``validate_only``: checks only.  Otherwise the metadata store grows the topic and its listeners (replica
  manager) create the new partition logs at once, so they can be produced to right away.
* A topic named twice: INVALID_REQUEST "Duplicate topic name.", as Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.log.checkpoint import deferred_writes
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from .. import topic_config as tc
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER, TOPIC, require
from ._common import attempt, split_duplicates, wait_for_leaders
from ._common import err as _err

log = logging.getLogger(__name__)

REQ = m.CreatePartitionsRequest
RESP = m.CreatePartitionsResponse


def _check(ctx: RequestContext, topic: Any) -> Any:
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
        rf = getattr(info, "replication_factor", 1) or 1
        listener = getattr(ctx.connection, "listener_name", None)
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


def _grow(ctx: RequestContext, topic: Any, validate_only: bool) -> None:
    _check(ctx, topic)
    manual = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    ctx.services.metadata.create_partitions(topic.name, topic.count, validate_only=validate_only,
                                            assignment=manual)


@handler(37, REQ.min_version, REQ.max_version)
async def create_partitions(ctx: RequestContext,
                            req: m.CreatePartitionsRequest) -> m.CreatePartitionsResponse:
    validate_only = bool(req.validate_only)
    topics, duplicates = split_duplicates(req.topics, lambda t: t.name)
    results = []
    for t in topics:
        with deferred_writes() as batch:  # the new partitions' files are fsynced in the writer thread
            _, exc = attempt(log, f"create partitions for {t.name}", _grow, ctx, t, validate_only)
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
    return RESP.new(throttle_time_ms=0, results=results)

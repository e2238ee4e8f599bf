"""DeleteTopics (key 20), v0-6 (Kafka 4.1: 1-6; moldau keeps v0).

* v0-5: ``topic_names``; v6+: ``topics`` with a name or a topic id (not both: INVALID_REQUEST).
* Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown id: UNKNOWN_TOPIC_ID.  A name or id given twice:
  INVALID_REQUEST ("Duplicate topic name." / "Duplicate topic id."), as Kafka's controller.
* ``delete.topic.enable=false``: TOPIC_DELETION_DISABLED (v3+) or INVALID_REQUEST (v0-2), as Kafka.
* Internal topics (``__consumer_offsets``, ``__transaction_state``) are protected: INVALID_REQUEST.
* The metadata store removes the topic; its listeners (replica manager / log manager) close and delete the
  partition directories.
* v5+: error messages; v6+: topic ids in the response.
* ``controller_mutation_rate`` (KIP-599): each topic's partitions are charged before it is deleted; v5+
  strict (THROTTLING_QUOTA_EXCEEDED for the topics met while the quota is exhausted), older versions
  permissive; throttle_time_ms carries the throttle.
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
from ..quotas import ControllerMutationQuota, mutation_throttle, request_mutation_quota
from ..registry import handler
from ..security.authorizer import DELETE, TOPIC, allowed
from ._common import attempt

log = logging.getLogger(__name__)

REQ = m.DeleteTopicsRequest
RESP = m.DeleteTopicsResponse
ZERO_UUID = uuid.UUID(int=0)


def _result(name: str | None, topic_id: uuid.UUID | None, code: int, message: str | None) -> Any:
    return RESP.DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID, error_code=code,
                                     error_message=message)


def _delete_one(ctx: RequestContext, info: Any, quota: ControllerMutationQuota) -> None:
    if info.is_internal:
        raise KafkaError.for_code(int(ErrorCode.INVALID_REQUEST),
                                  f"Topic {info.name} is an internal topic and cannot be deleted.")
    quota.record(info.num_partitions)
    ctx.services.metadata.delete_topic(info.name)


@handler(20, REQ.min_version, REQ.max_version)
async def delete_topics(ctx: RequestContext, req: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
    md = ctx.services.metadata
    results: list[Any] = []
    names: list[str] = list(req.topic_names or []) if ctx.version <= 5 else []
    ids: list[uuid.UUID] = []
    if ctx.version >= 6:
        for t in req.topics or []:
            tid = t.topic_id or ZERO_UUID
            if t.name is None:
                if tid == ZERO_UUID:
                    results.append(_result(None, None, int(ErrorCode.INVALID_REQUEST),
                                            "Neither topic name nor id were specified."))
                else:
                    ids.append(tid)
            elif tid != ZERO_UUID:
                results.append(_result(t.name, tid, int(ErrorCode.INVALID_REQUEST),
                                        "You may not specify both topic name and topic id."))
            else:
                names.append(t.name)

    if not ctx.services.config.get("delete.topic.enable"):
        code = int(ErrorCode.TOPIC_DELETION_DISABLED if ctx.version >= 3 else ErrorCode.INVALID_REQUEST)
        msg = "Topic deletion is disabled."
        results.extend(_result(n, None, code, msg) for n in names)
        results.extend(_result(None, i, code, msg) for i in ids)
        return RESP.new(throttle_time_ms=0, responses=results)

    dup_names = {n for n in names if names.count(n) > 1}
    dup_ids = {i for i in ids if ids.count(i) > 1}
    results.extend(_result(n, None, int(ErrorCode.INVALID_REQUEST), "Duplicate topic name.")
                   for n in dup_names)
    results.extend(_result(None, i, int(ErrorCode.INVALID_REQUEST), "Duplicate topic id.") for i in dup_ids)

    targets: list[tuple[str, uuid.UUID | None, Any]] = []
    for tid in dict.fromkeys(i for i in ids if i not in dup_ids):
        info = md.get_by_id(tid)
        if info is None:
            results.append(_result(None, tid, int(ErrorCode.UNKNOWN_TOPIC_ID),
                                   "This server does not host this topic ID."))
        else:
            targets.append((info.name, tid, info))
    by_id_names = {t[0] for t in targets}
    for name in dict.fromkeys(n for n in names if n not in dup_names):
        info = md.topics.get(name)
        if info is None and not allowed(ctx, DELETE, TOPIC, name):
            results.append(_result(name, None, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                   "Authorization failed."))
        elif info is None:
            results.append(_result(name, None, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                   "This server does not host this topic-partition."))
        elif name in by_id_names:
            results.append(_result(name, info.topic_id, int(ErrorCode.INVALID_REQUEST),
                                   "The provided topic name maps to an ID that was already supplied."))
        else:
            targets.append((name, info.topic_id, info))

    quota = request_mutation_quota(ctx)
    for name, target_id, info in targets:
        if not allowed(ctx, DELETE, TOPIC, name):
            results.append(_result(name, target_id, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                   "Authorization failed."))
            continue
        with deferred_writes() as batch:  # the metadata file is rewritten in the writer thread
            _, exc = attempt(log, f"delete topic {name}", _delete_one, ctx, info, quota,
                             log_refusal=False)
        await batch.flush()
        if exc is not None:
            results.append(_result(name, target_id, tc.error_code_of(exc), tc.error_message_of(exc)))
            continue
        log.info("deleted topic %s (id %s)", name, target_id)
        results.append(_result(name, target_id, 0, None))
    return RESP.new(throttle_time_ms=mutation_throttle(ctx, quota), responses=results)

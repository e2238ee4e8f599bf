"""DescribeTopicPartitions (key 75), v0 (KIP-966).

Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache, on moldau's metadata store (this node
alone without a cluster, the controller's view in a cluster; docs/cluster.md):

* Topics: the named ones, or every topic when the list is empty; answered in name order. With a ``cursor``
  only topics whose name sorts at or after the cursor's topic; a named list that does not contain the
  cursor's topic is INVALID_REQUEST for every named topic.
* ``response_partition_limit``, capped by ``max.request.partition.size.limit`` (2000): partitions are
  answered from the cursor's partition (of the cursor's topic; 0 for the others) until the limit is used;
  ``next_cursor`` then names the first partition not answered (a topic cut short: its next partition; the
  limit used up at a topic boundary: partition 0 of the next topic). Null when everything was answered.
* Per partition: leader, leader epoch, replicas, ISR, offline replicas (as Metadata answers them);
  eligible_leader_replicas and last_known_elr are empty lists (moldau has no eligible leader replicas).
* A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name Kafka
  would not accept); when listing all topics nothing to report.
* ACLs: topics the principal may not Describe are left out of "all topics"; named, they are answered
  TOPIC_AUTHORIZATION_FAILED with the zero topic id (after the others, as Kafka), their existence not
  disclosed. topic_authorized_operations is always filled in (every topic operation without an authorizer).
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..metadata import is_valid_topic_name
from ..registry import handler
from ..security.authorizer import DESCRIBE, TOPIC, allowed
from .k03_metadata import partition_fields, topic_operations

log = logging.getLogger(__name__)

REQ = m.DescribeTopicPartitionsRequest
RESP = m.DescribeTopicPartitionsResponse

# Kafka's max.request.partition.size.limit default (moldau does not make it a setting)
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000


def _error_topic(code: int, name: str) -> Any:
    return RESP.DescribeTopicPartitionsResponseTopic(error_code=code, name=name, is_internal=False,
                                                     partitions=[])


@handler(75, REQ.min_version, REQ.max_version)
async def describe_topic_partitions(ctx: RequestContext, req: m.DescribeTopicPartitionsRequest
                                    ) -> m.DescribeTopicPartitionsResponse:
    store = ctx.services.metadata
    fetch_all = not req.topics
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    if fetch_all:
        names = {name for name in store.topics if name >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            log.info("DescribeTopicPartitions: cursor topic %r not among the requested topics", cursor_topic)
            return RESP.new(throttle_time_ms=0, next_cursor=None, topics=[
                _error_topic(ErrorCode.INVALID_REQUEST, t.name) for t in req.topics])

    unauthorized: list[Any] = []
    authorized: list[str] = []
    for name in sorted(names):
        if allowed(ctx, DESCRIBE, TOPIC, name):
            authorized.append(name)
        elif not fetch_all:
            unauthorized.append(_error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
    first_index = cursor.partition_index if cursor is not None and cursor_topic in authorized else 0

    remaining = min(MAX_REQUEST_PARTITION_SIZE_LIMIT, req.response_partition_limit)
    topics_out: list[Any] = []
    next_cursor = None
    for name in authorized:
        if remaining == 0:  # used up at a topic boundary: the next answer starts with this topic
            next_cursor = RESP.Cursor(topic_name=name, partition_index=0)
            break
        if remaining < 0:
            break
        info = store.get(name)
        if info is None:
            if not fetch_all:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if is_valid_topic_name(name) \
                    else ErrorCode.INVALID_TOPIC_EXCEPTION
                topics_out.append(_error_topic(code, name))
            continue
        start = first_index if name == cursor_topic else 0
        upper = min(info.num_partitions, start + remaining)
        parts = [RESP.DescribeTopicPartitionsResponsePartition(
            eligible_leader_replicas=[], last_known_elr=[], **partition_fields(ctx, info, i))
            for i in range(max(start, 0), upper)]
        topics_out.append(RESP.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id, is_internal=info.is_internal,
            partitions=parts, topic_authorized_operations=topic_operations(ctx, name)))
        if upper < info.num_partitions:
            next_cursor = RESP.Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(parts)
    topics_out.extend(unauthorized)
    return RESP.new(throttle_time_ms=0, topics=topics_out, next_cursor=next_cursor)

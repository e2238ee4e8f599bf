"""DeleteRecords (key 21), v0-2.

For each partition the log start offset advances to ``offset`` (-1 = the high watermark); records below it
are no longer readable, whole segments below it are deleted.  The response's ``low_watermark`` is the new
log start offset (unchanged when ``offset`` is below it).
* offset above the high watermark, or negative other than -1: OFFSET_OUT_OF_RANGE.
* unknown topic / partition: UNKNOWN_TOPIC_OR_PARTITION; internal topics: INVALID_TOPIC_EXCEPTION
  ("Cannot delete records of internal topic"), as Kafka.
* In a cluster only the partition's leader deletes (NOT_LEADER_OR_FOLLOWER elsewhere, as Kafka); the
  followers take the new log start offset from the leader's fetch answers.
"""

from __future__ import annotations

import logging

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError

from .. import topic_config as tc
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DELETE, TOPIC, require

log = logging.getLogger(__name__)

REQ = m.DeleteRecordsRequest
RESP = m.DeleteRecordsResponse

HIGH_WATERMARK = -1


def delete_records(ctx: RequestContext, topic: str, index: int, offset: int) -> int:
    """Advance the log start offset of ``topic``-``index``; return the new low watermark."""
    require(ctx, DELETE, TOPIC, topic)
    md = ctx.services.metadata
    info = md.topics.get(topic)
    if info is None or not 0 <= index < info.num_partitions:
        raise KafkaError.for_code(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if info.is_internal:
        raise KafkaError.for_code(int(ErrorCode.INVALID_TOPIC_EXCEPTION),
                                  f"Cannot delete records of internal topic {topic}")
    p = ctx.services.replica_manager.get_partition(topic, index)
    view = md.partition_state(topic, index)  # None: one broker leads every partition
    if view is not None and view.leader != ctx.services.node_id:
        # a cluster: only the leader deletes; its followers take the new log start offset from its fetch
        # answers (a follower deleting on its own would leave the replicas apart)
        raise KafkaError.for_code(int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    if p is None:
        raise KafkaError.for_code(int(ErrorCode.NOT_LEADER_OR_FOLLOWER if view is not None
                                      else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    hw = p.high_watermark
    target = hw if offset == HIGH_WATERMARK else offset
    if target < 0 or target > hw:
        raise KafkaError.for_code(int(ErrorCode.OFFSET_OUT_OF_RANGE),
                                  f"Cannot increment the log start offset to {offset} of partition "
                                  f"{topic}-{index} since it is larger than the high watermark {hw}")
    if target > p.log_start_offset:
        plog = p.log
        # The partition's high watermark is the replica manager's; the log checks against its own copy.
        if plog.high_watermark < hw:
            plog.high_watermark = hw
        plog.delete_records_before(target)  # log errors are KafkaErrors carrying their code
        log.info("deleted records of %s-%d before offset %d", topic, index, target)
    return int(p.log_start_offset)


@handler(21, REQ.min_version, REQ.max_version)
async def delete_records_handler(ctx: RequestContext, req: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse:
    topics = []
    for t in req.topics:
        parts = []
        for pr in t.partitions:
            try:
                low = delete_records(ctx, t.name, pr.partition_index, pr.offset)
            except KafkaError as exc:
                parts.append(RESP.DeleteRecordsPartitionResult(
                    partition_index=pr.partition_index, low_watermark=-1, error_code=tc.error_code_of(exc)))
                continue
            except OSError as exc:
                log.error("delete records %s-%d failed: %s", t.name, pr.partition_index, exc)
                parts.append(RESP.DeleteRecordsPartitionResult(
                    partition_index=pr.partition_index, low_watermark=-1,
                    error_code=int(ErrorCode.KAFKA_STORAGE_ERROR)))
                continue
            parts.append(RESP.DeleteRecordsPartitionResult(
                partition_index=pr.partition_index, low_watermark=low, error_code=0))
        topics.append(RESP.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return RESP.new(throttle_time_ms=0, topics=topics)

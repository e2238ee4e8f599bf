"""DescribeProducers (key 61), v0.

The active producers of each requested partition, from the partition's producer state (the log's
ProducerStateManager): producer id, epoch, last sequence, last timestamp, coordinator epoch (of the last
marker) and the first offset of its ongoing transaction (-1 when none). This is how ``kafka-transactions.sh
find-hanging`` finds transactions that block the last stable offset.

Errors per partition: TOPIC_AUTHORIZATION_FAILED (Read on the topic), UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import READ, TOPIC, allowed


@handler(api_key=61, min_version=0, max_version=0)
async def describe_producers(ctx: RequestContext,
                             req: m.DescribeProducersRequest) -> m.DescribeProducersResponse:
    msg = m.DescribeProducersResponse
    rm = ctx.services.replica_manager
    topics_out = []
    for t in req.topics:
        ok = allowed(ctx, READ, TOPIC, t.name)
        parts = []
        for index in t.partition_indexes:
            pr = msg.PartitionResponse(partition_index=index, error_code=0, error_message=None,
                                       active_producers=[])
            p = rm.get_partition(t.name, index) if ok else None
            if not ok:
                pr.error_code = E.TOPIC_AUTHORIZATION_FAILED
            elif p is None:
                pr.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                for e in sorted(p.log.producer_state.producers.values(), key=lambda e: e.producer_id):
                    pr.active_producers.append(msg.ProducerState(
                        producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                        last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=e.current_txn_first_offset))
            parts.append(pr)
        topics_out.append(msg.TopicResponse(name=t.name, partitions=parts))
    return msg.new(throttle_time_ms=0, topics=topics_out)

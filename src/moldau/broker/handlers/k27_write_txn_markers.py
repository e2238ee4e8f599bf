"""WriteTxnMarkers (key 27), v0-2.

What a transaction coordinator sends to partition leaders; moldau's own coordinator writes its markers
in-process through the same code (moldau.broker.txn.markers), and this handler serves other callers, e.g. an
admin aborting a hanging transaction (``kafka-transactions.sh abort``, Admin.abortTransaction).

* ClusterAction on the cluster, else CLUSTER_AUTHORIZATION_FAILED on every partition.
* Per partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH (the producer's epoch on the partition is
  newer than the marker's), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), or the log's error.
  A marker on a ``__consumer_offsets`` partition completes the producer's transactional offset commits there.
* v2's ``transaction_version`` (KIP-1228) is accepted and not needed: the marker bytes are the same.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, allowed
from ..txn.markers import write_markers

log = logging.getLogger(__name__)


@handler(api_key=27, min_version=0, max_version=2)
async def write_txn_markers(ctx: RequestContext, req: m.WriteTxnMarkersRequest) -> m.WriteTxnMarkersResponse:
    msg = m.WriteTxnMarkersResponse
    authorized = allowed(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    out = []
    for marker in req.markers:
        parts = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        errors: dict[tuple[str, int], int]
        if not authorized:
            errors = {tp: E.CLUSTER_AUTHORIZATION_FAILED for tp in parts}
        else:
            errors = await write_markers(ctx.services, marker.producer_id, marker.producer_epoch,
                                         bool(marker.transaction_result), parts, marker.coordinator_epoch,
                                         check_epochs=True)
        by_topic: dict[str, list[Any]] = {}
        for topic, p in parts:
            by_topic.setdefault(topic, []).append(
                msg.WritableTxnMarkerPartitionResult(partition_index=p, error_code=errors.get((topic, p), 0)))
        out.append(msg.WritableTxnMarkerResult(
            producer_id=marker.producer_id,
            topics=[msg.WritableTxnMarkerTopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return msg.new(markers=out)

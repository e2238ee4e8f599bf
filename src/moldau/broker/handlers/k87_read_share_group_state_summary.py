"""ReadShareGroupStateSummary (key 87), v0-1: a share-partition's state epoch, leader epoch and start offset
(v1: DeliveryCompleteCount) without its batches. UNKNOWN_TOPIC_OR_PARTITION for a key never initialized;
ClusterAction (brokers call it)."""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError
from moldau.protocol.share_state import ShareKey

from ..context import RequestContext
from ..registry import handler
from ._share_state import per_partition


@handler(api_key=87, min_version=0, max_version=1)
async def read_share_group_state_summary(ctx: RequestContext, req: m.ReadShareGroupStateSummaryRequest
                                         ) -> m.ReadShareGroupStateSummaryResponse:
    async def op(key: ShareKey, p: Any) -> dict[str, Any]:
        assert ctx.services.share is not None
        st = ctx.services.share.coordinator.read(key)
        if st is None:
            raise KafkaError.for_code(E.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state.")
        return {"state_epoch": st.state_epoch, "leader_epoch": st.leader_epoch,
                "start_offset": st.start_offset, "delivery_complete_count": st.delivery_complete_count}

    return await per_partition(ctx, req, m.ReadShareGroupStateSummaryResponse, "ReadStateSummaryResult", op)

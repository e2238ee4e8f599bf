"""ReadShareGroupState (key 84), v0: a share-partition's state (state epoch, start offset, state batches) from
the share coordinator. A key never initialized answers UNKNOWN_TOPIC_OR_PARTITION; NOT_COORDINATOR when its
partition is led elsewhere; ClusterAction (brokers call it)."""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError
from moldau.protocol.share_state import ShareKey

from ..context import RequestContext
from ..registry import handler
from ._share_state import per_partition


@handler(api_key=84, min_version=0, max_version=0)
async def read_share_group_state(ctx: RequestContext, req: m.ReadShareGroupStateRequest
                                 ) -> m.ReadShareGroupStateResponse:
    sb = m.ReadShareGroupStateResponse.StateBatch

    async def op(key: ShareKey, p: Any) -> dict[str, Any]:
        assert ctx.services.share is not None
        st = ctx.services.share.coordinator.read(key)
        if st is None:
            raise KafkaError.for_code(E.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state.")
        return {"state_epoch": st.state_epoch, "start_offset": st.start_offset, "state_batches": [
            sb(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
               delivery_count=b.delivery_count) for b in st.batches]}

    return await per_partition(ctx, req, m.ReadShareGroupStateResponse, "ReadStateResult", op)

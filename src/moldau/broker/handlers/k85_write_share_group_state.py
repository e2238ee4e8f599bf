"""WriteShareGroupState (key 85), v0-1: state batches (and a new start offset, -1: unchanged) merged into a
share-partition's state: a ShareUpdate record, every
``share.coordinator.snapshot.update.records.per.snapshot`` a ShareSnapshot. FENCED_STATE_EPOCH /
FENCED_LEADER_EPOCH for older epochs; v1 DeliveryCompleteCount; ClusterAction (brokers call it)."""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.share_state import ShareKey, StateBatch

from ..context import RequestContext
from ..registry import handler
from ._share_state import per_partition


@handler(api_key=85, min_version=0, max_version=1)
async def write_share_group_state(ctx: RequestContext, req: m.WriteShareGroupStateRequest
                                  ) -> m.WriteShareGroupStateResponse:
    async def op(key: ShareKey, p: Any) -> dict[str, Any]:
        assert ctx.services.share is not None
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in p.state_batches or []]
        dcc = p.delivery_complete_count if ctx.version >= 1 else -1
        sc = ctx.services.share.coordinator
        await sc.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches, dcc)
        return {}

    return await per_partition(ctx, req, m.WriteShareGroupStateResponse, "WriteStateResult", op)

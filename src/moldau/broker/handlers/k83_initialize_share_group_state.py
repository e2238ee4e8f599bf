"""InitializeShareGroupState (key 83), v0: a share-partition's state (re)started at StateEpoch / StartOffset
in ``__share_group_state`` (a ShareSnapshot record). FENCED_STATE_EPOCH for an older state epoch;
NOT_COORDINATOR when the key's partition is led elsewhere; ClusterAction (brokers call it)."""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.share_state import ShareKey

from ..context import RequestContext
from ..registry import handler
from ._share_state import per_partition


@handler(api_key=83, min_version=0, max_version=0)
async def initialize_share_group_state(ctx: RequestContext, req: m.InitializeShareGroupStateRequest
                                       ) -> m.InitializeShareGroupStateResponse:
    async def op(key: ShareKey, p: Any) -> dict[str, Any]:
        assert ctx.services.share is not None
        await ctx.services.share.coordinator.initialize(key, p.state_epoch, p.start_offset)
        return {}

    return await per_partition(ctx, req, m.InitializeShareGroupStateResponse, "InitializeStateResult", op)

"""DeleteShareGroupState (key 86), v0: a share-partition's state deleted (a tombstone in
``__share_group_state``); ClusterAction (brokers call it)."""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.share_state import ShareKey

from ..context import RequestContext
from ..registry import handler
from ._share_state import per_partition


@handler(api_key=86, min_version=0, max_version=0)
async def delete_share_group_state(ctx: RequestContext, req: m.DeleteShareGroupStateRequest
                                   ) -> m.DeleteShareGroupStateResponse:
    async def op(key: ShareKey, p: Any) -> dict[str, Any]:
        assert ctx.services.share is not None
        await ctx.services.share.coordinator.delete(key)
        return {}

    return await per_partition(ctx, req, m.DeleteShareGroupStateResponse, "DeleteStateResult", op)

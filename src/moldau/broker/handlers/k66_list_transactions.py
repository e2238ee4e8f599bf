"""ListTransactions (key 66), v0-2.

The transactional ids this coordinator knows (those the caller may Describe), filtered by state names
(unknown names are returned in ``unknown_state_filters`` and match nothing), producer ids, v1+ duration (only
transactions open for longer than ``duration_filter`` ms; -1 = no filter) and v2+ a regular expression the
whole transactional id must match (INVALID_REGULAR_EXPRESSION when it does not compile).
"""

from __future__ import annotations

import re

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE, TRANSACTIONAL_ID, allowed


@handler(api_key=66, min_version=0, max_version=2)
async def list_transactions(ctx: RequestContext,
                            req: m.ListTransactionsRequest) -> m.ListTransactionsResponse:
    msg = m.ListTransactionsResponse
    v = ctx.version
    resp = msg.new(throttle_time_ms=0, error_code=0, unknown_state_filters=[], transaction_states=[])
    tc = ctx.services.transaction_coordinator
    if tc is None:
        resp.error_code = E.COORDINATOR_NOT_AVAILABLE
        return resp
    pattern = req.transactional_id_pattern if v >= 2 else None
    try:
        found, unknown = tc.list_transactions(req.state_filters or (), req.producer_id_filters or (),
                                              req.duration_filter if v >= 1 else -1, pattern)
    except re.error:
        resp.error_code = E.INVALID_REGULAR_EXPRESSION
        return resp
    resp.unknown_state_filters = unknown
    resp.transaction_states = [
        msg.TransactionState(transactional_id=md.transactional_id, producer_id=md.producer_id,
                             transaction_state=md.state.display_name)
        for md in found if allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, md.transactional_id)]
    return resp

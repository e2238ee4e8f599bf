"""DescribeTransactions (key 65), v0.

Per transactional id: its state name (Empty, Ongoing, PrepareCommit, ...), timeout, start time (-1 when no
transaction is open), producer id and epoch, and the partitions of the ongoing transaction (only topics the
caller may Describe). Errors per id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Describe on the transactional id),
TRANSACTIONAL_ID_NOT_FOUND, COORDINATOR_NOT_AVAILABLE without a transaction coordinator.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE, TOPIC, TRANSACTIONAL_ID, allowed


@handler(api_key=65, min_version=0, max_version=0)
async def describe_transactions(ctx: RequestContext,
                                req: m.DescribeTransactionsRequest) -> m.DescribeTransactionsResponse:
    msg = m.DescribeTransactionsResponse
    tc = ctx.services.transaction_coordinator
    out = []
    for txn_id in req.transactional_ids:
        st = msg.TransactionState(error_code=0, transactional_id=txn_id, transaction_state="",
                                  transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                  producer_epoch=-1, topics=[])
        out.append(st)
        if not allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, txn_id):
            st.error_code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            continue
        if tc is None:
            st.error_code = E.COORDINATOR_NOT_AVAILABLE
            continue
        md = tc.describe(txn_id)
        if md is None:
            st.error_code = E.TRANSACTIONAL_ID_NOT_FOUND
            continue
        state = md.pending_state if md.pending_state is not None and md.pending_state.value == 7 else md.state
        st.transaction_state = state.display_name
        st.transaction_timeout_ms = md.txn_timeout_ms
        st.transaction_start_time_ms = md.txn_start_ms
        st.producer_id = md.producer_id
        st.producer_epoch = md.producer_epoch
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(md.partitions):
            if allowed(ctx, DESCRIBE, TOPIC, topic):
                by_topic.setdefault(topic, []).append(p)
        st.topics = [msg.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
    return msg.new(throttle_time_ms=0, transaction_states=out)

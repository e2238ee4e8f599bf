"""DescribeClientQuotas (key 48), v0-1.

* Needs DESCRIBE_CONFIGS on the cluster (top-level CLUSTER_AUTHORIZATION_FAILED).
* Filter components: (entity type, match type, match): 0 = the named entity (``match`` required), 1 = the
  type's default entity (``match`` null), 2 = any named entity of the type. ``strict``: only entities made of
  exactly the filter's types; otherwise entities with more types match too. An unknown entity or match type,
  a type given twice, a missing or unexpected ``match``: top-level INVALID_REQUEST, entries null.
* Entries: entity components (default = null name) and their quota values, from the broker's quota store
  (``moldau.broker.quotas``).
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..quotas import QuotaError
from ..registry import handler
from ..security.authorizer import DESCRIBE_CONFIGS, allowed_cluster

RESP = m.DescribeClientQuotasResponse


def _invalid(text: str) -> m.DescribeClientQuotasResponse:
    return RESP.new(
        throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=text, entries=None
    )


@handler(api_key=48, min_version=0, max_version=1)
async def describe_client_quotas(ctx: RequestContext, req: m.DescribeClientQuotasRequest
                                 ) -> m.DescribeClientQuotasResponse:
    if not allowed_cluster(ctx, DESCRIBE_CONFIGS):
        return RESP.new(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            entries=None,
        )
    components: list[tuple[str, int, str | None]] = []
    for c in req.components or []:
        if c.match_type == 0 and c.match is None:
            return _invalid(f"Exact match of {c.entity_type} needs a name")
        if c.match_type in (1, 2) and c.match is not None:
            return _invalid(f"Unexpected match name for {c.entity_type} with match type {c.match_type}")
        components.append((c.entity_type, c.match_type, c.match))
    try:
        found = ctx.services.quotas.describe(components, bool(req.strict))
    except QuotaError as e:
        return _invalid(str(e))
    entries = [
        RESP.EntryData(
            entity=[RESP.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[RESP.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())],
        )
        for entity, values in sorted(found.items(), key=lambda kv: repr(kv[0]))
    ]
    return RESP.new(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)

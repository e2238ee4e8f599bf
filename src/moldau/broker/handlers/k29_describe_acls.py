"""DescribeAcls (key 29), v0-3 (v0: no pattern type, LITERAL implied; Kafka 4 keeps v1-3).

* Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED); without an authorizer SECURITY_DISABLED.
* The filter: resource type (ANY = all), name (null = all), pattern type (ANY, MATCH: the ACLs that would
  apply to that name, LITERAL, PREFIXED), principal and host (null = all), operation and permission (ANY).
* Bindings are grouped by resource pattern (type, name, pattern type) in the answer.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE, LITERAL, AclFilter, allowed_cluster


def acl_refusal(ctx: RequestContext, op: int) -> tuple[int, str | None] | None:
    """(error code, message) when the ACL APIs are refused: SECURITY_DISABLED without an authorizer,
    CLUSTER_AUTHORIZATION_FAILED without ``op`` on the cluster; None when allowed."""
    if ctx.services.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured."
    if not allowed_cluster(ctx, op):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return None


def request_filter(f: Any, version: int) -> AclFilter:
    pattern = f.pattern_type_filter if version >= 1 else LITERAL
    return AclFilter(resource_type=f.resource_type_filter, name=f.resource_name_filter, pattern_type=pattern,
                     principal=f.principal_filter, host=f.host_filter, operation=f.operation,
                     permission=f.permission_type)


@handler(api_key=29, min_version=0, max_version=3)
async def describe_acls(ctx: RequestContext, req: m.DescribeAclsRequest) -> m.DescribeAclsResponse:
    msg = m.DescribeAclsResponse
    resp = msg.new(throttle_time_ms=0, error_code=0, error_message=None, resources=[])
    refused = acl_refusal(ctx, DESCRIBE)
    if refused is not None:
        resp.error_code, resp.error_message = refused
        return resp
    authz = ctx.services.authorizer
    assert authz is not None  # acl_refusal answered SECURITY_DISABLED without an authorizer
    flt = request_filter(req, ctx.version)
    if flt.resource_type == 0 or flt.pattern_type == 0 or flt.operation == 0 or flt.permission == 0:
        resp.error_code = ErrorCode.INVALID_REQUEST
        resp.error_message = "The filter has an UNKNOWN field"
        return resp
    groups: dict[tuple[int, str, int], list[Any]] = {}
    for b in authz.describe(flt):
        if ctx.version == 0 and b.pattern_type != LITERAL:
            continue
        groups.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            msg.AclDescription(principal=b.principal, host=b.host, operation=b.operation,
                               permission_type=b.permission))
    resp.resources = [msg.DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt,
                                               acls=acls)
                      for (rt, name, pt), acls in groups.items()]
    return resp


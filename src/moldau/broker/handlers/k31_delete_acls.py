"""DeleteAcls (key 31), v0-3 (v0: LITERAL filters; Kafka 4 keeps v1-3).

* Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED per filter); without an authorizer
  SECURITY_DISABLED per filter.
* Each filter (as DescribeAcls') removes every binding it matches; the answer lists them per filter.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER
from .k29_describe_acls import acl_refusal, request_filter


@handler(api_key=31, min_version=0, max_version=3)
async def delete_acls(ctx: RequestContext, req: m.DeleteAclsRequest) -> m.DeleteAclsResponse:
    msg = m.DeleteAclsResponse
    authz = ctx.services.authorizer
    filters = req.filters or []
    refused = acl_refusal(ctx, ALTER)
    if refused is not None:
        code, text = refused
        return msg.new(throttle_time_ms=0, filter_results=[
            msg.DeleteAclsFilterResult(error_code=code, error_message=text,
                                       matching_acls=[]) for _ in filters])
    assert authz is not None  # acl_refusal answered SECURITY_DISABLED without an authorizer
    parsed = [request_filter(f, ctx.version) for f in filters]
    valid = [f for f in parsed if 0 not in (f.resource_type, f.pattern_type, f.operation, f.permission)]
    removed = iter(authz.delete(valid))
    results = []
    for f in parsed:
        if f not in valid:
            results.append(msg.DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST,
                                                      error_message="The filter has an UNKNOWN field",
                                                      matching_acls=[]))
            continue
        results.append(msg.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
            msg.DeleteAclsMatchingAcl(error_code=0, error_message=None, resource_type=b.resource_type,
                                      resource_name=b.name, pattern_type=b.pattern_type,
                                      principal=b.principal, host=b.host, operation=b.operation,
                                      permission_type=b.permission)
            for b in next(removed)]))
    return msg.new(throttle_time_ms=0, filter_results=results)

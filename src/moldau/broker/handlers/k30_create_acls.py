"""CreateAcls (key 30), v0-3 (v0: LITERAL patterns only; Kafka 4 keeps v1-3).

* Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED per creation); without an authorizer
  SECURITY_DISABLED per creation.
* Each creation is validated (concrete resource type, LITERAL/PREFIXED pattern, concrete operation and
  permission, Type:name principal, non-empty host, CLUSTER named kafka-cluster): INVALID_REQUEST with
  a message.
* Creating an existing binding succeeds (idempotent). Bindings are persisted before the answer.
* More than 10,000 creations in one request: POLICY_VIOLATION "Unable to perform excessively large batch
  operation." for each, nothing created (Kafka's controller, MAX_RECORDS_PER_USER_OP).
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..limits import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP
from ..registry import handler
from ..security.authorizer import ALTER, LITERAL, AclBinding
from .k29_describe_acls import acl_refusal


@handler(api_key=30, min_version=0, max_version=3)
async def create_acls(ctx: RequestContext, req: m.CreateAclsRequest) -> m.CreateAclsResponse:
    msg = m.CreateAclsResponse
    authz = ctx.services.authorizer
    creations = req.creations or []
    refused = acl_refusal(ctx, ALTER)
    if refused is not None:
        code, text = refused
        return msg.new(throttle_time_ms=0, results=[msg.AclCreationResult(error_code=code, error_message=text)
                                                    for _ in creations])
    assert authz is not None  # acl_refusal answered SECURITY_DISABLED without an authorizer
    if len(creations) > MAX_RECORDS_PER_USER_OP:  # Kafka's controller: one batch of records per request
        return msg.new(throttle_time_ms=0, results=[
            msg.AclCreationResult(error_code=ErrorCode.POLICY_VIOLATION, error_message=EXCESSIVE_BATCH)
            for _ in creations])
    bindings = [AclBinding(resource_type=c.resource_type, name=c.resource_name or "",
                           pattern_type=c.resource_pattern_type if ctx.version >= 1 else LITERAL,
                           principal=c.principal or "", host=c.host or "", operation=c.operation,
                           permission=c.permission_type) for c in creations]
    errors = authz.create(bindings)
    return msg.new(throttle_time_ms=0, results=[
        msg.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST if e else 0,
                              error_message=e) for e in errors])

"""DescribeUserScramCredentials (key 50), v0.

* Needs DESCRIBE on the cluster (top-level CLUSTER_AUTHORIZATION_FAILED).
* users null or empty: every user with a SCRAM credential; otherwise the named users, in request order.
  Unknown user (or one with only a PLAIN credential): RESOURCE_NOT_FOUND; a name given twice:
  DUPLICATE_RESOURCE, as Kafka.
* Each credential is described by mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) and iterations only.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl_mechanisms import SCRAM_MECHANISMS

from ..context import RequestContext
from ..registry import handler
from ..security import ensure_security
from ..security.authorizer import DESCRIBE, allowed_cluster


@handler(api_key=50, min_version=0, max_version=0)
async def describe_user_scram_credentials(ctx: RequestContext, req: m.DescribeUserScramCredentialsRequest
                                          ) -> m.DescribeUserScramCredentialsResponse:
    msg = m.DescribeUserScramCredentialsResponse
    resp = msg.new(throttle_time_ms=0, error_code=0, error_message=None, results=[])
    if not allowed_cluster(ctx, DESCRIBE):
        resp.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return resp
    users = ensure_security(ctx.services).credentials.users()
    scram = {u: {mech: it for mech, it in creds.items() if mech in SCRAM_MECHANISMS} for u,
             creds in users.items()}
    scram = {u: c for u, c in scram.items() if c}

    def infos(name: str) -> list[Any]:
        return [msg.CredentialInfo(mechanism=SCRAM_MECHANISMS[mech].code, iterations=it)
                for mech, it in sorted(scram[name].items())]

    if not req.users:
        resp.results = [msg.DescribeUserScramCredentialsResult(user=u, error_code=0, error_message=None,
                                                               credential_infos=infos(u)) for u in scram]
        return resp
    names = [u.name for u in req.users]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        if names.count(name) > 1:
            resp.results.append(msg.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                error_message="Cannot describe SCRAM credentials for the same user twice in a single "
                              f"request: {name}"))
        elif name not in scram:
            resp.results.append(msg.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                error_message=f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            resp.results.append(msg.DescribeUserScramCredentialsResult(
                user=name, error_code=0, error_message=None, credential_infos=infos(name)))
    return resp

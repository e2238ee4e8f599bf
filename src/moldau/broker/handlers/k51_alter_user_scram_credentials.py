"""AlterUserScramCredentials (key 51), v0.

* Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every user).
* Upsertions carry the salt, the iterations and the salted password (never the password); the broker keeps
  StoredKey and ServerKey only (moldau.broker.security.credentials).
* Per user, Kafka's checks: empty name or salt or salted password -> UNACCEPTABLE_CREDENTIAL; mechanism other
  than SCRAM-SHA-256/512 -> UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384 ->
  UNACCEPTABLE_CREDENTIAL; the same (user, mechanism) twice in one request -> DUPLICATE_RESOURCE; deleting a
  credential that does not exist -> RESOURCE_NOT_FOUND. A user's changes apply all or none; one result per
  user. Changes are persisted before the answer and apply to the next authentication.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl_mechanisms import MAX_ITERATIONS, MIN_ITERATIONS, scram_mechanism_name

from ..context import RequestContext
from ..registry import handler
from ..security import ensure_security
from ..security.authorizer import ALTER, allowed_cluster


@handler(api_key=51, min_version=0, max_version=0)
async def alter_user_scram_credentials(ctx: RequestContext, req: m.AlterUserScramCredentialsRequest
                                       ) -> m.AlterUserScramCredentialsResponse:
    msg = m.AlterUserScramCredentialsResponse
    deletions = req.deletions or []
    upsertions = req.upsertions or []
    users = list(dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions]))
    if not allowed_cluster(ctx, ALTER):
        return msg.new(throttle_time_ms=0, results=[
            msg.AlterUserScramCredentialsResult(user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                error_message=None)
            for u in users])
    store = ensure_security(ctx.services).credentials
    existing = store.users()
    errors: dict[str, tuple[int, str]] = {}
    seen: set[tuple[str, int]] = set()

    def fail(user: str, code: int, text: str) -> None:
        errors.setdefault(user, (code, text))

    for d in deletions:
        mech = scram_mechanism_name(d.mechanism)
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif (d.name, d.mechanism) in seen:
            fail(d.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif mech not in existing.get(d.name, {}):
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")
        seen.add((d.name, d.mechanism))
    for u in upsertions:
        mech = scram_mechanism_name(u.mechanism)
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif (u.name, u.mechanism) in seen:
            fail(u.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                 f"Too few iterations: {u.iterations} < {MIN_ITERATIONS}")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                 f"Too many iterations: {u.iterations} > {MAX_ITERATIONS}")
        elif not u.salt or not u.salted_password:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        seen.add((u.name, u.mechanism))
    changes: list[tuple[str, str, Any]] = []
    for d in deletions:
        if d.name not in errors:
            changes.append(("delete", d.name, scram_mechanism_name(d.mechanism)))
    for u in upsertions:
        if u.name not in errors:
            changes.append(("upsert", u.name, (scram_mechanism_name(u.mechanism), u.iterations, bytes(u.salt),
                                               bytes(u.salted_password))))
    if changes:
        store.apply(changes)
    results = []
    for user in users:
        code, text = errors.get(user, (0, None))
        results.append(msg.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=text))
    return msg.new(throttle_time_ms=0, results=results)

"""FindCoordinator (key 10), v0-6.

* One broker: the coordinator of every group and transactional id is this node, at the advertised listener of
  the listener the client connected on.
* v0: group key only; v1-3: ``key_type`` 0 group, 1 transaction; v4+: batched ``coordinator_keys``, one
  ``Coordinator`` entry per key. Other key types (2 = share groups) answer INVALID_REQUEST.
* A group key creates ``__consumer_offsets`` on first use (Kafka creates it here too, but answers
  COORDINATOR_NOT_AVAILABLE until it exists; moldau creates it synchronously and answers at once).
  The group's partition is abs(String.hashCode(group)) % offsets.topic.num.partitions (logged only: on one
  broker it does not change the answer).
* A transaction key creates ``__transaction_state`` on first use in the same way (moldau.broker.txn).
"""

from __future__ import annotations

import logging

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of, ensure_offsets_topic
from ..registry import handler
from ..security.authorizer import DESCRIBE, TRANSACTIONAL_ID, allowed
from ..security.authorizer import GROUP as ACL_GROUP

log = logging.getLogger(__name__)

GROUP, TRANSACTION = 0, 1


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None]:
    if key_type == GROUP and not allowed(ctx, DESCRIBE, ACL_GROUP, key):
        return E.GROUP_AUTHORIZATION_FAILED, None
    if key_type == TRANSACTION and not allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, key):
        return E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    if key_type == GROUP:
        gc = coordinator_of(ctx)
        if gc is None:
            return E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        try:
            ensure_offsets_topic(gc)
        except Exception as exc:  # pragma: no cover - metadata store refused
            log.warning("cannot create __consumer_offsets: %s", exc)
            return E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return E.NONE, None
    if key_type == TRANSACTION:
        tc = ctx.services.transaction_coordinator
        if tc is not None:
            try:
                tc.storage.ensure_topic()  # Kafka creates __transaction_state on first lookup too
            except Exception as exc:  # pragma: no cover - metadata store refused
                log.warning("cannot create __transaction_state: %s", exc)
                return E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return E.NONE, None
    return E.INVALID_REQUEST, f"Unsupported coordinator key type {key_type}"


@handler(api_key=10, min_version=0, max_version=6)
async def find_coordinator(ctx: RequestContext, req: m.FindCoordinatorRequest) -> m.FindCoordinatorResponse:
    msg = m.FindCoordinatorResponse
    svc = ctx.services
    lst = svc.advertised_listener(ctx.connection.listener_name)
    key_type = req.key_type if ctx.version >= 1 else GROUP
    if ctx.version < 4:
        error, message = _lookup(ctx, req.key, key_type)
        ok = error == E.NONE
        return msg.new(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            node_id=svc.node_id if ok else -1,
            host=lst.host if ok else "",
            port=lst.port if ok else -1,
        )
    coordinators = []
    for key in req.coordinator_keys:
        error, message = _lookup(ctx, key, key_type)
        ok = error == E.NONE
        coordinators.append(
            msg.Coordinator(
                key=key,
                node_id=svc.node_id if ok else -1,
                host=lst.host if ok else "",
                port=lst.port if ok else -1,
                error_code=error,
                error_message=message,
            )
        )
    return msg.new(throttle_time_ms=0, coordinators=coordinators)

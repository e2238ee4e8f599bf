"""AlterClientQuotas (key 49), v0-1.

* Needs ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED for every entry).
* Per entry: the entity (``user``, ``client-id``, both, or ``ip``; a null name is the type's default) and ops
  (key, value, remove). INVALID_REQUEST for an unknown entity type, a type given twice, ip combined with
  another type, an empty name, a key not valid for the entity (``producer_byte_rate``,
  ``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate`` for users and clients,
  ``connection_creation_rate`` for ips), a key given twice, a value not greater than 0, or the same entity
  twice in one request.
* Valid entries are applied together and persisted before the answer (``QuotaStore.alter``); they apply to
  the next request of every connection. ``validate_only``: checks only.
* More than 10,000 entries in one request: POLICY_VIOLATION "Unable to perform excessively large batch
  operation." for each, nothing altered (Kafka's controller, MAX_RECORDS_PER_USER_OP).
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..limits import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP
from ..quotas import Entity, QuotaError, describe_entity, make_entity, validate_quota
from ..registry import handler
from ..security.authorizer import ALTER_CONFIGS, allowed_cluster

log = logging.getLogger(__name__)

RESP = m.AlterClientQuotasResponse


def _parse(entry: Any) -> tuple[Entity, dict[str, float | None]]:
    entity = make_entity((e.entity_type, e.entity_name) for e in entry.entity or [])
    ops: dict[str, float | None] = {}
    for op in entry.ops or []:
        if op.key in ops:
            raise QuotaError(f"quota key {op.key!r} is given twice")
        if op.remove:
            validate_quota(entity, op.key, 1.0)  # the key must still be valid for the entity
            ops[op.key] = None
        else:
            validate_quota(entity, op.key, float(op.value))
            ops[op.key] = float(op.value)
    return entity, ops


@handler(api_key=49, min_version=0, max_version=1)
async def alter_client_quotas(ctx: RequestContext, req: m.AlterClientQuotasRequest
                              ) -> m.AlterClientQuotasResponse:
    entries = req.entries or []

    def result(entry: Any, code: int, text: str | None) -> Any:
        return RESP.EntryData(
            error_code=code,
            error_message=text,
            entity=[
                RESP.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity or []
            ],
        )

    if not allowed_cluster(ctx, ALTER_CONFIGS):
        return RESP.new(
            throttle_time_ms=0,
            entries=[result(e, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for e in entries],
        )
    if len(entries) > MAX_RECORDS_PER_USER_OP:  # Kafka's controller: one batch of records per request
        return RESP.new(throttle_time_ms=0, entries=[
            result(e, ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH) for e in entries])
    out: list[Any] = []
    changes: list[tuple[Entity, dict[str, float | None]]] = []
    seen: dict[Entity, int] = {}
    for entry in entries:
        try:
            entity, ops = _parse(entry)
        except (QuotaError, ValueError) as e:
            out.append(result(entry, ErrorCode.INVALID_REQUEST, str(e)))
            continue
        if entity in seen:
            out.append(result(entry, ErrorCode.INVALID_REQUEST, f"{describe_entity(entity)} is given twice"))
            continue
        seen[entity] = len(out)
        out.append(result(entry, 0, None))
        changes.append((entity, ops))
    if changes and not req.validate_only:
        try:
            ctx.services.quotas.alter(changes)
        except OSError as e:
            log.error("cannot persist client quotas: %s", e)
            for entity, _ in changes:
                r = out[seen[entity]]
                r.error_code, r.error_message = (
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"cannot persist the quotas: {e}",
                )
            return RESP.new(throttle_time_ms=0, entries=out)
        for entity, ops in changes:
            log.info(
                "client quotas of %s altered: %s",
                describe_entity(entity),
                ", ".join(f"{k}={'(removed)' if v is None else v}" for k, v in ops.items()),
            )
    return RESP.new(throttle_time_ms=0, entries=out)

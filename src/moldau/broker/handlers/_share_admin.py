"""What the share-group offset admin APIs (k90-k92) share: the group-level checks."""

from __future__ import annotations

import uuid
from typing import Any

from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..security.authorizer import GROUP as ACL_GROUP
from ..security.authorizer import allowed
from ..share import ShareService

ZERO_UUID = uuid.UUID(int=0)  # the topic id of an unknown topic


def group_error(ctx: RequestContext, group_id: str, operation: int, *, empty: bool) -> tuple[int, str | None]:
    """The group-level error of a share-group admin request on ``group_id``; ``empty``: the group must have
    no members (NON_EMPTY_GROUP), as Kafka's AlterShareGroupOffsets / DeleteShareGroupOffsets."""
    svc = ctx.services.share
    gc = coordinator_of(ctx)
    if not allowed(ctx, operation, ACL_GROUP, group_id):
        return E.GROUP_AUTHORIZATION_FAILED, None
    if svc is None or gc is None or not svc.enabled:
        return E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
    if not group_id:
        return E.INVALID_GROUP_ID, "The group id must not be empty."
    if not gc.owns(group_id):
        return E.NOT_COORDINATOR, None
    if gc.groups.get(group_id) is not None:
        return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    g = svc.groups.groups.get(group_id)
    if empty and g is not None and g.members:
        return E.NON_EMPTY_GROUP, f"The share group {group_id} has members."
    return E.NONE, None


def checked_empty_group(ctx: RequestContext, msg: Any, group_id: str, operation: int
                        ) -> tuple[ShareService | None, Any]:
    """(the share service, None) when ``group_id`` is an empty share group here; else (None, the response
    carrying the group's error) (AlterShareGroupOffsets, DeleteShareGroupOffsets)."""
    code, text = group_error(ctx, group_id, operation, empty=True)
    if code:
        return None, msg.new(throttle_time_ms=0, error_code=code, error_message=text, responses=[])
    return ctx.services.share, None


def named_topics(ctx: RequestContext, topics: list[Any] | None) -> list[tuple[Any, Any]]:
    """Each request topic (a ``topic_name`` field) with its metadata (None: unknown)."""
    return [(t, ctx.services.metadata.get(t.topic_name)) for t in topics or []]

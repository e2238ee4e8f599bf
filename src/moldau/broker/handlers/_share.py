"""What ShareFetch (k78) and ShareAcknowledge (k79) share: session resolution and acknowledgements."""

from __future__ import annotations

import uuid
from typing import Any

from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError

from ..context import RequestContext
from ..security.authorizer import GROUP, READ, TOPIC, allowed


def check_request(ctx: RequestContext, group_id: str | None, member_id: str | None) -> tuple[int, str | None]:
    """Top-level checks of a share request: (error code, message)."""
    svc = ctx.services.share
    if svc is None or not svc.enabled:
        return E.UNSUPPORTED_VERSION, "Share groups are not enabled on this broker."
    if not group_id:
        return E.INVALID_REQUEST, "GroupId must be set."
    if not member_id:
        return E.INVALID_REQUEST, "MemberId must be set."
    if not allowed(ctx, READ, GROUP, group_id):
        return E.GROUP_AUTHORIZATION_FAILED, None
    return E.NONE, None


def session_for(ctx: RequestContext, group_id: str, member_id: str, epoch: int, *, may_open: bool) -> Any:
    """The share session of (group, member) for a request at ``epoch``; raises KafkaError
    (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED, INVALID_REQUEST)."""
    svc = ctx.services.share
    assert svc is not None
    if epoch == 0:
        if not may_open:
            raise KafkaError.for_code(
                E.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a session."
            )
        session = svc.sessions.open(group_id, member_id)
        session.connection = ctx.connection
        return session
    if epoch < -1:
        raise KafkaError.for_code(E.INVALID_SHARE_SESSION_EPOCH, f"Invalid share session epoch {epoch}.")
    return svc.sessions.get(group_id, member_id, epoch)


def topic_name(ctx: RequestContext, topic_id: uuid.UUID) -> tuple[str | None, int]:
    info = ctx.services.metadata.get_by_id(topic_id)
    if info is None:
        return None, E.UNKNOWN_TOPIC_ID
    if not allowed(ctx, READ, TOPIC, info.name):
        return None, E.TOPIC_AUTHORIZATION_FAILED
    return info.name, E.NONE


async def acknowledge(
    ctx: RequestContext, group_id: str, member_id: str, topic: str, index: int, batches: Any
) -> int:
    svc = ctx.services.share
    assert svc is not None
    p = ctx.services.replica_manager.get_partition(topic, index)
    if p is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    return await svc.acknowledge(
        group_id,
        member_id,
        topic,
        index,
        [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches],
    )

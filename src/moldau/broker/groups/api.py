"""Small helpers shared by the group handlers (k08..k16, k42, k47, k68, k69)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..context import RequestContext
    from .coordinator import GroupCoordinator

# AclOperations of a group: READ(3), DELETE(6), DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11)
GROUP_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def group_authorized_operations(ctx: RequestContext, group_id: str, requested: bool) -> int:
    """The authorized_operations field of a described group: INT32_MIN unless requested; every group operation
    when no authorizer is configured; else what the authorizer allows the caller on the group."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if ctx.services.authorizer is None:
        return GROUP_AUTHORIZED_OPERATIONS
    from ..security.authorizer import GROUP, authorized_operations

    return authorized_operations(ctx, GROUP, group_id)


def coordinator_of(ctx: RequestContext) -> GroupCoordinator | None:
    """The broker's group coordinator, or None when it is not running (answer COORDINATOR_NOT_AVAILABLE)."""
    return ctx.services.group_coordinator


def ensure_offsets_topic(gc: GroupCoordinator) -> None:
    """Create ``__consumer_offsets`` when missing; raises when the metadata store refuses, which the caller
    answers as COORDINATOR_NOT_AVAILABLE."""
    gc.ensure_topic()


def client_host(ctx: RequestContext) -> str:
    """Kafka reports the client address as InetAddress.toString(): "/127.0.0.1"."""
    peer = getattr(ctx.connection, "peer", None)
    host = peer[0] if peer else ""
    return f"/{host}"


def client_id(ctx: RequestContext) -> str:
    return ctx.client_id or ""


def topic_partitions(ctx: RequestContext, topic: str) -> int | None:
    t = ctx.services.metadata.get(topic)
    return None if t is None else int(t.num_partitions)


def topic_by_id(ctx: RequestContext, topic_id: Any) -> Any:
    return ctx.services.metadata.get_by_id(topic_id)



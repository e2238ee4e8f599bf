"""What the share-state RPCs (k83-k87, KIP-932's persister interface to the share coordinator) share: the
checks and the walk over (topic id, partition) keys, each answered on its own."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError, error_code_of
from moldau.protocol.share_state import ShareKey

from ..context import RequestContext
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster


async def per_partition(ctx: RequestContext, req: Any, msg: Any, result_struct: str,
                        op: Callable[[ShareKey, Any], Awaitable[dict[str, Any]]]
                        ) -> Any:
    """Answer ``req`` (GroupId, Topics[TopicId, Partitions[Partition, ...]]) with ``op`` per partition:
    ``op(key, partition_request) -> fields`` of its PartitionResult; a KafkaError is that partition's error.
    CLUSTER_AUTHORIZATION_FAILED without ClusterAction (brokers call these), INVALID_REQUEST without a
    group."""
    svc = ctx.services.share
    outer = msg.classes[result_struct]
    inner = msg.classes["PartitionResult"]
    results = []
    for t in req.topics or []:
        parts = []
        for p in t.partitions or []:
            fields: dict[str, Any] = {}
            code: int
            text: str | None
            if not allowed_cluster(ctx, CLUSTER_ACTION):
                code, text = E.CLUSTER_AUTHORIZATION_FAILED, None
            elif svc is None or not svc.enabled:
                code, text = E.COORDINATOR_NOT_AVAILABLE, "The share coordinator is not available."
            elif not req.group_id:
                code, text = E.INVALID_REQUEST, "GroupId must be set."
            else:
                key = ShareKey(req.group_id, t.topic_id, p.partition)
                try:
                    await svc.coordinator_ready(key, timeout=5.0)
                    fields = await op(key, p)
                    code, text = E.NONE, None
                except KafkaError as e:
                    code, text = e.code, str(e)
                except Exception as e:  # pragma: no cover - logged by the coordinator
                    code, text = error_code_of(e, E.UNKNOWN_SERVER_ERROR), None
            parts.append(inner(partition=p.partition, error_code=code, error_message=text, **fields))
        results.append(outer(topic_id=t.topic_id, partitions=parts))
    return msg.new(results=results)

"""FindCoordinator (key 10), v0-6.

* The coordinator of a group (transactional id) is the leader of its partition of ``__consumer_offsets``
  (``__transaction_state``), at its endpoint for the listener the client connected on: in a cluster from the
  metadata store's partition states (COORDINATOR_NOT_AVAILABLE while the partition has no leader; the group
  coordinator answers NOT_COORDINATOR for groups of partitions it does not lead, docs/cluster.md); on one
  broker this node.
* v0: group key only; v1-3: ``key_type`` 0 group, 1 transaction; v4+: batched ``coordinator_keys``, one
  ``Coordinator`` entry per key. Key type 2 (v6: the share coordinator of KIP-932) takes
  ``group:topicId:partition`` and answers the leader of that key's ``__share_group_state`` partition
  (ClusterAction on the cluster, as Kafka: brokers ask it; INVALID_REQUEST for a malformed key); other key
  types answer INVALID_REQUEST.
* A group key creates ``__consumer_offsets`` on first use (Kafka creates it here too, but answers
  COORDINATOR_NOT_AVAILABLE until it exists; moldau creates it synchronously and answers at once).
  The group's partition is abs(String.hashCode(group)) % offsets.topic.num.partitions.
* A transaction key creates ``__transaction_state`` on first use in the same way (moldau.broker.txn).
"""

from __future__ import annotations

import logging

from moldau.log.checkpoint import deferred_writes
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of, ensure_offsets_topic
from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, DESCRIBE, TRANSACTIONAL_ID, allowed, allowed_cluster
from ..security.authorizer import GROUP as ACL_GROUP

log = logging.getLogger(__name__)

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _node_of(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str, int] | None:
    """(node id, host, port) of the coordinator of ``key``: the leader of its partition of the internal topic
    (the metadata store's partition state, in a cluster); this broker when the store has no partition state
    (one node). None while that partition has no leader."""
    from moldau.protocol.consumer_offsets import partition_for

    from ..metadata import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC

    svc = ctx.services
    store = svc.metadata
    topic = {GROUP: OFFSETS_TOPIC, SHARE: SHARE_STATE_TOPIC}.get(key_type, TRANSACTION_STATE_TOPIC)
    t = store.get(topic)
    view = store.partition_state(topic, partition_for(key, t.num_partitions)) if t is not None else None
    if view is None:
        lst = svc.advertised_listener(ctx.connection.listener_name)
        return svc.node_id, lst.host, lst.port
    for node_id, host, port, _rack in store.live_brokers(ctx.connection.listener_name):
        if node_id == view.leader:
            return node_id, host, port
    return None


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None]:
    if key_type == GROUP and not allowed(ctx, DESCRIBE, ACL_GROUP, key):
        return E.GROUP_AUTHORIZATION_FAILED, None
    if key_type == TRANSACTION and not allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, key):
        return E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    if key_type == SHARE:
        return _share_lookup(ctx, key)
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
                tc.ensure_topic()  # Kafka creates __transaction_state on first lookup too
            except Exception as exc:  # pragma: no cover - metadata store refused
                log.warning("cannot create __transaction_state: %s", exc)
                return E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return E.NONE, None
    return E.INVALID_REQUEST, f"Unsupported coordinator key type {key_type}"


def _share_lookup(ctx: RequestContext, key: str) -> tuple[int, str | None]:
    """FindCoordinator key type 2: ``group:topicId:partition`` (Kafka's SharePartitionKey)."""
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        return E.CLUSTER_AUTHORIZATION_FAILED, None
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].lstrip("-").isdigit():
        return E.INVALID_REQUEST, f"Invalid share coordinator key {key!r}: expected group:topicId:partition"
    sc = ctx.services.share
    if sc is None or not sc.enabled:
        return E.COORDINATOR_NOT_AVAILABLE, "The share coordinator is not available."
    return E.NONE, None


@handler(api_key=10, min_version=0, max_version=6)
async def find_coordinator(ctx: RequestContext, req: m.FindCoordinatorRequest) -> m.FindCoordinatorResponse:
    # the first lookup creates __consumer_offsets / __transaction_state (50 partitions): their files are
    # fsynced in the writer thread, not on the event loop (deferred_writes, moldau.log.checkpoint)
    with deferred_writes() as batch:
        resp = _answer(ctx, req)
    await batch.flush()
    return resp


def _answer(ctx: RequestContext, req: m.FindCoordinatorRequest) -> m.FindCoordinatorResponse:
    msg = m.FindCoordinatorResponse
    key_type = req.key_type if ctx.version >= 1 else GROUP
    if ctx.version < 4:
        error, message, node = _find(ctx, req.key, key_type)
        return msg.new(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            node_id=node[0],
            host=node[1],
            port=node[2],
        )
    coordinators = []
    for key in req.coordinator_keys:
        error, message, node = _find(ctx, key, key_type)
        coordinators.append(
            msg.Coordinator(
                key=key,
                node_id=node[0],
                host=node[1],
                port=node[2],
                error_code=error,
                error_message=message,
            )
        )
    return msg.new(throttle_time_ms=0, coordinators=coordinators)


def _find(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None, tuple[int, str, int]]:
    error, message = _lookup(ctx, key, key_type)
    node = _node_of(ctx, key, key_type) if error == E.NONE else None
    if error == E.NONE and node is None:
        error, message = E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
    log.debug("FindCoordinator %s (key type %d) from %s: error %d, node %s", key, key_type,
              ctx.client_id, error, node[0] if node is not None else -1)
    return error, message, node if node is not None else (-1, "", -1)

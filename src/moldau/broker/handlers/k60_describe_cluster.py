"""DescribeCluster (key 60), v0-2.

* cluster id, controller id and every live broker with the host and port advertised for the listener the
  request came in on (the metadata store's view: this node alone without a cluster; docs/cluster.md).
* v1+: endpoint_type 1 (BROKER) answered; 2 (CONTROLLER) gets MISMATCHED_ENDPOINT_TYPE, as a Kafka broker
  does (moldau has no separate controller listener).
* v2+: is_fenced false; include_fenced_brokers changes nothing (no fenced brokers).
* include_cluster_authorized_operations: without an authorizer every cluster operation is allowed, so the
  bit set of Kafka's supported cluster operations; otherwise INT32_MIN (not requested).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.protocol import messages as m
from moldau.protocol.constants import EndpointType
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER, CLUSTER_NAME, authorized_operations

if TYPE_CHECKING:
    from ..config import BrokerConfig

log = logging.getLogger(__name__)

REQ = m.DescribeClusterRequest
RESP = m.DescribeClusterResponse

AUTHORIZED_OPERATIONS_OMITTED = -2147483648

# AclOperation codes Kafka supports on the CLUSTER resource: CREATE 5, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12)


def cluster_authorized_operations() -> int:
    bits = 0
    for op in CLUSTER_OPERATIONS:
        bits |= 1 << op
    return bits


def advertised_endpoint(ctx: RequestContext) -> tuple[str, int, str | None]:
    """(host, port, rack) this broker advertises on the request's listener."""
    svc = ctx.services
    listener = ctx.connection.listener_name
    rack = _rack(svc.config)
    ep = svc.advertised_listener(listener)
    if ep is not None and ep.port:
        return str(ep.host), int(ep.port), rack
    candidates = list(svc.config.advertised_listeners)
    chosen = next((c for c in candidates if c.name == listener), candidates[0])
    host, port = chosen.host, chosen.port
    if port == 0 or not host or host == "0.0.0.0":
        local = ctx.connection.local_address()
        if local:
            host = host if host and host != "0.0.0.0" else local[0]
            port = port or local[1]
    return str(host), int(port), rack


def _rack(config: BrokerConfig) -> str | None:
    try:
        rack = config.get("broker.rack")
    except Exception:  # noqa: BLE001
        return None
    return rack or None


@handler(60, REQ.min_version, REQ.max_version)
async def describe_cluster(ctx: RequestContext, req: m.DescribeClusterRequest) -> m.DescribeClusterResponse:
    endpoint_type: int = EndpointType.BROKER
    if ctx.version >= 1:
        endpoint_type = req.endpoint_type
    cluster_id = str(ctx.services.cluster_id)
    node_id = ctx.services.node_id
    if endpoint_type != EndpointType.BROKER:
        return RESP.new(
            throttle_time_ms=0, error_code=int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                          "type CONTROLLER",
            endpoint_type=EndpointType.BROKER, cluster_id=cluster_id, controller_id=-1, brokers=[],
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    host, port, rack = advertised_endpoint(ctx)
    ops = cluster_authorized_operations() if req.include_cluster_authorized_operations \
        else AUTHORIZED_OPERATIONS_OMITTED
    if ctx.services.authorizer is not None and req.include_cluster_authorized_operations:
        ops = authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
    store = ctx.services.metadata
    live = store.live_brokers(ctx.connection.listener_name)
    brokers = [RESP.DescribeClusterBroker(broker_id=nid, host=h, port=pt, rack=r, is_fenced=False)
               for nid, h, pt, r in live if nid != node_id]
    brokers.append(RESP.DescribeClusterBroker(broker_id=node_id, host=host, port=port, rack=rack,
                                              is_fenced=False))
    brokers.sort(key=lambda b: b.broker_id)
    return RESP.new(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=EndpointType.BROKER,
        cluster_id=cluster_id, controller_id=store.controller_id(), brokers=brokers,
        cluster_authorized_operations=ops)

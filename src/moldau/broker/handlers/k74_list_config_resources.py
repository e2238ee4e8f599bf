"""ListConfigResources (key 74), v0-1 (v0 was ListClientMetricsResources; v1, Kafka 4.1, adds resource types).

* Needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka.
* v0 lists client-metrics resources only. moldau keeps no ``client-metrics`` configs (DescribeConfigs and
  the alter APIs do not serve the CLIENT_METRICS resource type), so v0 answers an empty list.
* v1: the requested resource types, an empty list meaning every type Kafka lists: GROUP (32) and
  CLIENT_METRICS (16) - none in moldau, which stores no group or client-metrics configs -, BROKER_LOGGER (8)
  and BROKER (4) - one resource per live broker, named by its id -, TOPIC (2) - every topic. Any other type:
  UNSUPPORTED_VERSION for the whole request, as Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.constants import ConfigResourceType
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE_CONFIGS, allowed

log = logging.getLogger(__name__)

REQ = m.ListConfigResourcesRequest
RESP = m.ListConfigResourcesResponse

# the types Kafka 4.1 lists, in the order it answers them
SUPPORTED_TYPES = (ConfigResourceType.GROUP, ConfigResourceType.CLIENT_METRICS,
                   ConfigResourceType.BROKER_LOGGER, ConfigResourceType.BROKER, ConfigResourceType.TOPIC)


def _resources(ctx: RequestContext, resource_type: int) -> list[str]:
    store = ctx.services.metadata
    if resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
        ids = {nid for nid, _h, _p, _r in store.live_brokers(ctx.connection.listener_name)}
        ids.add(ctx.services.node_id)
        return [str(nid) for nid in sorted(ids)]
    if resource_type == ConfigResourceType.TOPIC:
        return sorted(store.topics)
    return []  # GROUP, CLIENT_METRICS: moldau stores no configs of these types


@handler(74, REQ.min_version, REQ.max_version)
async def list_config_resources(ctx: RequestContext, req: m.ListConfigResourcesRequest
                                ) -> m.ListConfigResourcesResponse:
    if not allowed(ctx, DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME):
        return RESP.new(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        config_resources=[])
    if ctx.version == 0:
        return RESP.new(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=[])
    requested = list(req.resource_types) or [int(t) for t in SUPPORTED_TYPES]
    unsupported = [t for t in requested if t not in SUPPORTED_TYPES]
    if unsupported:
        log.info("ListConfigResources: unsupported resource types %s", unsupported)
        return RESP.new(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
    out: list[Any] = []
    for rtype in SUPPORTED_TYPES:
        if int(rtype) in requested:
            out.extend(RESP.ConfigResource(resource_name=name, resource_type=int(rtype))
                       for name in _resources(ctx, rtype))
    return RESP.new(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=out)

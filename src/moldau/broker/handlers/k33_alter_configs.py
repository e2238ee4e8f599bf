"""AlterConfigs (key 33), v0-2: the legacy, non-incremental API.

* TOPIC (2): the given configs replace the topic's whole set of overrides (keys not given go back to their
  defaults), validated like CreateTopics (INVALID_CONFIG naming the key).
* BROKER (4): resource name = this node id (per-broker dynamic configs) or "" (cluster-wide dynamic
  defaults); the given keys replace that level.  Only keys moldau applies at runtime are accepted (the
  topic configs' broker synonyms such as ``log.retention.ms``); others are refused naming the key
  (INVALID_REQUEST for a known static key, INVALID_CONFIG for an unknown one).
* Changes persist (metadata store / ``__moldau_dynamic_configs.json``) and apply to the open logs at once.
* ``validate_only``: checks only.  A resource given twice: INVALID_REQUEST.  Unknown resource type:
  UNSUPPORTED_VERSION as Kafka; BROKER_LOGGER and other known types: INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable

from moldau.protocol import messages as m
from moldau.protocol.constants import ConfigResourceType
from moldau.protocol.errors import ErrorCode, KafkaError

from .. import topic_config as tc
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER_CONFIGS, require_config_resource
from ._common import attempt
from ._common import err as _err
from .k32_describe_configs import alter_broker_target

log = logging.getLogger(__name__)

REQ = m.AlterConfigsRequest
RESP = m.AlterConfigsResponse

KNOWN_RESOURCE_TYPES = {2, 4, 8, 16, 32}


def _alter(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    require_config_resource(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
    # a name given twice: the last value wins, as in Kafka's legacy AlterConfigs (a map is built from the
    # list; librdkafka's tests send every described config plus the changed ones). IncrementalAlterConfigs
    # refuses duplicates.
    configs = {c.name: c.value for c in res.configs or []}
    if res.resource_type == ConfigResourceType.TOPIC:
        tc.broker_dynamic_configs(ctx.services)
        tc.topic_for_alter(ctx.services, res.resource_name)
        new = tc.replace_configs(configs)
        tc.alter_topic_configs(ctx.services, res.resource_name, new, validate_only=validate_only)
        log.info("topic %s configs replaced%s: %s", res.resource_name, " (validate only)" * validate_only,
                 new)
        return
    if res.resource_type == ConfigResourceType.BROKER:
        target = alter_broker_target(ctx, res.resource_name)
        new_level: dict[str, str] = {}
        for key, value in configs.items():
            tc.validate_broker_config(key, value)
            new_level[key] = tc.to_kafka_string(tc.parse_value(tc.broker_key_type(key), key, value)) or ""
        if not validate_only:
            tc.set_dynamic_broker_level(ctx.services, cluster_default=target is None, configs=new_level,
                                        broker_id=target)
            log.info("dynamic broker configs (%s) replaced: %s",
                     "cluster default" if target is None else f"broker {target}", new_level)
        return
    if res.resource_type not in KNOWN_RESOURCE_TYPES:
        raise _err(ErrorCode.UNSUPPORTED_VERSION, f"Unknown resource type {res.resource_type}.")
    raise _err(ErrorCode.INVALID_REQUEST, f"Unexpected resource type {res.resource_type}.")


def answer_resources(ctx: RequestContext, req: Any, resp_msg: Any, alter: Callable[[Any, Any, bool], None],
                     logger: logging.Logger, what: str, *, log_refusal: bool) -> Any:
    """The AlterConfigs / IncrementalAlterConfigs response: ``alter(ctx, resource, validate_only)`` for each
    resource, its KafkaError (or UNKNOWN_SERVER_ERROR for anything else) answered in that resource's result;
    a resource given twice: INVALID_REQUEST."""
    validate_only = bool(req.validate_only)
    seen = Counter((res.resource_type, res.resource_name) for res in req.resources)
    results = []
    for res in req.resources:
        if seen[(res.resource_type, res.resource_name)] > 1:
            exc: KafkaError | None = _err(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
        else:
            _, exc = attempt(logger, f"{what} {res.resource_type}/{res.resource_name}", alter, ctx, res,
                             validate_only, log_refusal=log_refusal)
        results.append(resp_msg.AlterConfigsResourceResponse(
            error_code=0 if exc is None else tc.error_code_of(exc),
            error_message=None if exc is None else tc.error_message_of(exc),
            resource_type=res.resource_type, resource_name=res.resource_name))
    return resp_msg.new(throttle_time_ms=0, responses=results)


@handler(33, REQ.min_version, REQ.max_version)
async def alter_configs(ctx: RequestContext, req: m.AlterConfigsRequest) -> m.AlterConfigsResponse:
    return answer_resources(ctx, req, RESP, _alter, log, "alter configs", log_refusal=False)

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
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError

from .. import topic_config as tc
from ..registry import handler
from ..security.authorizer import ALTER_CONFIGS, require_config_resource
from .k32_describe_configs import BROKER, TOPIC, check_broker_resource

log = logging.getLogger(__name__)

REQ = m.AlterConfigsRequest
RESP = m.AlterConfigsResponse

KNOWN_RESOURCE_TYPES = {2, 4, 8, 16, 32}


def _err(code: ErrorCode, message: str) -> KafkaError:
    return KafkaError.for_code(int(code), message)


def _alter(ctx: Any, res: Any, validate_only: bool) -> None:
    require_config_resource(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
    configs = {c.name: c.value for c in res.configs or []}
    if len(configs) != len(res.configs or []):
        raise _err(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    if res.resource_type == TOPIC:
        tc.broker_dynamic_configs(ctx.broker)
        tc.topic_for_alter(ctx.broker, res.resource_name)
        new = tc.replace_configs(configs)
        tc.alter_topic_configs(ctx.broker, res.resource_name, new, validate_only=validate_only)
        log.info("topic %s configs replaced%s: %s", res.resource_name, " (validate only)" * validate_only, new)
        return
    if res.resource_type == BROKER:
        cluster_default = check_broker_resource(ctx, res.resource_name)
        new_level: dict[str, str] = {}
        for key, value in configs.items():
            tc.validate_broker_config(key, value)
            new_level[key] = tc.to_kafka_string(tc.parse_value(tc.broker_key_type(key), key, value)) or ""
        if not validate_only:
            tc.set_dynamic_broker_level(ctx.broker, cluster_default=cluster_default, configs=new_level)
            log.info("dynamic broker configs (%s) replaced: %s",
                     "cluster default" if cluster_default else "this broker", new_level)
        return
    if res.resource_type not in KNOWN_RESOURCE_TYPES:
        raise _err(ErrorCode.UNSUPPORTED_VERSION, f"Unknown resource type {res.resource_type}.")
    raise _err(ErrorCode.INVALID_REQUEST, f"Unexpected resource type {res.resource_type}.")


@handler(33, REQ.min_version, REQ.max_version)
async def alter_configs(ctx: Any, req: Any) -> Any:
    validate_only = bool(req.validate_only)
    seen: dict[tuple[int, str], int] = {}
    for res in req.resources:
        key = (res.resource_type, res.resource_name)
        seen[key] = seen.get(key, 0) + 1
    results = []
    for res in req.resources:
        try:
            if seen[(res.resource_type, res.resource_name)] > 1:
                raise _err(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            _alter(ctx, res, validate_only)
        except KafkaError as exc:
            results.append(RESP.AlterConfigsResourceResponse(
                error_code=tc.error_code_of(exc), error_message=tc.error_message_of(exc),
                resource_type=res.resource_type, resource_name=res.resource_name))
            continue
        except Exception as exc:  # noqa: BLE001 - answer it, keep the connection
            log.exception("altering configs of %s/%s failed", res.resource_type, res.resource_name)
            results.append(RESP.AlterConfigsResourceResponse(
                error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR), error_message=str(exc),
                resource_type=res.resource_type, resource_name=res.resource_name))
            continue
        results.append(RESP.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name))
    return RESP.new(throttle_time_ms=0, responses=results)

"""IncrementalAlterConfigs (key 44), v0-1.

Operations: SET (0), DELETE (1), APPEND (2), SUBTRACT (3).  APPEND / SUBTRACT work on LIST configs
(``cleanup.policy``, ``log.cleanup.policy``, the throttled-replica lists): they start from the current
override, else the effective inherited value, add missing / remove present items; on other types they are
refused with INVALID_CONFIG.  A key given twice in one resource: INVALID_REQUEST.

* TOPIC (2): applied to the topic's overrides, validated (INVALID_CONFIG naming the key), persisted through
  the metadata store and applied to the open partition logs at once.
* BROKER (4): resource name = this node id (per-broker) or "" (cluster-wide default).  Only keys moldau
  applies at runtime (the topic configs' highest-priority broker synonyms: ``log.retention.ms``,
  ``log.segment.bytes``, ``log.cleanup.policy``, ``message.max.bytes``, ...) are accepted; others are
  refused naming the key (INVALID_REQUEST for a known static key, INVALID_CONFIG for an unknown one).  They
  become the defaults of every topic without an override, at once.
* BROKER_LOGGER (8): SET a logger's level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF), DELETE resets it
  to inherit (not allowed for root); APPEND / SUBTRACT: INVALID_REQUEST; unknown logger: INVALID_CONFIG.
* ``validate_only``: checks only.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.constants import ConfigResourceType
from moldau.protocol.errors import ErrorCode

from .. import topic_config as tc
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER_CONFIGS, require_config_resource
from ._common import err as _err
from .k32_describe_configs import LOG4J_LEVELS, alter_broker_target, check_broker_resource
from .k33_alter_configs import answer_resources

log = logging.getLogger(__name__)

REQ = m.IncrementalAlterConfigsRequest
RESP = m.IncrementalAlterConfigsResponse

KNOWN_RESOURCE_TYPES = {2, 4, 8, 16, 32}


def _alter_loggers(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    check_broker_resource(ctx, res.resource_name, allow_empty=False)
    changes: list[tuple[logging.Logger, int]] = []
    seen: set[str] = set()
    for c in res.configs or []:
        if c.name in seen:
            raise _err(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {c.name}")
        seen.add(c.name)
        if c.name == "root":
            logger = logging.getLogger()
        else:
            obj = logging.root.manager.loggerDict.get(c.name)
            if not isinstance(obj, logging.Logger):
                raise _err(ErrorCode.INVALID_CONFIG, f"Logger {c.name} does not exist!")
            logger = obj
        op = c.config_operation
        if op == tc.AlterConfigOp.SET:
            level = LOG4J_LEVELS.get(c.value or "")
            if level is None:
                raise _err(ErrorCode.INVALID_CONFIG,
                           f"Cannot set the log level of {c.name} to {c.value} as it is not a supported "
                           "log level. "
                           f"Valid log4j levels are {', '.join(LOG4J_LEVELS)}")
            changes.append((logger, level))
        elif op == tc.AlterConfigOp.DELETE:
            if c.name == "root":
                raise _err(ErrorCode.INVALID_REQUEST,
                           "Removing the log level of the root logger is not allowed")
            changes.append((logger, logging.NOTSET))
        elif op in (tc.AlterConfigOp.APPEND, tc.AlterConfigOp.SUBTRACT):
            raise _err(ErrorCode.INVALID_REQUEST,
                       f"{tc.AlterConfigOp(op).name} operation is not allowed for the BROKER_LOGGER resource")
        else:
            raise _err(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation type {op}")
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)
            log.info("logger %s level set to %s", logger.name or "root", logging.getLevelName(level))


def _alter(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    require_config_resource(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
    ops = [(c.name, c.config_operation, c.value) for c in res.configs or []]
    if res.resource_type == ConfigResourceType.TOPIC:
        tc.broker_dynamic_configs(ctx.services)
        info = tc.topic_for_alter(ctx.services, res.resource_name)
        new = tc.apply_incremental_ops(info.configs, ops, ctx.services.config)
        tc.alter_topic_configs(ctx.services, res.resource_name, new, validate_only=validate_only)
        log.info("topic %s configs%s: %s", res.resource_name, " (validate only)" * validate_only, new)
        return
    if res.resource_type == ConfigResourceType.BROKER:
        target = alter_broker_target(ctx, res.resource_name)
        current = tc.broker_config_store(ctx.services).level(target)
        new_level = tc.apply_broker_ops(current, ops, ctx.services.config)
        if not validate_only:
            tc.set_dynamic_broker_level(ctx.services, cluster_default=target is None, configs=new_level,
                                        broker_id=target)
            log.info("dynamic broker configs (%s): %s", "cluster default" if target is None
                     else f"broker {target}", new_level)
        return
    if res.resource_type == ConfigResourceType.BROKER_LOGGER:
        _alter_loggers(ctx, res, validate_only)
        return
    if res.resource_type == ConfigResourceType.GROUP:
        svc = ctx.services.share
        if svc is None:
            raise _err(ErrorCode.INVALID_REQUEST, "Group configs are not available (no share coordinator).")
        if not res.resource_name:
            raise _err(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
        svc.configs.alter(res.resource_name, ops, validate_only)
        log.info("group %s configs%s: %s", res.resource_name, " (validate only)" * validate_only, ops)
        return
    if res.resource_type not in KNOWN_RESOURCE_TYPES:
        raise _err(ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}.")
    raise _err(ErrorCode.INVALID_REQUEST, f"Unexpected resource type {res.resource_type}.")


@handler(44, REQ.min_version, REQ.max_version)
async def incremental_alter_configs(ctx: RequestContext, req: m.IncrementalAlterConfigsRequest
                                    ) -> m.IncrementalAlterConfigsResponse:
    return answer_resources(ctx, req, RESP, _alter, log, "incremental alter configs", log_refusal=True)

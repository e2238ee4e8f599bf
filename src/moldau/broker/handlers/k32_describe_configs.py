"""DescribeConfigs (key 32), v0-4 (Kafka 4.1: 1-4; moldau keeps v0).

Resource types:
* TOPIC (2): every topic config (``configuration_keys`` null) or the named ones (unknown names skipped),
  with value, source, read_only false, is_sensitive; UNKNOWN_TOPIC_OR_PARTITION for a missing topic.
* BROKER (4): resource name = this node id: every broker key with its effective value (dynamic per broker >
  dynamic cluster default > static file/flags > default) and source; read_only unless moldau can change it
  at runtime; sensitive values null.  Resource name "": the cluster-wide dynamic defaults only (Kafka).
  Another id: INVALID_REQUEST.
* BROKER_LOGGER (8): the broker's Python loggers (root and ``moldau.*``) with their effective level in
  log4j names (source DYNAMIC_BROKER_LOGGER_CONFIG), changeable with IncrementalAlterConfigs.
* anything else: INVALID_REQUEST.
v0: is_default; v1+: config_source, synonyms when include_synonyms; v3+: config_type, documentation when
include_documentation.
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
from ..security.authorizer import DESCRIBE_CONFIGS, require_config_resource
from ._common import attempt
from ._common import err as _err

log = logging.getLogger(__name__)

REQ = m.DescribeConfigsRequest
RESP = m.DescribeConfigsResponse

# log4j level names <-> Python levels (TRACE and OFF have no Python name: 5 and CRITICAL + 10).
LOG4J_LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


def log4j_level_name(level: int) -> str:
    for name, value in LOG4J_LEVELS.items():
        if level <= value:
            return name
    return "OFF"


def check_broker_resource(ctx: RequestContext, name: str, *, allow_empty: bool = True) -> bool:
    """True when ``name`` is "" (cluster default), False for this broker's id; INVALID_REQUEST otherwise."""
    if name is None or name == "":
        if not allow_empty:
            raise _err(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        return True
    try:
        node = int(name)
    except ValueError:
        raise _err(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if node != ctx.services.node_id:
        raise _err(ErrorCode.INVALID_REQUEST,
                   f"Unexpected broker id, expected {ctx.services.node_id} or empty string, "
                   f"but received {name}")
    return False


def alter_broker_target(ctx: RequestContext, name: str) -> int | None:
    """The level an AlterConfigs on a BROKER resource changes: None for "" (the cluster default), else the
    broker id. Another broker's id is accepted when the broker's config store is the cluster's (ZooKeeper:
    the change reaches that broker through the change notification); on a single node: INVALID_REQUEST."""
    from ..topic_config import broker_config_store

    if name is None or name == "":
        return None
    if not broker_config_store(ctx.services).any_broker:
        check_broker_resource(ctx, name)
        return ctx.services.node_id
    try:
        node = int(name)
    except ValueError:
        raise _err(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if node < 0:
        raise _err(ErrorCode.INVALID_REQUEST, f"Broker id must not be negative, but it is: {name}")
    return node


def python_logger_levels() -> dict[str, str]:
    """Logger name -> effective level (log4j spelling), for "root" and the moldau loggers."""
    out = {"root": log4j_level_name(logging.getLogger().getEffectiveLevel())}
    for name, obj in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(obj, logging.Logger) and (name == "moldau" or name.startswith("moldau.")):
            out[name] = log4j_level_name(obj.getEffectiveLevel())
    return out


def _entries_to_wire(entries: list[tc.ConfigEntry], version: int, include_synonyms: bool) -> list[Any]:
    out = []
    for e in entries:
        out.append(RESP.DescribeConfigsResourceResult(
            name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
            is_default=e.is_default, is_sensitive=e.sensitive,
            synonyms=[RESP.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
                      for s in e.synonyms] if include_synonyms else [],
            config_type=e.config_type, documentation=e.documentation))
    return out


def _describe(ctx: RequestContext, res: Any, include_synonyms: bool,
              include_docs: bool) -> list[tc.ConfigEntry]:
    require_config_resource(ctx, DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
    keys = res.configuration_keys
    if res.resource_type == ConfigResourceType.TOPIC:
        from ..metadata import validate_topic_name

        validate_topic_name(res.resource_name)
        info = ctx.services.metadata.topics.get(res.resource_name)
        if info is None:
            raise _err(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       f"The topic '{res.resource_name}' does not exist.")
        tc.broker_dynamic_configs(ctx.services)
        return tc.describe_topic_configs(info.configs, ctx.services.config, keys,
                                         include_synonyms=include_synonyms,
                                         include_documentation=include_docs)
    if res.resource_type == ConfigResourceType.BROKER:
        cluster_default = check_broker_resource(ctx, res.resource_name)
        tc.broker_dynamic_configs(ctx.services)
        return tc.describe_broker_configs(ctx.services.config, keys, include_synonyms=include_synonyms,
                                          include_documentation=include_docs,
                                          cluster_default_only=cluster_default)
    if res.resource_type == ConfigResourceType.BROKER_LOGGER:
        check_broker_resource(ctx, res.resource_name, allow_empty=False)
        levels = python_logger_levels()
        names = list(levels) if keys is None else [k for k in keys if k in levels]
        return [tc.ConfigEntry(n, levels[n], tc.ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False,
                               False,
                               [], int(tc.ConfigType.STRING), None) for n in names]
    if res.resource_type == ConfigResourceType.GROUP:
        svc = ctx.services.share
        if svc is None:
            raise _err(ErrorCode.INVALID_REQUEST, "Group configs are not available (no share coordinator).")
        return [tc.ConfigEntry(n, v, tc.ConfigSource.DEFAULT_CONFIG if dflt else tc.ConfigSource.GROUP_CONFIG,
                               dflt, False, False, [], ctype, None)
                for n, v, dflt, ctype in svc.configs.describe(res.resource_name, keys)]
    raise _err(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")


@handler(32, REQ.min_version, REQ.max_version)
async def describe_configs(ctx: RequestContext, req: m.DescribeConfigsRequest) -> m.DescribeConfigsResponse:
    include_synonyms = bool(req.include_synonyms) and ctx.version >= 1
    include_docs = bool(req.include_documentation) and ctx.version >= 3
    results = []
    for res in req.resources:
        entries, exc = attempt(log, f"describing configs of {res.resource_type}/{res.resource_name}",
                               _describe,
                               ctx, res, include_synonyms, include_docs, log_refusal=False)
        if exc is not None:
            results.append(RESP.DescribeConfigsResult(
                error_code=tc.error_code_of(exc), error_message=tc.error_message_of(exc),
                resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
            continue
        assert entries is not None
        results.append(RESP.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=_entries_to_wire(entries, ctx.version, include_synonyms)))
    return RESP.new(throttle_time_ms=0, results=results)

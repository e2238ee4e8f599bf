"""Topic-level configuration as the broker serves it: config sources, broker synonyms' values, dynamic broker
configs, DescribeConfigs / AlterConfigs / IncrementalAlterConfigs.

The table itself - Kafka's topic config keys, their types, defaults, validators, broker synonyms and LogConfig
fields - is ``moldau.log.config.TOPIC_CONFIGS`` (the storage engine consumes it); it and its helpers are
re-exported here under the same names.

Resolution of a topic config's effective value, highest priority first (Kafka's order):

1. the topic override (``DYNAMIC_TOPIC_CONFIG``, source 1),
2. each broker synonym in order, looked up as a per-broker dynamic config (source 2), then as a
   cluster-wide dynamic default (source 3), then as a static broker config set in the file / flags (source 4),
3. the broker synonyms' defaults (``DEFAULT_CONFIG``, source 5), else the topic config's own default.

Broker synonyms with a unit (``log.retention.hours``) are converted to the topic unit (milliseconds).

Public API::

    TOPIC_CONFIGS: dict[str, TopicConfigDef]              # from moldau.log.config
    validate_topic_configs(configs)                       # InvalidConfigError (a KafkaError, INVALID_CONFIG)
    effective_topic_configs(topic_configs, broker_config) # name -> typed value
    log_config_for(topic_configs, broker_config) -> moldau.log.LogConfig
    describe_topic_config(topic_configs, broker_config, name) -> (value, source, is_default, synonyms)
    describe_topic_configs(topic_configs, broker_config, names=None) -> list[ConfigEntry]
    apply_incremental_ops(current, ops, broker_config) -> new dict (SET/DELETE/APPEND/SUBTRACT)
    DynamicBrokerConfigs: runtime broker-level overrides (per broker / cluster default)

``broker_config`` may be ``None`` (Kafka defaults only), a plain ``dict`` of static broker keys (tests), a
``moldau.broker.config.BrokerConfig`` (``.get(key)``, ``.source(key)``), or a :class:`BrokerConfigView`
combining a static config with :class:`DynamicBrokerConfigs`.
"""
from __future__ import annotations

import dataclasses
import enum
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from moldau.broker.kafka_config_names import is_kafka_broker_config_name
from moldau.log.checkpoint import atomic_write
from moldau.log.config import (  # noqa: F401  (re-exported: the table and its helpers)
    BROKER_ONLY_LOG_FIELDS,
    HOURS,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    MINUTES,
    TOPIC_CONFIGS,
    ConfigType,
    LogConfig,
    Synonym,
    TopicConfigDef,
    Validator,
    at_least,
    between,
    invalid_value,
    level_or_default,
    list_of,
    one_of,
    parse_value,
    throttled_replicas,
    to_kafka_string,
    validate_topic_config,
    validate_topic_configs,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.errors import error_code_of as _error_code_of

log = logging.getLogger(__name__)



class ConfigSource(enum.IntEnum):
    """DescribeConfigsResponse ConfigSource (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs operation types."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


# ------------------------------------------------------------------------------------------------------------
# errors


def config_error(message: str, code: int = ErrorCode.INVALID_CONFIG) -> KafkaError:
    """The exception to raise for a refused config: the KafkaError for ``code`` (INVALID_CONFIG by default)
    carrying ``message``."""
    return KafkaError.for_code(code, message)


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code carried by ``exc`` (a KafkaError; INVALID_CONFIG when it carries none)."""
    return _error_code_of(exc, ErrorCode.INVALID_CONFIG)


def error_message_of(exc: BaseException) -> str:
    """The message a KafkaError carries (without the code prefix)."""
    msg = getattr(exc, "message", None)
    if isinstance(msg, str) and msg:
        return msg
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc)


# ------------------------------------------------------------------------------------------------------------
# broker synonyms

#: Kafka's static defaults of the broker synonym keys (None = the key has no default). Used when the broker
#: config object does not define a key itself.
BROKER_SYNONYM_DEFAULTS: dict[str, Any] = {
    "log.cleanup.policy": ["delete"],
    "compression.type": "producer",
    "compression.gzip.level": -1,
    "compression.lz4.level": 9,
    "compression.zstd.level": 3,
    "log.cleaner.delete.retention.ms": 24 * HOURS,
    "log.segment.delete.delay.ms": 60_000,
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.index.interval.bytes": 4096,
    "log.local.retention.bytes": -2,
    "log.local.retention.ms": -2,
    "log.cleaner.max.compaction.lag.ms": LONG_MAX,
    "message.max.bytes": 1_048_588,
    "log.message.downconversion.enable": True,
    "log.message.timestamp.after.max.ms": 3_600_000,
    "log.message.timestamp.before.max.ms": LONG_MAX,
    "log.message.timestamp.type": "CreateTime",
    "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.min.compaction.lag.ms": 0,
    "min.insync.replicas": 1,
    "log.preallocate": False,
    "log.retention.bytes": -1,
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": 168,
    "log.segment.bytes": 1_073_741_824,
    "log.index.size.max.bytes": 10_485_760,
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": 0,
    "log.roll.ms": None,
    "log.roll.hours": 168,
    "unclean.leader.election.enable": False,
}

#: broker key -> (topic config def, multiplier): the inverse of the synonym table.
BROKER_KEY_TO_TOPIC: dict[str, tuple[TopicConfigDef, int]] = {
    syn.name: (d, syn.multiplier) for d in TOPIC_CONFIGS.values() for syn in d.broker_synonyms
}

#: Broker keys moldau applies at runtime through IncrementalAlterConfigs / AlterConfigs on a BROKER resource:
#: as Kafka (DynamicLogConfig), the highest-priority broker synonym of each topic config (``log.retention.ms``
#: but not ``log.retention.hours``); they become new defaults for every log without a topic override.
DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset(
    d.broker_synonyms[0].name for d in TOPIC_CONFIGS.values() if d.broker_synonyms)

#: Broker keys that are synonyms of each other, highest priority first (Kafka's brokerConfigSynonyms).
BROKER_SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {
    syn.name: tuple(s.name
                    for s in d.broker_synonyms) for d in TOPIC_CONFIGS.values() for syn in d.broker_synonyms
}


def broker_key_type(key: str) -> ConfigType:
    """Type of a broker synonym key (the ``*.hours`` / ``*.minutes`` keys are INT in Kafka); STRING for a
    Kafka broker key moldau only stores (:func:`is_stored_only_broker_key`)."""
    entry = BROKER_KEY_TO_TOPIC.get(key)
    if entry is None:
        return ConfigType.STRING
    d, mult = entry
    return d.synonym_type(key, mult)


#: DescribeConfigs' documentation of the Kafka broker keys moldau stores without acting on them.
STORED_ONLY_DOC = ("A Kafka broker config moldau does not implement: accepted by AlterConfigs and "
                   "IncrementalAlterConfigs, stored and described, no effect in moldau.")

_SENSITIVE_MARKERS = ("password", "secret", "sasl.jaas.config", "ssl.keystore.key", "master.key",
                      "ssl.keystore.certificate.chain", "ssl.truststore.certificates")


def is_stored_only_broker_key(key: str) -> bool:
    """A Kafka broker config name (kafka_config_names) that moldau neither applies nor defines: AlterConfigs
    stores it as a string so that clients written against Kafka can set it; it changes nothing."""
    return (key not in BROKER_KEY_TO_TOPIC and key not in _broker_defs()
            and is_kafka_broker_config_name(key))


# ------------------------------------------------------------------------------------------------------------
# broker config access


@dataclass(slots=True)
class DynamicBrokerConfigs:
    """Broker-level configs changed at runtime: ``per_broker`` (resource name = this node id, source 2) and
    ``cluster_default`` (resource name "", source 3). Values are Kafka strings."""

    per_broker: dict[str, str] = field(default_factory=dict)
    cluster_default: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, dict[str, str]]:
        return {"per_broker": dict(self.per_broker), "cluster_default": dict(self.cluster_default)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "DynamicBrokerConfigs":
        data = data or {}
        return cls(dict(data.get("per_broker") or {}), dict(data.get("cluster_default") or {}))


@dataclass(slots=True)
class BrokerConfigView:
    """A static broker config plus the dynamic broker-level overrides."""

    static: Any
    dynamic: DynamicBrokerConfigs = field(default_factory=DynamicBrokerConfigs)

    def lookup(self, key: str) -> list[tuple[str | None, int]]:
        out: list[tuple[str | None, int]] = []
        if key in self.dynamic.per_broker:
            out.append((self.dynamic.per_broker[key], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if key in self.dynamic.cluster_default:
            out.append((self.dynamic.cluster_default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        # The static config may mirror dynamic values (BrokerConfig.set_dynamic); ours are the truth.
        out.extend(e for e in _static_lookup(self.static, key)
                   if e[1] not in (ConfigSource.DYNAMIC_BROKER_CONFIG,
                                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        return out


# Dynamic broker configs attached to a static config object (one per broker process), so that a plain
# BrokerConfig passed to log_config_for() still sees runtime changes. Keyed by id(); entries hold the object.
# A BrokerConfig with ``log_dirs`` gets its persisted dynamic configs loaded on first use (so the broker's own
# log_config_for() calls at startup already see them).
_ATTACHED: dict[int, tuple[Any, DynamicBrokerConfigs]] = {}


def attach_dynamic_configs(broker_config: Any, dynamic: DynamicBrokerConfigs) -> None:
    """Make ``dynamic`` visible to every lookup through ``broker_config``."""
    _ATTACHED[id(broker_config)] = (broker_config, dynamic)


def _attached(broker_config: Any) -> DynamicBrokerConfigs | None:
    entry = _ATTACHED.get(id(broker_config))
    if entry is not None and entry[0] is broker_config:
        return entry[1]
    return None


def _config_data_dir(broker_config: Any) -> str | None:
    try:
        dirs = getattr(broker_config, "log_dirs", None)
    except Exception:  # noqa: BLE001 - a property that cannot be computed
        return None
    if isinstance(dirs, (list, tuple)) and dirs and isinstance(dirs[0], str):
        import os

        return os.path.abspath(dirs[0])
    return None


def dynamic_configs_of(broker_config: Any, data_dir: str | None = None) -> DynamicBrokerConfigs:
    """The dynamic configs attached to ``broker_config``; on first use they are read from
    ``<data_dir or log_dirs[0]>/__moldau_dynamic_configs.json`` (empty when there is none)."""
    if isinstance(broker_config, BrokerConfigView):
        return broker_config.dynamic
    dyn = _attached(broker_config)
    if dyn is not None:
        return dyn
    data_dir = data_dir or _config_data_dir(broker_config)
    dyn = _read_dynamic_file(data_dir) if data_dir else DynamicBrokerConfigs()
    attach_dynamic_configs(broker_config, dyn)
    _mirror_into_broker_config(broker_config, dyn, set(dyn.per_broker) | set(dyn.cluster_default))
    return dyn


def _source_int(src: object) -> int:
    if src is None:
        return ConfigSource.DEFAULT_CONFIG
    if isinstance(src, int):
        return int(src)
    name = getattr(src, "name", None) or str(src)
    name = name.upper()
    for s in ConfigSource:
        if s.name == name or name.endswith(s.name):
            return int(s)
    if "STATIC" in name or "FILE" in name or "OVERRIDE" in name or "FLAG" in name or "ENV" in name:
        return ConfigSource.STATIC_BROKER_CONFIG
    if "DEFAULT" in name:
        return ConfigSource.DEFAULT_CONFIG
    return ConfigSource.STATIC_BROKER_CONFIG


def _static_lookup(cfg: Any, key: str) -> list[tuple[str | None, int]]:
    """[(value, source)] of a broker key in a static config: the set value (source 4) and/or the default
    (source 5). Values are Kafka strings."""
    if cfg is None:
        default = BROKER_SYNONYM_DEFAULTS.get(key)
        return [] if default is None else [(to_kafka_string(default), ConfigSource.DEFAULT_CONFIG)]
    if isinstance(cfg, Mapping):
        out: list[tuple[str | None, int]] = []
        if key in cfg and cfg[key] is not None:
            out.append((to_kafka_string(cfg[key]), ConfigSource.STATIC_BROKER_CONFIG))
        default = BROKER_SYNONYM_DEFAULTS.get(key)
        if default is not None:
            out.append((to_kafka_string(default), ConfigSource.DEFAULT_CONFIG))
        return out
    # moldau.broker.config.BrokerConfig: explicitly set values and their sources are kept apart
    vals, srcs = getattr(cfg, "values", None), getattr(cfg, "sources", None)
    if isinstance(vals, dict) and isinstance(srcs, dict):
        out = []
        if key in vals and vals[key] is not None:
            out.append((to_kafka_string(vals[key]), _source_int(srcs.get(key))))
        default = _broker_default(cfg, key)
        if default is not None:
            out.append((default, ConfigSource.DEFAULT_CONFIG))
        return out
    # another BrokerConfig-like object: get() + source()
    try:
        value = cfg.get(key)
        known = True
    except Exception:  # noqa: BLE001 - key unknown to this BrokerConfig
        value, known = None, False
    if not known:
        default = BROKER_SYNONYM_DEFAULTS.get(key)
        return [] if default is None else [(to_kafka_string(default), ConfigSource.DEFAULT_CONFIG)]
    try:
        source = _source_int(cfg.source(key))
    except Exception:  # noqa: BLE001
        source = ConfigSource.DEFAULT_CONFIG
    if value is None:
        return []
    text = to_kafka_string(value)
    if source == ConfigSource.DEFAULT_CONFIG:
        return [(text, ConfigSource.DEFAULT_CONFIG)]
    out = [(text, source)]
    default = _broker_default(cfg, key)
    if default is not None:
        out.append((default, ConfigSource.DEFAULT_CONFIG))
    return out


def _broker_default(cfg: Any, key: str) -> str | None:
    defs = _broker_defs()
    if key in defs:
        return to_kafka_string(getattr(defs[key], "default", None))
    return to_kafka_string(BROKER_SYNONYM_DEFAULTS.get(key))


def broker_lookup(broker_config: Any, key: str) -> list[tuple[str | None, int]]:
    """All the places a broker key has a value, highest priority first: [(value string, ConfigSource)]."""
    if isinstance(broker_config, BrokerConfigView):
        return broker_config.lookup(key)
    if broker_config is None or isinstance(broker_config, Mapping):
        return _static_lookup(broker_config, key)
    dyn = _attached(broker_config)
    if dyn is None and _config_data_dir(broker_config) is not None:
        dyn = dynamic_configs_of(broker_config)
    if dyn is not None:
        return BrokerConfigView(broker_config, dyn).lookup(key)
    return _static_lookup(broker_config, key)


# ------------------------------------------------------------------------------------------------------------
# validation


def normalize_topic_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """Validated overrides as Kafka strings (``"compact,delete"``, ``"true"``), ready to persist."""
    validate_topic_configs(configs)
    return {name: to_kafka_string(TOPIC_CONFIGS[name].parse(value)) or "" for name, value in configs.items()}


def _broker_defs() -> Mapping[str, Any]:
    try:
        from moldau.broker import config as broker_config_mod
    except Exception:  # noqa: BLE001
        return {}
    return getattr(broker_config_mod, "BROKER_CONFIGS", {}) or {}


def _runtime_broker_def(key: str) -> Any | None:
    """The broker config definition (moldau.broker.config) of a key that is not a topic synonym but that
    the broker reads at runtime, so AlterConfigs may change it (e.g.
    ``replica.alter.log.dirs.io.max.bytes.per.second``, dynamic in Kafka too); None for any other key."""
    if key in BROKER_KEY_TO_TOPIC:
        return None
    defn = _broker_defs().get(key)
    return defn if defn is not None and getattr(defn, "dynamic", False) else None


def is_dynamic_broker_key(key: str) -> bool:
    """Whether IncrementalAlterConfigs / AlterConfigs may set or delete ``key`` on a BROKER resource and the
    broker applies it: a topic synonym (:data:`DYNAMIC_BROKER_KEYS`) or a dynamic broker setting."""
    return key in DYNAMIC_BROKER_KEYS or _runtime_broker_def(key) is not None


def validate_broker_config(key: str, value: object) -> Any:
    """Check a dynamic broker-level key (the topic synonyms and the broker settings moldau reads at runtime):
    INVALID_REQUEST for a known key moldau cannot change at runtime, INVALID_CONFIG for an unknown key or a
    bad value."""
    runtime = _runtime_broker_def(key)
    if key not in DYNAMIC_BROKER_KEYS and runtime is None:
        if key in _broker_defs() or key in BROKER_KEY_TO_TOPIC:
            raise config_error(f"Cannot update these configs dynamically: Set({key})",
                               ErrorCode.INVALID_REQUEST)
        if not is_kafka_broker_config_name(key):
            raise config_error(f"Unknown broker config name: {key}")
    if value is None:
        raise config_error(f"Null value not supported for broker config: {key}")
    if runtime is not None:
        from moldau.broker.config import ConfigError
        from moldau.broker.config import parse_value as parse_broker_value

        try:
            parsed_setting = parse_broker_value(runtime, str(value))
        except ConfigError as exc:
            raise invalid_value(key, value, str(exc)) from None
        check = runtime.validator
        problem = check(parsed_setting) if check is not None and parsed_setting is not None else None
        if problem:
            raise invalid_value(key, value, problem)
        return str(value)
    if key not in DYNAMIC_BROKER_KEYS:  # a Kafka key moldau only stores
        return str(value)
    d, mult = BROKER_KEY_TO_TOPIC[key]
    parsed = parse_value(broker_key_type(key), key, value)
    if mult == 1:
        try:
            d.validate(parsed)
        except Exception as exc:  # re-word with the broker key's name
            raise config_error(error_message_of(exc).replace(f"configuration {d.name}",
                                                             f"configuration {key}")) from None
    elif parsed is not None and parsed < (-1 if "retention" in key else 0):
        raise invalid_value(key, value, f"Value must be at least {-1 if 'retention' in key else 0}")
    return parsed


# ------------------------------------------------------------------------------------------------------------
# effective values and describe


@dataclass(slots=True)
class ConfigSynonymEntry:
    name: str
    value: str | None
    source: int


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    is_default: bool
    read_only: bool
    sensitive: bool
    synonyms: list[ConfigSynonymEntry]
    config_type: int
    documentation: str | None


_SOURCE_RANK = {ConfigSource.DYNAMIC_BROKER_CONFIG: 0, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: 1,
                ConfigSource.STATIC_BROKER_CONFIG: 2, ConfigSource.DEFAULT_CONFIG: 3}


def _lookup_synonyms(broker_config: Any, keys: Iterable[str]) -> list[tuple[str, str | None, int]]:
    """[(broker key, value, source)] of ``keys`` (synonyms, highest priority first) in Kafka's order: all
    dynamic-broker values of all of them, then dynamic-default, then static, then defaults."""
    found = [(key, value, source) for key in keys for value, source in broker_lookup(broker_config, key)]
    found.sort(key=lambda t: _SOURCE_RANK.get(t[2], 2))  # type: ignore[call-overload]
    return found


def _synonym_chain(d: TopicConfigDef, broker_config: Any) -> list[tuple[str, str | None, int, int]]:
    """[(broker key, value, source, multiplier)] of a topic config's broker synonyms, in Kafka's order."""
    multiplier = {syn.name: syn.multiplier for syn in d.broker_synonyms}
    return [(key, value, source, multiplier[key])
            for key, value, source in _lookup_synonyms(broker_config, multiplier)]


def _resolve(d: TopicConfigDef, topic_configs: Mapping[str, object],
             broker_config: Any) -> tuple[Any, int, list[ConfigSynonymEntry]]:
    """(typed value, source, synonyms incl. the topic override)."""
    synonyms: list[ConfigSynonymEntry] = []
    value: Any = None
    source: int | None = None
    raw = topic_configs.get(d.name) if topic_configs else None
    if raw is not None:
        try:
            value = d.parse(raw)
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        except Exception:  # noqa: BLE001 - a stored value that no longer parses: ignore it, never fail a log
            log.warning("ignoring invalid stored topic config %s=%r", d.name, raw)
        else:
            synonyms.append(ConfigSynonymEntry(d.name, None if d.sensitive else to_kafka_string(value),
                                               source))
    for key, text, src, mult in _synonym_chain(d, broker_config):
        synonyms.append(ConfigSynonymEntry(key, None if d.sensitive else text, src))
        if source is None and text is not None:
            try:
                parsed = parse_value(broker_key_type(key) if mult != 1 else d.type, key, text)
            except Exception:  # noqa: BLE001 - a bad broker value: skip to the next synonym
                log.warning("ignoring invalid broker value %s=%r for topic config %s", key, text, d.name)
                continue
            value = parsed * mult if (mult != 1 and parsed is not None and parsed >= 0) else parsed
            source = src
    if source is None:
        value = d.default
        source = ConfigSource.DEFAULT_CONFIG
    return value, int(source), synonyms


def effective_topic_configs(topic_configs: Mapping[str, object] | None,
                            broker_config: Any = None) -> dict[str, Any]:
    """Every (non-internal) topic config's effective typed value for a topic."""
    topic_configs = topic_configs or {}
    out = {}
    for d in TOPIC_CONFIGS.values():
        if d.internal:
            if topic_configs.get(d.name) is not None:
                try:
                    out[d.name] = d.parse(topic_configs[d.name])
                except Exception:  # noqa: BLE001
                    log.warning("ignoring invalid stored topic config %s=%r", d.name, topic_configs[d.name])
            continue
        out[d.name] = _resolve(d, topic_configs, broker_config)[0]
    return out


def describe_topic_config(topic_configs: Mapping[str, object] | None, broker_config: Any,
                          name: str) -> tuple[str | None, int, bool, list[ConfigSynonymEntry]]:
    """(value as Kafka string, ConfigSource, is_default, synonyms) of one topic config."""
    d = TOPIC_CONFIGS[name]
    value, source, synonyms = _resolve(d, topic_configs or {}, broker_config)
    text = None if d.sensitive else to_kafka_string(value)
    return text, source, source == ConfigSource.DEFAULT_CONFIG, synonyms


def describe_topic_configs(topic_configs: Mapping[str, object] | None, broker_config: Any,
                           names: Iterable[str] | None = None, *, include_synonyms: bool = True,
                           include_documentation: bool = True) -> list[ConfigEntry]:
    """ConfigEntry objects for the requested names (None = all non-internal configs, sorted by name).
    Unknown names are skipped, as Kafka does."""
    if names is None:
        selected = sorted(n for n, d in TOPIC_CONFIGS.items() if not d.internal)
    else:
        selected = [n for n in dict.fromkeys(names) if n in TOPIC_CONFIGS]
    out = []
    for name in selected:
        d = TOPIC_CONFIGS[name]
        value, source, is_default, synonyms = describe_topic_config(topic_configs, broker_config, name)
        out.append(ConfigEntry(
            name=name, value=value, source=source, is_default=is_default, read_only=False,
            sensitive=d.sensitive, synonyms=synonyms if include_synonyms else [],
            config_type=int(d.type), documentation=d.doc if include_documentation else None))
    return out


# ------------------------------------------------------------------------------------------------------------
# LogConfig


def log_config_kwargs(topic_configs: Mapping[str, object] | None, broker_config: Any,
                      field_names: Mapping[str, Any]) -> dict[str, Any]:
    """kwargs for a LogConfig restricted to the fields named in ``field_names`` (name -> default): the
    effective value of each topic config with a ``log_field``, ``internal.segment.bytes`` over segment.bytes,
    ``compact`` / ``delete`` flags from cleanup.policy, and the broker-only fields when the broker sets
    them."""
    values = effective_topic_configs(topic_configs, broker_config)
    if values.get("internal.segment.bytes") is not None:
        values["segment.bytes"] = values["internal.segment.bytes"]
    kwargs: dict[str, Any] = {}
    for d in TOPIC_CONFIGS.values():
        if d.log_field is not None and d.log_field in field_names:
            kwargs[d.log_field] = d.field_value(values[d.name])
    policy = values["cleanup.policy"]
    for flag in ("compact", "delete"):
        if flag in field_names and flag not in kwargs:
            kwargs[flag] = flag in policy
    if broker_config is not None:
        for f in BROKER_ONLY_LOG_FIELDS:
            if f.log_field not in field_names:
                continue
            entries = broker_lookup(broker_config, f.key)
            if entries and entries[0][0] is not None:
                try:
                    kwargs[f.log_field] = parse_value(f.type, f.key, entries[0][0])
                except KafkaError:
                    log.warning("ignoring invalid broker value %s=%r", f.key, entries[0][0])
    return kwargs


def log_config_for(topic_configs: Mapping[str, object] | None, broker_config: Any = None) -> LogConfig:
    """The moldau.log.LogConfig for a topic with overrides ``topic_configs`` on a broker configured by
    ``broker_config``."""
    fields = {f.name: f.default for f in dataclasses.fields(LogConfig)}
    return LogConfig(**log_config_kwargs(topic_configs, broker_config, fields))


# ------------------------------------------------------------------------------------------------------------
# AlterConfigs / IncrementalAlterConfigs


def _split_list(value: str | None) -> list[str]:
    if value is None:
        return []
    return [p.strip() for p in value.split(",") if p.strip()]


def _unique_keys(ops: Iterable[tuple[str, int, str | None]]) -> Iterable[tuple[str, int, str | None]]:
    """``ops``, refusing a key given twice (INVALID_REQUEST, as Kafka)."""
    seen: set[str] = set()
    for name, op, value in ops:
        if name in seen:
            raise config_error(f"Error due to duplicate config keys: {name}", ErrorCode.INVALID_REQUEST)
        seen.add(name)
        yield name, op, value


def _alter_op(op: int, name: str) -> AlterConfigOp:
    try:
        return AlterConfigOp(op)
    except ValueError:
        raise config_error(f"Unknown alter config operation type {op} for {name}",
                           ErrorCode.INVALID_REQUEST) from None


def _append_or_subtract(parts: list[str], op: AlterConfigOp, value: str | None) -> str:
    """The list ``parts`` with the items of ``value`` appended (when missing) or subtracted, as a Kafka
    string."""
    for item in _split_list(value):
        if op == AlterConfigOp.APPEND:
            if item not in parts:
                parts.append(item)
        else:
            while item in parts:
                parts.remove(item)
    return ",".join(parts)


def apply_incremental_ops(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]],
                          broker_config: Any = None) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations to a topic's overrides; return the new overrides (validated,
    as Kafka strings). APPEND/SUBTRACT work on LIST configs only and start from the current override, or the
    effective broker-level value when the topic has none. Raises the INVALID_CONFIG / INVALID_REQUEST
    error."""
    new: dict[str, str] = dict(current)
    for name, raw_op, value in _unique_keys(ops):
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise config_error(f"Unknown topic config name: {name}")
        op = _alter_op(raw_op, name)
        if op == AlterConfigOp.SET:
            if value is None:
                raise config_error(f"Null value not supported for topic configs: {name}")
            new[name] = value
        elif op == AlterConfigOp.DELETE:
            new.pop(name, None)
        else:
            if d.type != ConfigType.LIST:
                raise config_error(f"Can only {op.name} to configurations of type LIST, but {name} is not of "
                                   f"type LIST.")
            if name in new:
                parts = _split_list(new[name])
            else:
                parts = list(_resolve(d, {}, broker_config)[0] or [])
            new[name] = _append_or_subtract(parts, op, value)
    return normalize_topic_configs(new)


def replace_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Legacy AlterConfigs: the given set replaces every override. Validated, as Kafka strings."""
    return normalize_topic_configs(dict(configs))


# ------------------------------------------------------------------------------------------------------------
# broker-level describe


_TYPE_BY_NAME = {t.name.lower(): t for t in ConfigType}


def _broker_key_meta(key: str) -> tuple[ConfigType, bool, bool, str]:
    """(type, dynamic-in-moldau, sensitive, doc) of a broker key."""
    defn = _broker_defs().get(key)
    if defn is not None:
        ctype = _TYPE_BY_NAME.get(str(getattr(defn, "type", "")).lower(), ConfigType.UNKNOWN)
        sensitive = bool(getattr(defn, "sensitive", False)) or ctype == ConfigType.PASSWORD
        return ctype, is_dynamic_broker_key(key), sensitive, str(getattr(defn, "doc", "") or "")
    if key in BROKER_KEY_TO_TOPIC:
        d = BROKER_KEY_TO_TOPIC[key][0]
        return broker_key_type(key), key in DYNAMIC_BROKER_KEYS, False, d.doc
    if is_kafka_broker_config_name(key):
        sensitive = any(m in key for m in _SENSITIVE_MARKERS)
        return ConfigType.PASSWORD if sensitive else ConfigType.STRING, True, sensitive, STORED_ONLY_DOC
    return ConfigType.UNKNOWN, False, False, ""


def broker_config_keys(broker_config: Any) -> list[str]:
    """Every broker key to describe: the broker's own table plus the topic synonyms, sorted."""
    keys = set(_broker_defs())
    keys.update(BROKER_KEY_TO_TOPIC)
    if isinstance(broker_config, Mapping):
        keys.update(broker_config)
    return sorted(keys)


def describe_broker_configs(broker_config: Any, names: Iterable[str] | None = None, *,
                            include_synonyms: bool = True, include_documentation: bool = True,
                            cluster_default_only: bool = False) -> list[ConfigEntry]:
    """ConfigEntry objects for the broker resource (this node). ``cluster_default_only``: the resource name ""
    (only the cluster-wide dynamic defaults, as Kafka answers)."""
    dyn = dynamic_configs_of(broker_config) if broker_config is not None else DynamicBrokerConfigs()
    if cluster_default_only:
        selected = sorted(dyn.cluster_default) if names is None else [n for n in names
                                                                      if n in dyn.cluster_default]
        out = []
        for key in selected:
            ctype, dynamic, sensitive, doc = _broker_key_meta(key)
            value = None if sensitive else dyn.cluster_default[key]
            syn = [ConfigSynonymEntry(key, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
            out.append(ConfigEntry(key, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False, not dynamic,
                                   sensitive, syn if include_synonyms else [], int(ctype),
                                   doc if include_documentation else None))
        return out
    # plus the stored-only Kafka keys that are set, and any Kafka key asked for by name
    stored = [k for k in {**dyn.cluster_default, **dyn.per_broker} if is_stored_only_broker_key(k)]
    all_keys = sorted(set(broker_config_keys(broker_config)) | set(stored))
    known = set(all_keys)
    selected = all_keys if names is None else [
        n for n in dict.fromkeys(names) if n in known or is_stored_only_broker_key(n)]
    out = []
    for key in selected:
        ctype, dynamic, sensitive, doc = _broker_key_meta(key)
        group = BROKER_SYNONYM_GROUPS.get(key, (key,))
        found = _lookup_synonyms(broker_config, group)
        while found and found[0][0] != key:      # Kafka: drop synonyms ranked above the key itself
            found.pop(0)
        own = [f for f in found if f[0] == key]
        value = own[0][1] if own else None
        source = found[0][2] if found else ConfigSource.DEFAULT_CONFIG
        if sensitive:
            value = None
        synonyms = [ConfigSynonymEntry(n, None if sensitive else v, src) for n, v, src in found]
        out.append(ConfigEntry(key, value, int(source), source == ConfigSource.DEFAULT_CONFIG, not dynamic,
                               sensitive, synonyms if include_synonyms else [], int(ctype),
                               (doc or None) if include_documentation else None))
    return out


def apply_broker_ops(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]],
                     broker_config: Any = None) -> dict[str, str]:
    """IncrementalAlterConfigs on one level of dynamic broker configs; returns the new level (validated)."""
    new = dict(current)
    for key, raw_op, value in _unique_keys(ops):
        op = _alter_op(raw_op, key)
        if op == AlterConfigOp.DELETE:
            if not is_dynamic_broker_key(key):
                validate_broker_config(key, "")     # raises with the right code and message
            new.pop(key, None)
            continue
        if op == AlterConfigOp.SET:
            if value is None:
                raise config_error(f"Null value not supported for broker config: {key}")
            validate_broker_config(key, value)
            new[key] = to_kafka_string(parse_value(broker_key_type(key), key, value)) or ""
            continue
        if not is_dynamic_broker_key(key):
            validate_broker_config(key, "")     # raises, naming the key
        if broker_key_type(key) != ConfigType.LIST:
            raise config_error(f"Can only {op.name} to configurations of type LIST, but {key} is not of "
                               "type LIST.")
        if key in new:
            parts = _split_list(new[key])
        else:
            entries = broker_lookup(broker_config, key)
            parts = _split_list(entries[0][0]) if entries else []
        joined = _append_or_subtract(parts, op, value)
        validate_broker_config(key, joined)
        new[key] = joined
    return new


# ------------------------------------------------------------------------------------------------------------
# runtime: dynamic broker configs of a running broker, persistence, applying changes to open logs

DYNAMIC_CONFIGS_FILE = "__moldau_dynamic_configs.json"


def _data_dir_of(broker: Any) -> str | None:
    d = getattr(broker, "data_dir", None) or getattr(getattr(broker, "metadata", None), "data_dir", None)
    if d:
        return str(d)
    return _config_data_dir(getattr(broker, "config", None))


def _read_dynamic_file(data_dir: str) -> DynamicBrokerConfigs:
    import json
    import os

    path = os.path.join(data_dir, DYNAMIC_CONFIGS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            dyn = DynamicBrokerConfigs.from_json(json.load(f))
    except FileNotFoundError:
        return DynamicBrokerConfigs()
    except (OSError, ValueError) as exc:
        log.error("cannot read %s: %s (dynamic broker configs ignored)", path, exc)
        return DynamicBrokerConfigs()
    log.info("dynamic broker configs from %s: per broker %s, cluster default %s", path, dyn.per_broker,
             dyn.cluster_default)
    return dyn


def load_dynamic_broker_configs(broker: Any) -> DynamicBrokerConfigs:
    """Read the persisted dynamic broker configs (once) and attach them to ``broker.config``. Happens by
    itself on the first lookup through a BrokerConfig with ``log_dirs``; calling it at startup is harmless."""
    return dynamic_configs_of(broker.config, _data_dir_of(broker))


def broker_dynamic_configs(broker: Any) -> DynamicBrokerConfigs:
    """The running broker's dynamic configs, loading them from disk on first use."""
    return dynamic_configs_of(broker.config, _data_dir_of(broker))


def save_dynamic_broker_configs(broker: Any, dyn: DynamicBrokerConfigs) -> None:
    """Persist atomically next to the metadata file."""
    import json
    import os

    data_dir = _data_dir_of(broker)
    if not data_dir:
        return
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, DYNAMIC_CONFIGS_FILE)
    atomic_write(path, json.dumps(dyn.to_json(), indent=1, sort_keys=True).encode(), sync_dir=False)


def _mirror_into_broker_config(cfg: Any, dyn: DynamicBrokerConfigs, keys: Iterable[str]) -> None:
    """Reflect the effective dynamic value of ``keys`` in BrokerConfig.set_dynamic, so code reading
    ``broker.config.get(key)`` sees runtime changes too. Keys the BrokerConfig refuses are skipped."""
    setter = getattr(cfg, "set_dynamic", None)
    if setter is None:
        return
    for key in keys:
        value = dyn.per_broker.get(key, dyn.cluster_default.get(key))
        try:
            setter(key, value)
        except Exception as exc:  # noqa: BLE001 - not dynamic in BrokerConfig: our lookups still apply it
            log.debug("BrokerConfig.set_dynamic(%s) refused: %s", key, exc)


def apply_dynamic_level(broker: Any, *, cluster_default: bool, configs: Mapping[str, str]) -> None:
    """Replace one level of this broker's dynamic configs in memory and apply it to every open log."""
    dyn = broker_dynamic_configs(broker)
    target = dyn.cluster_default if cluster_default else dyn.per_broker
    if target == dict(configs):
        return
    changed = set(target) | set(configs)
    target.clear()
    target.update(configs)
    _mirror_into_broker_config(broker.config, dyn, changed)
    refresh_all_topic_logs(broker)
    log.info("dynamic broker configs (%s): %s", "cluster default" if cluster_default else "this broker",
             dict(configs))


class FileBrokerConfigStore:
    """Dynamic broker configs of a single node: ``__moldau_dynamic_configs.json`` in the data dir. The
    cluster's store (``cluster.zkconfig.ZkBrokerConfigStore``) keeps them in ZooKeeper. ``level(None)`` is
    the cluster default, ``level(id)`` a broker's own level; ``any_broker``: whether other brokers' levels
    can be written through this one."""

    any_broker = False

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def level(self, broker_id: int | None) -> dict[str, str]:
        dyn = broker_dynamic_configs(self.broker)
        return dict(dyn.cluster_default if broker_id is None else dyn.per_broker)

    def set_level(self, broker_id: int | None, configs: Mapping[str, str]) -> None:
        apply_dynamic_level(self.broker, cluster_default=broker_id is None, configs=configs)
        save_dynamic_broker_configs(self.broker, broker_dynamic_configs(self.broker))


def broker_config_store(broker: Any) -> Any:
    """The broker's dynamic broker config store (``BrokerServices.broker_configs``), the file store when
    none was set."""
    store = getattr(broker, "broker_configs", None)
    return store if store is not None else FileBrokerConfigStore(broker)


def set_dynamic_broker_level(broker: Any, *, cluster_default: bool, configs: Mapping[str, str],
                             broker_id: int | None = None) -> None:
    """Replace one level of dynamic broker configs (the cluster default, or ``broker_id``'s, default this
    broker's) in the broker's store; the levels that concern this broker apply to every open log at once."""
    target = None if cluster_default else (broker.node_id if broker_id is None else broker_id)
    broker_config_store(broker).set_level(target, configs)


def refresh_topic_logs(broker: Any, topic: Any) -> None:
    """Tell the metadata listeners (the replica manager) that a topic's effective configs changed, so each
    PartitionLog gets a new LogConfig."""
    md = getattr(broker, "metadata", None)
    for listener in list(getattr(md, "listeners", []) or []):
        fn = getattr(listener, "on_topic_configs_changed", None)
        if fn is not None:
            fn(topic)


def refresh_all_topic_logs(broker: Any) -> None:
    md = getattr(broker, "metadata", None)
    for topic in list(getattr(md, "topics", {}).values()):
        refresh_topic_logs(broker, topic)


def alter_topic_configs(broker: Any, name: str, new_configs: Mapping[str, str], *,
                        validate_only: bool = False) -> None:
    """Replace a topic's overrides with ``new_configs`` (already validated / normalized) through the metadata
    store, which persists them and tells its listeners, so the open logs get the new LogConfig."""
    md = broker.metadata
    if validate_only:
        return
    md.alter_topic_configs(name, dict(new_configs), replace=True)


def topic_for_alter(broker: Any, name: str) -> Any:
    """The TopicInfo for an AlterConfigs / IncrementalAlterConfigs TOPIC resource, or the Kafka error."""
    from moldau.protocol.errors import ErrorCode

    from .metadata import validate_topic_name

    validate_topic_name(name)
    info = broker.metadata.topics.get(name)
    if info is None:
        raise config_error(f"The topic '{name}' does not exist.", int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    return info


__all__ = [
    "AlterConfigOp", "BROKER_KEY_TO_TOPIC", "BROKER_SYNONYM_DEFAULTS", "BrokerConfigView", "ConfigEntry",
    "ConfigSource", "ConfigSynonymEntry", "ConfigType", "DYNAMIC_BROKER_KEYS",
    "DynamicBrokerConfigs", "TOPIC_CONFIGS", "TopicConfigDef", "apply_incremental_ops",
    "attach_dynamic_configs", "broker_lookup", "config_error", "describe_topic_config",
    "describe_topic_configs", "is_dynamic_broker_key", "dynamic_configs_of", "effective_topic_configs",
    "error_code_of",
    "error_message_of", "log_config_for", "log_config_kwargs", "normalize_topic_configs", "parse_value",
    "replace_configs", "to_kafka_string", "validate_broker_config", "validate_topic_config",
    "validate_topic_configs", "describe_broker_configs", "apply_broker_ops", "load_dynamic_broker_configs",
    "broker_dynamic_configs", "save_dynamic_broker_configs", "set_dynamic_broker_level", "refresh_topic_logs",
    "refresh_all_topic_logs", "BROKER_SYNONYM_GROUPS", "broker_config_keys", "alter_topic_configs",
    "topic_for_alter",
]

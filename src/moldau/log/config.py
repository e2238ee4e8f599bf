"""Topic-level configuration: the one table of Kafka's topic config keys (types, defaults, validators, broker
synonyms) and ``LogConfig``, the storage engine's view of it.

Facts (names, types, defaults, ranges, synonym order) follow Kafka 4.1's ``LogConfig`` /
``ServerTopicConfigSynonyms``; the documentation strings are moldau's own words.
``moldau.broker.topic_config`` builds on this table (config sources, dynamic broker configs, DescribeConfigs,
AlterConfigs).

Topic keys map to ``LogConfig`` attributes (``TopicConfigDef.log_field``); Kafka's broker keys supply the
defaults (``TopicConfigDef.broker_synonyms``, most precise first, with a unit multiplier)::

    segment.bytes            segment_bytes              log.segment.bytes
    segment.ms               segment_ms                 log.roll.ms, log.roll.hours
    flush.messages           flush_interval_messages    log.flush.interval.messages
    flush.ms                 flush_interval_ms          log.flush.interval.ms, log.flush.scheduler.interval.ms
    max.message.bytes        max_message_bytes          message.max.bytes
    ...

One ``LogConfig`` field has a broker key only (``BROKER_ONLY_LOG_FIELDS``): ``producer.id.expiration.ms``.
``message.timestamp.difference.max.ms`` is Kafka 3.x's topic config (synonym
``log.message.timestamp.difference.max.ms``), kept although Kafka 4.0 removed it.

``LogConfig.from_props({"segment.bytes": "1048576"})`` validates exactly as the broker validates topic
overrides (``validate_topic_config``) and raises ``InvalidConfigError`` (a KafkaError, INVALID_CONFIG) naming
the key. ``LogConfig.from_broker_props(server_props)`` reads the broker-level defaults (``log.*`` keys, parsed
by type; unrelated broker keys are ignored).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .errors import InvalidConfigError

__all__ = [
    "LogConfig", "TOPIC_CONFIGS", "TopicConfigDef", "Synonym", "ConfigType", "BROKER_SYNONYMS",
    "BROKER_ONLY_LOG_FIELDS", "BrokerOnlyField", "LONG_MAX", "LONG_MIN", "INT_MAX", "INT_MIN", "HOURS",
    "MINUTES", "parse_value", "to_kafka_string", "validate_topic_config", "validate_topic_configs",
    "check_compaction_lags", "at_least", "between", "one_of", "list_of", "level_or_default",
    "throttled_replicas", "invalid_value", "Validator",
]

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647
INT_MIN = -2147483648

HOURS = 3_600_000
MINUTES = 60_000

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


class ConfigType(enum.IntEnum):
    """A config value's type, numbered as DescribeConfigsResponse's ConfigType (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


# ----------------------------------------------------------------------------------------------------------
# parsing and printing values (Kafka's ConfigDef rules)


def invalid_value(name: str, value: object, why: str) -> InvalidConfigError:
    """The INVALID_CONFIG error Kafka words as "Invalid value V for configuration NAME: WHY"."""
    return InvalidConfigError(f"Invalid value {value} for configuration {name}: {why}", key=name)


_INT_RANGES = {ConfigType.INT: (INT_MIN, INT_MAX, "32-bit integer"), ConfigType.LONG: (LONG_MIN, LONG_MAX,
               "64-bit integer"), ConfigType.SHORT: (-32768, 32767, "16-bit integer")}


def parse_value(ctype: ConfigType, name: str, value: object) -> Any:
    """Parse ``value`` (normally a string) as Kafka's ConfigDef would for ``ctype``; InvalidConfigError naming
    ``name`` when it does not parse."""
    if value is None:
        return None
    if ctype == ConfigType.LIST:
        if isinstance(value, (list, tuple)):
            return [str(v).strip() for v in value]
        text = str(value).strip()
        if not text:
            return []
        return [part.strip() for part in text.split(",")]
    if not isinstance(value, str):
        if ctype == ConfigType.BOOLEAN and isinstance(value, bool):
            return value
        if ctype in _INT_RANGES and isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
        elif ctype == ConfigType.DOUBLE and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        else:
            text = to_kafka_string(value)  # type: ignore[assignment]
    else:
        text = value.strip()
    if ctype in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
        return text
    if ctype == ConfigType.BOOLEAN:
        low = text.lower()
        if low == "true":
            return True
        if low == "false":
            return False
        raise invalid_value(name, value, "Expected value to be either true or false")
    if ctype in _INT_RANGES:
        lo, hi, kind = _INT_RANGES[ctype]
        try:
            num = int(text, 10)
        except ValueError:
            raise invalid_value(name, value, f"Not a number of type {ctype.name}") from None
        if not lo <= num <= hi:
            raise invalid_value(name, value, f"Not a number of type {ctype.name} ({kind})")
        return num
    if ctype == ConfigType.DOUBLE:
        try:
            num_f = float(text)
        except ValueError:
            raise invalid_value(name, value, "Not a number of type DOUBLE") from None
        if math.isnan(num_f):
            raise invalid_value(name, value, "Not a number of type DOUBLE")
        return num_f
    return text


def to_kafka_string(value: object) -> str | None:
    """Kafka's ConfigDef.convertToString: lists comma-joined, booleans lower case, doubles like Java."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


# ----------------------------------------------------------------------------------------------------------
# validators: callables (name, parsed value) -> None, raising InvalidConfigError


Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise invalid_value(name, to_kafka_string(value), f"Value must be at least {minimum}")
    check.__doc__ = f"[{minimum},...]"
    return check


def between(lo: float, hi: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        if value < lo:
            raise invalid_value(name, to_kafka_string(value), f"Value must be at least {lo}")
        if value > hi:
            raise invalid_value(name, to_kafka_string(value), f"Value must be no more than {hi}")
    check.__doc__ = f"[{lo},...,{hi}]"
    return check


def one_of(*allowed: str, case_insensitive: bool = False) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        ok = value.lower() in {a.lower() for a in allowed} if case_insensitive else value in allowed
        if not ok:
            raise invalid_value(name, value, f"String must be one of: {', '.join(allowed)}")
    check.__doc__ = "[" + ", ".join(allowed) + "]"
    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        for item in value:
            if item not in allowed:
                raise invalid_value(
                    name, to_kafka_string(value), f"String must be one of: {', '.join(allowed)}"
                )
        if len(set(value)) != len(value):
            raise invalid_value(name, to_kafka_string(value), "Values must not be duplicated")
    check.__doc__ = "[" + ", ".join(allowed) + "]"
    return check


def level_or_default(lo: int, hi: int, default: int) -> Validator:
    """Compression level validators: a level in [lo, hi] or the codec's default marker."""
    def check(name: str, value: Any) -> None:
        if value is None or value == default or lo <= value <= hi:
            return
        raise invalid_value(name, value, f"Value must be between {lo} and {hi}" +
                       (f" or equal to {default}" if not lo <= default <= hi else ""))
    check.__doc__ = f"[{lo},...,{hi}]"
    return check


def throttled_replicas(name: str, value: Any) -> None:
    """``*`` or a list of ``partition:broker`` pairs."""
    if not value or value == ["*"]:
        return
    for item in value:
        parts = item.split(":")
        if len(parts) != 2 or not parts[0].strip().isdigit() or not parts[1].strip().isdigit():
            raise invalid_value(name, to_kafka_string(value),
                           "must be the literal '*' or a list of replicas in the following format: "
                           "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _no_remote_storage(name: str, value: Any) -> None:
    if value:
        raise invalid_value(name, "true", "Tiered Storage functionality is disabled in the broker. "
                       "Topic cannot be configured with remote log storage.")


_MESSAGE_FORMAT_VERSION = re.compile(r"^(0\.(8|9|10|11)(\.\d+){1,2}|[123](\.\d+){1,2})(-IV\d+)?$")


def _message_format_version(name: str, value: Any) -> None:
    """Kafka 3.x accepts any valid version string (0.8.0 ... 3.9-IV0) and ignores it (KIP-724)."""
    if value is not None and not _MESSAGE_FORMAT_VERSION.match(value):
        raise invalid_value(name, value, f"Version `{value}` is not a valid version")


# ----------------------------------------------------------------------------------------------------------
# the table


@dataclass(slots=True, frozen=True)
class Synonym:
    """A broker key that supplies a topic config's default; ``multiplier`` converts its unit (hours -> ms)."""

    name: str
    multiplier: int = 1


@dataclass(slots=True, frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: Any                         # typed default (None = no default)
    broker_synonyms: tuple[Synonym, ...]
    validator: Validator | None = None
    doc: str = ""
    sensitive: bool = False
    internal: bool = False               # accepted but never described (Kafka's defineInternal)
    log_field: str | None = None         # the LogConfig attribute it sets
    honoured: bool = True                # False: stored and described, no effect on a single node

    @property
    def broker_synonym(self) -> str | None:
        return self.broker_synonyms[0].name if self.broker_synonyms else None

    def parse(self, value: object) -> Any:
        return parse_value(self.type, self.name, value)

    def validate(self, value: Any) -> None:
        if self.validator is not None:
            self.validator(self.name, value)

    def synonym_type(self, key: str, multiplier: int = 1) -> ConfigType:
        """Type of the broker synonym ``key`` (the ``*.hours`` / ``*.minutes`` keys are INT in Kafka)."""
        if multiplier != 1:
            return ConfigType.INT
        if key.endswith(".ms") and self.type in (ConfigType.LONG, ConfigType.INT):
            return ConfigType.LONG
        return self.type

    def field_value(self, value: Any) -> Any:
        """A parsed value as the LogConfig attribute holds it (lists as tuples)."""
        return tuple(value) if isinstance(value, list) else value


_SEVEN_DAYS_MS = 7 * 24 * HOURS
_ONE_DAY_MS = 24 * HOURS


def _s(*names: str | tuple[str, int]) -> tuple[Synonym, ...]:
    return tuple(Synonym(n) if isinstance(n, str) else Synonym(n[0], n[1]) for n in names)


def _build() -> dict[str, TopicConfigDef]:
    T = ConfigType
    defs = [
        TopicConfigDef(
            "cleanup.policy", T.LIST, ["delete"], _s("log.cleanup.policy"), list_of("compact", "delete"),
            "How old log segments are cleaned: 'delete' removes segments past the retention time or size, "
            "'compact' keeps the latest record for each key; both may be given.",
            log_field="cleanup_policy"),
        TopicConfigDef(
            "compression.type", T.STRING, "producer", _s("compression.type"),
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            "Codec of the stored batches: 'producer' keeps what the producer sent, 'uncompressed' or a codec "
            "name recompresses on append.",
            log_field="compression_type"),
        TopicConfigDef(
            "compression.gzip.level", T.INT, -1, _s("compression.gzip.level"), level_or_default(1, 9, -1),
            "Level used when compression.type is gzip.", log_field="compression_gzip_level"),
        TopicConfigDef(
            "compression.lz4.level", T.INT, 9, _s("compression.lz4.level"), level_or_default(1, 17, 9),
            "Level used when compression.type is lz4.", log_field="compression_lz4_level"),
        TopicConfigDef(
            "compression.zstd.level", T.INT, 3, _s("compression.zstd.level"),
            level_or_default(-131072, 22, 3),
            "Level used when compression.type is zstd.", log_field="compression_zstd_level"),
        TopicConfigDef(
            "delete.retention.ms", T.LONG, _ONE_DAY_MS, _s("log.cleaner.delete.retention.ms"), at_least(0),
            "How long tombstones (records with a null value) are kept on a compacted topic.",
            log_field="delete_retention_ms"),
        TopicConfigDef(
            "file.delete.delay.ms", T.LONG, 60_000, _s("log.segment.delete.delay.ms"), at_least(0),
            "Time to wait before a deleted segment's files are removed from disk.",
            log_field="file_delete_delay_ms"),
        TopicConfigDef(
            "flush.messages", T.LONG, LONG_MAX, _s("log.flush.interval.messages"), at_least(1),
            "Force an fsync after this many records were appended (default: leave it to the OS).",
            log_field="flush_interval_messages"),
        TopicConfigDef(
            "flush.ms", T.LONG, LONG_MAX, _s("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
            at_least(0),
            "Force an fsync when the oldest unflushed record is this old (default: leave it to the OS).",
            log_field="flush_interval_ms"),
        TopicConfigDef(
            "follower.replication.throttled.replicas", T.LIST, [], (), throttled_replicas,
            "Replicas whose follower fetches are throttled (no effect on a single broker).", honoured=False),
        TopicConfigDef(
            "index.interval.bytes", T.INT, 4096, _s("log.index.interval.bytes"), at_least(0),
            "Bytes appended between two offset index entries.", log_field="index_interval_bytes"),
        TopicConfigDef(
            "leader.replication.throttled.replicas", T.LIST, [], (), throttled_replicas,
            "Replicas whose leader side is throttled (no effect on a single broker).", honoured=False),
        TopicConfigDef(
            "local.retention.bytes", T.LONG, -2, _s("log.local.retention.bytes"), at_least(-2),
            "Tiered storage: local retention size (-2: same as retention.bytes). Stored, not used.",
            honoured=False),
        TopicConfigDef(
            "local.retention.ms", T.LONG, -2, _s("log.local.retention.ms"), at_least(-2),
            "Tiered storage: local retention time (-2: same as retention.ms). Stored, not used.",
            honoured=False),
        TopicConfigDef(
            "max.compaction.lag.ms", T.LONG, LONG_MAX, _s("log.cleaner.max.compaction.lag.ms"), at_least(1),
            "Longest time a record may stay uncompacted in a compacted log.",
            log_field="max_compaction_lag_ms"),
        TopicConfigDef(
            "max.message.bytes", T.INT, 1_048_588, _s("message.max.bytes"), at_least(0),
            "Largest record batch (after compression) the topic accepts.", log_field="max_message_bytes"),
        TopicConfigDef(
            "message.downconversion.enable", T.BOOLEAN, True, _s("log.message.downconversion.enable"), None,
            "Whether batches are down-converted for fetch requests of old versions (message format v0/v1).",
            log_field="message_downconversion_enable"),
        TopicConfigDef(
            "message.timestamp.after.max.ms", T.LONG, 3_600_000, _s("log.message.timestamp.after.max.ms"),
            at_least(0),
            "How far in the future a CreateTime record timestamp may be relative to the broker clock.",
            log_field="message_timestamp_after_max_ms"),
        TopicConfigDef(
            "message.timestamp.before.max.ms", T.LONG, LONG_MAX, _s("log.message.timestamp.before.max.ms"),
            at_least(0),
            "How far in the past a CreateTime record timestamp may be relative to the broker clock.",
            log_field="message_timestamp_before_max_ms"),
        TopicConfigDef(
            "message.format.version", T.STRING, "3.0-IV1", (), _message_format_version,
            "Kafka 3.x (deprecated, removed in 4.0): ignored when the inter-broker protocol is 3.0 or newer "
            "(KIP-724). moldau always writes message format v2: accepted, stored and described, no effect.",
            honoured=False),
        TopicConfigDef(
            "message.timestamp.difference.max.ms", T.LONG, LONG_MAX,
            _s("log.message.timestamp.difference.max.ms"), at_least(0),
            "Kafka 3.x (removed in 4.0): largest difference between a CreateTime record timestamp and the "
            "broker clock.", log_field="message_timestamp_difference_max_ms"),
        TopicConfigDef(
            "message.timestamp.type", T.STRING, CREATE_TIME, _s("log.message.timestamp.type"),
            one_of(CREATE_TIME, LOG_APPEND_TIME),
            "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
            log_field="message_timestamp_type"),
        TopicConfigDef(
            "min.cleanable.dirty.ratio", T.DOUBLE, 0.5, _s("log.cleaner.min.cleanable.ratio"), between(0, 1),
            "Fraction of the log that must be uncompacted before the cleaner compacts it.",
            log_field="min_cleanable_dirty_ratio"),
        TopicConfigDef(
            "min.compaction.lag.ms", T.LONG, 0, _s("log.cleaner.min.compaction.lag.ms"), at_least(0),
            "Shortest time a record stays uncompacted.", log_field="min_compaction_lag_ms"),
        TopicConfigDef(
            "min.insync.replicas", T.INT, 1, _s("min.insync.replicas"), at_least(1),
            "Replicas that must have a write for an acks=all produce to succeed.",
            log_field="min_insync_replicas"),
        TopicConfigDef(
            "preallocate", T.BOOLEAN, False, _s("log.preallocate"), None,
            "Whether a new segment file is preallocated to its full size.", log_field="preallocate"),
        TopicConfigDef(
            "remote.log.copy.disable", T.BOOLEAN, False, (), None,
            "Tiered storage: stop copying segments to remote storage. Stored, not used.", honoured=False),
        TopicConfigDef(
            "remote.log.delete.on.disable", T.BOOLEAN, False, (), None,
            "Tiered storage: delete remote data when tiered storage is turned off. Stored, not used.",
            honoured=False),
        TopicConfigDef(
            "remote.storage.enable", T.BOOLEAN, False, (), _no_remote_storage,
            "Tiered storage for this topic. moldau has no remote storage, so only false is accepted.",
            honoured=False),
        TopicConfigDef(
            "retention.bytes", T.LONG, -1, _s("log.retention.bytes"), None,
            "Largest size a partition may grow to before old segments are deleted (-1: no limit).",
            log_field="retention_bytes"),
        TopicConfigDef(
            "retention.ms", T.LONG, _SEVEN_DAYS_MS,
            _s("log.retention.ms", ("log.retention.minutes", MINUTES), ("log.retention.hours", HOURS)),
            at_least(-1),
            "How long a segment is kept before it is deleted (-1: forever).", log_field="retention_ms"),
        TopicConfigDef(
            "segment.bytes", T.INT, 1_073_741_824, _s("log.segment.bytes"), at_least(1024 * 1024),
            "Size at which the active segment is rolled.", log_field="segment_bytes"),
        TopicConfigDef(
            "segment.index.bytes", T.INT, 10_485_760, _s("log.index.size.max.bytes"), at_least(4),
            "Size of the offset and time index files of a segment.", log_field="segment_index_bytes"),
        TopicConfigDef(
            "segment.jitter.ms", T.LONG, 0, _s("log.roll.jitter.ms", ("log.roll.jitter.hours", HOURS)),
            at_least(0),
            "Random jitter subtracted from segment.ms, so segments of many partitions do not roll together.",
            log_field="segment_jitter_ms"),
        TopicConfigDef(
            "segment.ms", T.LONG, _SEVEN_DAYS_MS, _s("log.roll.ms", ("log.roll.hours", HOURS)), at_least(1),
            "Age at which the active segment is rolled even when not full.", log_field="segment_ms"),
        TopicConfigDef(
            "unclean.leader.election.enable", T.BOOLEAN, False, _s("unclean.leader.election.enable"), None,
            "Whether a replica outside the ISR may become leader (no effect on a single broker).",
            log_field="unclean_leader_election_enable"),
        # Kafka's test-only override of segment.bytes without the 1 MiB minimum (defineInternal); it wins over
        # segment.bytes when set.
        TopicConfigDef(
            "internal.segment.bytes", T.INT, None, (), at_least(1),
            "Testing only: segment size overriding segment.bytes, without its minimum.", internal=True),
    ]
    return {d.name: d for d in defs}


TOPIC_CONFIGS: dict[str, TopicConfigDef] = _build()

#: topic key -> the broker keys that set its default (most precise first).
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    d.name: tuple(s.name for s in d.broker_synonyms) for d in TOPIC_CONFIGS.values() if d.broker_synonyms
}


@dataclass(slots=True, frozen=True)
class BrokerOnlyField:
    """A LogConfig attribute set by a broker key only (no topic-level config in Kafka 4)."""

    log_field: str
    key: str
    type: ConfigType
    default: Any


BROKER_ONLY_LOG_FIELDS: tuple[BrokerOnlyField, ...] = (
    BrokerOnlyField("producer_id_expiration_ms", "producer.id.expiration.ms", ConfigType.INT, 86_400_000),
)


def _default(name: str) -> Any:
    d = TOPIC_CONFIGS[name]
    return d.field_value(d.default)


def _broker_only_default(log_field: str) -> Any:
    return next(f.default for f in BROKER_ONLY_LOG_FIELDS if f.log_field == log_field)


# ----------------------------------------------------------------------------------------------------------
# validation


def validate_topic_config(name: str, value: object) -> Any:
    """Check one topic config override; return its parsed value. Raises InvalidConfigError
    (INVALID_CONFIG)."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}", key=name)
    if value is None:
        raise InvalidConfigError(f"Null value not supported for topic configs: {name}", key=name)
    parsed = d.parse(value)
    d.validate(parsed)
    return parsed


def check_compaction_lags(lo: int, hi: int) -> None:
    """Kafka's cross-config rule: min.compaction.lag.ms must not exceed max.compaction.lag.ms."""
    if lo > hi:
        raise InvalidConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                                 f"max.compaction.lag.ms ({hi})", key="min.compaction.lag.ms")


def validate_topic_configs(configs: Mapping[str, object]) -> None:
    """Validate a topic's overrides (names, values, and cross-config rules). Raises InvalidConfigError."""
    parsed = {name: validate_topic_config(name, value) for name, value in configs.items()}
    check_compaction_lags(parsed.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default),
                          parsed.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default))


# ----------------------------------------------------------------------------------------------------------
# LogConfig


@dataclass(slots=True, frozen=True)
class LogConfig:
    """The engine's settings for one partition log; defaults are the table's (Kafka's)."""

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    flush_interval_messages: int = _default("flush.messages")
    flush_interval_ms: int = _default("flush.ms")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    max_message_bytes: int = _default("max.message.bytes")
    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    compression_type: str = _default("compression.type")
    compression_gzip_level: int = _default("compression.gzip.level")
    compression_lz4_level: int = _default("compression.lz4.level")
    compression_zstd_level: int = _default("compression.zstd.level")
    delete_retention_ms: int = _default("delete.retention.ms")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_insync_replicas: int = _default("min.insync.replicas")
    preallocate: bool = _default("preallocate")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    message_downconversion_enable: bool = _default("message.downconversion.enable")
    producer_id_expiration_ms: int = _broker_only_default("producer_id_expiration_ms")

    # ---------------------------------------------------------------------------------------------- derived
    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    # ---------------------------------------------------------------------------------------------- parsing
    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build a config from topic-level keys (``segment.bytes``) or attribute names (``segment_bytes``),
        on top of ``base`` (default: Kafka's defaults). Values may be strings (as in CreateTopics) or Python
        values; ``None`` means "back to the base value". Keys and values are validated as the broker validates
        topic overrides; ``internal.segment.bytes`` sets segment_bytes (and wins over segment.bytes). Keys the
        engine does not act on (tiered storage, throttles) are validated and ignored. Raises
        ``InvalidConfigError`` naming the key."""
        changes: dict[str, Any] = {}
        internal_segment_bytes = None
        for key, raw in props.items():
            d = TOPIC_CONFIGS.get(key) or _BY_FIELD.get(key)
            if d is None:
                raise InvalidConfigError(f"Unknown topic config name: {key}", key=key)
            if raw is None:  # a null value in AlterConfigs means "back to default"
                continue
            value = d.field_value(validate_topic_config(d.name, raw))
            if d.name == "internal.segment.bytes":
                internal_segment_bytes = value
            elif d.log_field is not None:
                changes[d.log_field] = value
        if internal_segment_bytes is not None:
            changes["segment_bytes"] = internal_segment_bytes
        cfg = dataclasses.replace(base or cls(), **changes)
        cfg._check_consistency()
        return cfg

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """Broker-level defaults from server.properties keys (``log.segment.bytes``, ``log.roll.hours``,
        ``log.retention.hours`` ...), each parsed by its type (InvalidConfigError naming the broker key when
        it does not parse; ranges are the broker config's business). Keys that are not log settings are
        ignored. The more precise unit wins, as in Kafka (``log.retention.ms`` over ``.minutes`` over
        ``.hours``)."""
        changes: dict[str, Any] = {}
        for d in TOPIC_CONFIGS.values():
            if d.log_field is None:
                continue
            for syn in d.broker_synonyms:
                raw = props.get(syn.name)
                if raw is None:
                    continue
                value = parse_value(d.synonym_type(syn.name, syn.multiplier), syn.name, raw)
                if syn.multiplier != 1 and value >= 0:
                    value *= syn.multiplier
                changes[d.log_field] = d.field_value(value)
                break
        for f in BROKER_ONLY_LOG_FIELDS:
            if props.get(f.key) is not None:
                changes[f.log_field] = parse_value(f.type, f.key, props[f.key])
        cfg = dataclasses.replace(cls(), **changes)
        cfg._check_consistency()
        return cfg

    def to_props(self) -> dict[str, str]:
        """Topic-level keys -> Kafka's string form of the values (for DescribeConfigs)."""
        return {d.name: to_kafka_string(getattr(self, d.log_field)) or "" for d in _WITH_FIELD}

    def diff_props(self, base: LogConfig | None = None) -> dict[str, str]:
        """Only the keys whose values differ from ``base`` (default: Kafka's defaults) - the topic
        overrides."""
        base = base or LogConfig()
        return {
            d.name: to_kafka_string(getattr(self, d.log_field)) or ""
            for d in _WITH_FIELD
            if getattr(self, d.log_field) != getattr(base, d.log_field)
        }

    def _check_consistency(self) -> None:
        check_compaction_lags(self.min_compaction_lag_ms, self.max_compaction_lag_ms)


_WITH_FIELD: tuple[Any, ...] = tuple(d for d in TOPIC_CONFIGS.values() if d.log_field is not None)
_BY_FIELD: dict[str, TopicConfigDef] = {d.log_field: d for d in _WITH_FIELD}

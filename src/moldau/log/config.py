"""Topic-level log configuration with Kafka's names, defaults and validation.

``LogConfig`` holds every topic-level config Kafka knows (so the broker can serve DescribeConfigs and
AlterConfigs from one place), even the ones the engine does not act on yet (compaction, compression
re-encoding, throttles). Kafka's topic keys map to attributes by replacing dots with underscores, with the
exceptions Kafka itself has between topic keys and broker keys::

    segment.bytes            segment_bytes              log.segment.bytes
    segment.ms               segment_ms                 log.roll.ms (log.roll.hours)
    flush.messages           flush_interval_messages    log.flush.interval.messages
    flush.ms                 flush_interval_ms          log.flush.interval.ms
    max.message.bytes        max_message_bytes          message.max.bytes
    ...

``LogConfig.from_props({"segment.bytes": "1048576"})`` validates like Kafka and raises
``InvalidConfigError`` naming the key. ``LogConfig.from_broker_props(server_props)`` reads the broker-level
defaults (``log.*`` keys; unrelated broker keys are ignored).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .errors import InvalidConfigError

__all__ = ["LogConfig", "TOPIC_CONFIGS", "BROKER_SYNONYMS", "LONG_MAX"]

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(slots=True, frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    message_downconversion_enable: bool = True
    # broker-level only (no topic key): producer.id.expiration.ms
    producer_id_expiration_ms: int = 86400000

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
        on top of ``base`` (default: Kafka's defaults). Values may be strings (as in CreateTopics) or
        Python values. Unknown keys and invalid values raise ``InvalidConfigError`` naming the key."""
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            spec = _BY_KEY.get(key) or _BY_ATTR.get(key)
            if spec is None:
                raise InvalidConfigError(f"Unknown topic config name: {key}", key=key)
            if raw is None:  # a null value in AlterConfigs means "back to default"
                continue
            changes[spec.attr] = spec.parse(spec.key, raw)
        cfg = dataclasses.replace(base or cls(), **changes)
        cfg._check_consistency()
        return cfg

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """Broker-level defaults from server.properties keys (``log.segment.bytes``, ``log.roll.hours``,
        ``log.retention.hours`` ...). Keys that are not log settings are ignored. The more precise unit wins,
        as in Kafka (``log.retention.ms`` over ``.minutes`` over ``.hours``)."""
        changes: dict[str, Any] = {}
        for spec in TOPIC_CONFIGS:
            for bkey, factor in spec.broker_keys:
                if bkey in props and props[bkey] is not None:
                    value = spec.parse(bkey, props[bkey]) if factor == 1 else _parse_long(bkey, props[bkey])
                    if factor != 1:
                        value = value * factor if value >= 0 else value
                    changes[spec.attr] = value
                    break
        if "producer.id.expiration.ms" in props:
            changes["producer_id_expiration_ms"] = _parse_int_range(1, LONG_MAX)(
                "producer.id.expiration.ms", props["producer.id.expiration.ms"]
            )
        cfg = dataclasses.replace(cls(), **changes)
        cfg._check_consistency()
        return cfg

    def to_props(self) -> dict[str, str]:
        """Topic-level keys -> Kafka's string form of the values (for DescribeConfigs)."""
        out: dict[str, str] = {}
        for spec in TOPIC_CONFIGS:
            out[spec.key] = spec.render(getattr(self, spec.attr))
        return out

    def diff_props(self, base: LogConfig | None = None) -> dict[str, str]:
        """Only the keys whose values differ from ``base`` (default: Kafka's defaults) - the topic overrides."""
        base = base or LogConfig()
        return {
            spec.key: spec.render(getattr(self, spec.attr))
            for spec in TOPIC_CONFIGS
            if getattr(self, spec.attr) != getattr(base, spec.attr)
        }

    def _check_consistency(self) -> None:
        if self.compact_enabled and self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                "min.compaction.lag.ms must not be larger than max.compaction.lag.ms", key="min.compaction.lag.ms"
            )


# ---------------------------------------------------------------------------------------------------- specs


def _parse_long(key: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: not a number", key=key)
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: not a number", key=key) from None


def _parse_int_range(lo: int, hi: int) -> Callable[[str, Any], int]:
    def parse(key: str, raw: Any) -> int:
        v = _parse_long(key, raw)
        if not lo <= v <= hi:
            raise InvalidConfigError(
                f"Invalid value {v} for configuration {key}: value must be in [{lo}, {hi}]", key=key
            )
        return v

    return parse


def _parse_bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    s = str(raw).strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: expected true or false", key=key)


def _parse_float_range(lo: float, hi: float) -> Callable[[str, Any], float]:
    def parse(key: str, raw: Any) -> float:
        try:
            v = float(raw)
        except (TypeError, ValueError):
            raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: not a number", key=key) from None
        if not lo <= v <= hi:
            raise InvalidConfigError(
                f"Invalid value {v} for configuration {key}: value must be in [{lo}, {hi}]", key=key
            )
        return v

    return parse


def _parse_choice(*choices: str) -> Callable[[str, Any], str]:
    def parse(key: str, raw: Any) -> str:
        s = str(raw).strip()
        for c in choices:
            if s.lower() == c.lower():
                return c
        raise InvalidConfigError(
            f"Invalid value {raw!r} for configuration {key}: String must be one of: {', '.join(choices)}", key=key
        )

    return parse


def _parse_policy(key: str, raw: Any) -> tuple[str, ...]:
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    out: list[str] = []
    for item in items:
        s = str(item).strip().lower()
        if not s:
            continue
        if s not in ("delete", "compact"):
            raise InvalidConfigError(
                f"Invalid value {raw!r} for configuration {key}: values must be 'delete' and/or 'compact'", key=key
            )
        if s not in out:
            out.append(s)
    if not out:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: empty list", key=key)
    return tuple(out)


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


@dataclass(slots=True, frozen=True)
class _Spec:
    key: str
    attr: str
    parser: Callable[[str, Any], Any]
    broker_keys: tuple[tuple[str, int], ...] = ()

    def parse(self, key: str, raw: Any) -> Any:
        return self.parser(key, raw)

    def render(self, value: Any) -> str:
        return _render(value)


_HOURS = 3600000
_MINUTES = 60000

TOPIC_CONFIGS: tuple[_Spec, ...] = (
    _Spec("cleanup.policy", "cleanup_policy", _parse_policy, (("log.cleanup.policy", 1),)),
    _Spec(
        "compression.type",
        "compression_type",
        _parse_choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        (("compression.type", 1),),
    ),
    _Spec("compression.gzip.level", "compression_gzip_level", _parse_int_range(-1, 9), (("compression.gzip.level", 1),)),
    _Spec("compression.lz4.level", "compression_lz4_level", _parse_int_range(1, 17), (("compression.lz4.level", 1),)),
    _Spec(
        "compression.zstd.level", "compression_zstd_level", _parse_int_range(-131072, 22), (("compression.zstd.level", 1),)
    ),
    _Spec(
        "delete.retention.ms", "delete_retention_ms", _parse_int_range(0, LONG_MAX),
        (("log.cleaner.delete.retention.ms", 1),),
    ),
    _Spec(
        "file.delete.delay.ms", "file_delete_delay_ms", _parse_int_range(0, LONG_MAX),
        (("log.segment.delete.delay.ms", 1),),
    ),
    _Spec(
        "flush.messages", "flush_interval_messages", _parse_int_range(1, LONG_MAX),
        (("log.flush.interval.messages", 1),),
    ),
    _Spec("flush.ms", "flush_interval_ms", _parse_int_range(0, LONG_MAX), (("log.flush.interval.ms", 1),)),
    _Spec("index.interval.bytes", "index_interval_bytes", _parse_int_range(0, INT_MAX), (("log.index.interval.bytes", 1),)),
    _Spec(
        "max.compaction.lag.ms", "max_compaction_lag_ms", _parse_int_range(1, LONG_MAX),
        (("log.cleaner.max.compaction.lag.ms", 1),),
    ),
    _Spec("max.message.bytes", "max_message_bytes", _parse_int_range(0, INT_MAX), (("message.max.bytes", 1),)),
    _Spec(
        "message.downconversion.enable", "message_downconversion_enable", _parse_bool,
        (("log.message.downconversion.enable", 1),),
    ),
    _Spec(
        "message.timestamp.after.max.ms", "message_timestamp_after_max_ms", _parse_int_range(0, LONG_MAX),
        (("log.message.timestamp.after.max.ms", 1),),
    ),
    _Spec(
        "message.timestamp.before.max.ms", "message_timestamp_before_max_ms", _parse_int_range(0, LONG_MAX),
        (("log.message.timestamp.before.max.ms", 1),),
    ),
    _Spec(
        "message.timestamp.difference.max.ms", "message_timestamp_difference_max_ms", _parse_int_range(0, LONG_MAX),
        (("log.message.timestamp.difference.max.ms", 1),),
    ),
    _Spec(
        "message.timestamp.type", "message_timestamp_type", _parse_choice(CREATE_TIME, LOG_APPEND_TIME),
        (("log.message.timestamp.type", 1),),
    ),
    _Spec(
        "min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", _parse_float_range(0.0, 1.0),
        (("log.cleaner.min.cleanable.ratio", 1),),
    ),
    _Spec(
        "min.compaction.lag.ms", "min_compaction_lag_ms", _parse_int_range(0, LONG_MAX),
        (("log.cleaner.min.compaction.lag.ms", 1),),
    ),
    _Spec("min.insync.replicas", "min_insync_replicas", _parse_int_range(1, INT_MAX), (("min.insync.replicas", 1),)),
    _Spec("preallocate", "preallocate", _parse_bool, (("log.preallocate", 1),)),
    _Spec(
        "retention.bytes", "retention_bytes", _parse_int_range(-1, LONG_MAX), (("log.retention.bytes", 1),)
    ),
    _Spec(
        "retention.ms", "retention_ms", _parse_int_range(-1, LONG_MAX),
        (("log.retention.ms", 1), ("log.retention.minutes", _MINUTES), ("log.retention.hours", _HOURS)),
    ),
    # Kafka 3.x accepts segment.bytes >= 14; tests rely on small segments, so the 3.x floor is kept.
    _Spec("segment.bytes", "segment_bytes", _parse_int_range(14, INT_MAX), (("log.segment.bytes", 1),)),
    _Spec(
        "segment.index.bytes", "segment_index_bytes", _parse_int_range(8, INT_MAX),
        (("log.index.size.max.bytes", 1),),
    ),
    _Spec(
        "segment.jitter.ms", "segment_jitter_ms", _parse_int_range(0, LONG_MAX),
        (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOURS)),
    ),
    _Spec(
        "segment.ms", "segment_ms", _parse_int_range(1, LONG_MAX),
        (("log.roll.ms", 1), ("log.roll.hours", _HOURS)),
    ),
    _Spec(
        "unclean.leader.election.enable", "unclean_leader_election_enable", _parse_bool,
        (("unclean.leader.election.enable", 1),),
    ),
)

_BY_KEY: dict[str, _Spec] = {s.key: s for s in TOPIC_CONFIGS}
_BY_ATTR: dict[str, _Spec] = {s.attr: s for s in TOPIC_CONFIGS}

#: topic key -> the broker keys that set its default (most precise first), for DescribeConfigs synonyms.
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {s.key: tuple(k for k, _ in s.broker_keys) for s in TOPIC_CONFIGS}

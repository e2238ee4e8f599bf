"""Group configs (``ConfigResource`` type GROUP, 32) of share groups: defaults from the broker, per-group
values set with IncrementalAlterConfigs, kept in ``__moldau_group_configs.json`` in the data dir.

* share.auto.offset.reset: latest (default), earliest, by_duration:<ISO-8601 duration>;
* share.isolation.level: read_uncommitted (default), read_committed;
* share.record.lock.duration.ms: within group.share.min/max.record.lock.duration.ms, default
  group.share.record.lock.duration.ms;
* share.delivery.count.limit: 2-10, default group.share.delivery.count.limit;
* share.session.timeout.ms, share.heartbeat.interval.ms: within the group.share.min/max keys of the same
  name, defaults group.share.session.timeout.ms and group.share.heartbeat.interval.ms.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from moldau.log.checkpoint import atomic_write
from moldau.protocol.errors import ErrorCode, KafkaError

FILE = "__moldau_group_configs.json"

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration (Java's ``Duration.parse``: PnDTnHnMn.nS) in milliseconds; ValueError if not."""
    mt = _DURATION.match(text.strip())
    if mt is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    d, h, mi, s = (float(mt.group(g) or 0) for g in "dhms")
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


def _check_reset(v: str) -> None:
    if v in ("latest", "earliest"):
        return
    if v.startswith("by_duration:"):
        ms = parse_duration_ms(v[len("by_duration:") :])
        if ms < 0:
            raise ValueError("negative duration")
        return
    raise ValueError("must be latest, earliest or by_duration:<ISO-8601 duration>")


def _check_isolation(v: str) -> None:
    if v not in ("read_uncommitted", "read_committed"):
        raise ValueError("must be read_uncommitted or read_committed")


@dataclass(frozen=True, slots=True)
class _Key:
    broker_key: str | None
    default: Any
    check: Callable[[str, Any], None]
    config_type: int  # DescribeConfigs' ConfigType: 2 STRING, 3 INT


def _int_between(
    lo_key: str | None, hi_key: str | None, lo: int = 1, hi: int = 1 << 31
) -> Callable[[str, Any], None]:
    def check(v: str, cfg: Any) -> None:
        n = int(v)
        a = int(cfg.get(lo_key)) if lo_key else lo
        b = int(cfg.get(hi_key)) if hi_key else hi
        if not a <= n <= b:
            raise ValueError(f"must be between {a} and {b}")

    return check


KEYS: dict[str, _Key] = {
    "share.auto.offset.reset": _Key(None, "latest", lambda v, c: _check_reset(v), 2),
    "share.isolation.level": _Key(None, "read_uncommitted", lambda v, c: _check_isolation(v), 2),
    "share.record.lock.duration.ms": _Key(
        "group.share.record.lock.duration.ms",
        None,
        _int_between("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
        3,
    ),
    "share.delivery.count.limit": _Key(
        "group.share.delivery.count.limit", None, _int_between(None, None, 2, 10), 3
    ),
    "share.session.timeout.ms": _Key(
        "group.share.session.timeout.ms",
        None,
        _int_between("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
        3,
    ),
    "share.heartbeat.interval.ms": _Key(
        "group.share.heartbeat.interval.ms",
        None,
        _int_between("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
        3,
    ),
}


@dataclass(slots=True)
class ShareGroupSettings:
    auto_offset_reset: str
    isolation_level: int  # 0 read_uncommitted, 1 read_committed
    record_lock_duration_ms: int
    delivery_count_limit: int
    session_timeout_ms: int
    heartbeat_interval_ms: int


class GroupConfigStore:
    """Per-group config values (only those set); defaults come from the broker config."""

    def __init__(self, data_dir: str, broker_config: Any) -> None:
        self.path = os.path.join(data_dir, FILE)
        self.broker_config = broker_config
        self.groups: dict[str, dict[str, str]] = {}
        # in a cluster (``cluster.zkconfig.ZkGroupConfigs``): writes one group's configs to ZooKeeper instead
        self.save: Callable[[str, dict[str, str]], None] | None = None
        try:
            with open(self.path) as f:
                self.groups = {g: dict(v) for g, v in json.load(f).items()}
        except FileNotFoundError:
            pass

    def default(self, name: str) -> str:
        k = KEYS[name]
        return str(self.broker_config.get(k.broker_key)) if k.broker_key else str(k.default)

    def value(self, group: str, name: str) -> str:
        return self.groups.get(group, {}).get(name) or self.default(name)

    def settings(self, group: str) -> ShareGroupSettings:
        v = lambda n: self.value(group, n)  # noqa: E731
        return ShareGroupSettings(
            v("share.auto.offset.reset"),
            1 if v("share.isolation.level") == "read_committed" else 0,
            int(v("share.record.lock.duration.ms")),
            int(v("share.delivery.count.limit")),
            int(v("share.session.timeout.ms")),
            int(v("share.heartbeat.interval.ms")),
        )

    def describe(self, group: str, keys: list[str] | None) -> list[tuple[str, str, bool, int]]:
        """(name, value, is_default, config type) per key (all keys when ``keys`` is None)."""
        names = list(KEYS) if keys is None else [k for k in keys if k in KEYS]
        own = self.groups.get(group, {})
        return [(n, own.get(n) or self.default(n), n not in own, KEYS[n].config_type) for n in names]

    def alter(self, group: str, ops: list[tuple[str, int, str | None]], validate_only: bool) -> None:
        """IncrementalAlterConfigs ops (name, op: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT, value)."""
        new = dict(self.groups.get(group, {}))
        for name, op, value in ops:
            if name not in KEYS:
                raise KafkaError.for_code(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
            if op == 1:
                new.pop(name, None)
                continue
            if op != 0:
                raise KafkaError.for_code(
                    ErrorCode.INVALID_CONFIG, f"Only SET and DELETE are allowed for the group config {name}"
                )
            if value is None:
                raise KafkaError.for_code(ErrorCode.INVALID_CONFIG, f"Null value for {name}")
            try:
                KEYS[name].check(value, self.broker_config)
            except ValueError as e:
                raise KafkaError.for_code(
                    ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {e}"
                ) from None
            new[name] = value
        if validate_only:
            return
        if new:
            self.groups[group] = new
        else:
            self.groups.pop(group, None)
        self._store(group, new)

    def _store(self, group: str, configs: dict[str, str]) -> None:
        if self.save is not None:
            self.save(group, configs)
        else:
            atomic_write(self.path, json.dumps(self.groups, sort_keys=True).encode())

    def forget(self, group: str) -> None:
        if self.groups.pop(group, None) is not None:
            self._store(group, {})

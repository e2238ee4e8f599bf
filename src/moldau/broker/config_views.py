"""Typed views of the broker config for the central paths (``config.log``, ``config.replication``,
``config.socket``, ``config.quota``): named, typed attributes instead of string keys.

Each attribute reads its key on access, so dynamic broker configs (AlterConfigs) apply as they do through
``BrokerConfig.get``; a view holds nothing but its config.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["LogView", "QuotaView", "ReplicationView", "SocketView"]


class ConfigSource(Protocol):
    """Typed values by key (``config.BrokerConfig``, which this module does not import)."""

    def get(self, key: str) -> Any: ...


class _View:
    __slots__ = ("_cfg",)

    def __init__(self, cfg: ConfigSource) -> None:
        self._cfg = cfg

    def _int(self, key: str) -> int:
        return int(self._cfg.get(key))


class LogView(_View):
    """``log.*`` keys the broker reads for its logs as a whole (per-topic ones are ``topic_config``'s)."""

    __slots__ = ()

    @property
    def retention_check_interval_ms(self) -> int:
        return self._int("log.retention.check.interval.ms")

    @property
    def flush_offset_checkpoint_interval_ms(self) -> int:
        return self._int("log.flush.offset.checkpoint.interval.ms")

    @property
    def segment_delete_delay_ms(self) -> int:
        return self._int("log.segment.delete.delay.ms")


class ReplicationView(_View):
    """``replica.*`` keys: the cluster replica manager and its fetchers (docs/cluster.md)."""

    __slots__ = ()

    @property
    def lag_time_max_ms(self) -> int:
        return self._int("replica.lag.time.max.ms")

    @property
    def fetch_wait_max_ms(self) -> int:
        return self._int("replica.fetch.wait.max.ms")

    @property
    def fetch_min_bytes(self) -> int:
        return self._int("replica.fetch.min.bytes")

    @property
    def fetch_max_bytes(self) -> int:
        return self._int("replica.fetch.max.bytes")

    @property
    def fetch_response_max_bytes(self) -> int:
        return self._int("replica.fetch.response.max.bytes")

    @property
    def fetch_backoff_ms(self) -> int:
        return self._int("replica.fetch.backoff.ms")

    @property
    def selector_class(self) -> str | None:
        """KIP-392: ``RackAwareReplicaSelector`` (by any package name) or None."""
        value = self._cfg.get("replica.selector.class")
        return str(value) if value else None

    @property
    def rack(self) -> str | None:
        value = self._cfg.get("broker.rack")
        return str(value) if value else None


class SocketView(_View):
    """The listeners' socket options and the request-bytes pool."""

    __slots__ = ()

    @property
    def listen_backlog_size(self) -> int:
        return self._int("socket.listen.backlog.size")

    @property
    def send_buffer_bytes(self) -> int:
        return self._int("socket.send.buffer.bytes")

    @property
    def receive_buffer_bytes(self) -> int:
        return self._int("socket.receive.buffer.bytes")

    @property
    def queued_max_request_bytes(self) -> int:
        return self._int("queued.max.request.bytes")


class QuotaView(_View):
    """The client quotas' sampling windows (docs/limits.md)."""

    __slots__ = ()

    @property
    def window_num(self) -> int:
        return self._int("quota.window.num")

    @property
    def window_size_seconds(self) -> float:
        return float(self._cfg.get("quota.window.size.seconds"))

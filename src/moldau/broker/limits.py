"""Connection and memory limits, and logging that a misbehaving client cannot flood.

* :class:`ConnectionLimiter`: ``max.connections``, ``max.connections.per.ip`` (+
  ``max.connections.per.ip.overrides``, ``host:count`` pairs), ``max.connection.creation.rate`` (broker-wide,
  per second) and the ``connection_creation_rate`` client quota of ip entities (KIP-612). A connection over a
  limit is closed as soon as it is accepted (Kafka closes per-ip excess the same way; for the broker-wide
  limits Kafka's acceptor waits instead, which asyncio's accept loop cannot do without stalling every
  listener).
* :class:`RequestMemory`: ``queued.max.request.bytes``, the bytes of requests read and not yet handled, over
  all connections. A connection whose next request does not fit stops reading (before its buffer is
  allocated) until others finish; a request larger than the whole bound is let in alone.
* :class:`ClientLog`: one log line per client (ip) and kind of event, then at most one line per interval with
  the number of events since; events are counted per kind for the metrics (``bad_frames``, refused
  connections).
* Request bounds (what one request may make the broker create or hold), checked for the whole request before
  anything is created: :func:`check_partitions_per_request` (Kafka's ``ReplicationControlManager``
  ``MAX_PARTITIONS_PER_BATCH``, 10,000 partitions per CreateTopics / CreatePartitions),
  :class:`PartitionCeilings` (``max.topic.partitions``, moldau's, and ``max.broker.partitions``, KIP-578's
  name; both POLICY_VIOLATION) and :func:`check_records_per_request` (Kafka's ``QuorumController``
  ``MAX_RECORDS_PER_USER_OP``: 10,000 ACL bindings or quota entities per request).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1


def parse_overrides(text: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs separated by commas."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"{item!r} is not host:count")
        out[host.strip()] = int(count)
    return out


class ClientLog:
    """Rate-limited warnings per (client ip, kind), with counters per kind."""

    def __init__(
        self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic, max_clients: int = 10_000
    ) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.max_clients = max_clients
        self.counts: dict[str, int] = {}
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # (ip, kind) -> (logged at, suppressed)

    def event(self, kind: str, ip: str, fmt: str, *args: Any, level: int = logging.WARNING) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        key = (ip, kind)
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return
        if len(self._last) >= self.max_clients:
            self._last.clear()
        suppressed = last[1] if last is not None else 0
        self._last[key] = (now, 0)
        if last is not None and suppressed:
            log.log(
                level,
                fmt + " (%d more from this client in the last %d s)",
                *args,
                suppressed,
                int(now - last[0]),
            )
        else:
            log.log(level, fmt, *args)


class ConnectionLimiter:
    """Open connections per broker and per ip, and connection creation rates."""

    def __init__(
        self,
        config: Any,
        quotas: Any = None,
        clock: Callable[[], float] = time.monotonic,
        client_log: ClientLog | None = None,
    ) -> None:
        self.max_connections = int(config.get("max.connections"))
        self.max_per_ip = int(config.get("max.connections.per.ip"))
        self.overrides = parse_overrides(config.get("max.connections.per.ip.overrides"))
        self.max_rate = int(config.get("max.connection.creation.rate"))
        self.quotas = quotas
        self.clock = clock
        self.log = client_log or ClientLog()
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._recent: deque[float] = deque()  # accept times in the last second (broker-wide rate)
        self._recent_ip: dict[str, deque[float]] = {}
        self.refused = 0

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; the reason it must be closed, or None."""
        reason = self._check(ip)
        if reason is not None:
            self.refused += 1
            self.log.event("connections_refused", ip, "refusing connections from %s: %s", ip, reason)
            return reason
        self.total += 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        return None

    def _check(self, ip: str) -> str | None:
        if self.total >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        limit = self.limit_for(ip)
        if self.per_ip.get(ip, 0) >= limit:
            return f"max.connections.per.ip ({limit}) reached"
        now = self.clock()
        if self.max_rate < INT_MAX:
            recent = self._recent
            while recent and recent[0] <= now - 1.0:
                recent.popleft()
            if len(recent) >= self.max_rate:
                return f"max.connection.creation.rate ({self.max_rate}/s) exceeded"
            recent.append(now)
        ip_rate = self.quotas.ip_quota(ip) if self.quotas is not None and not self.quotas.empty else None
        if ip_rate is not None:
            dq = self._recent_ip.setdefault(ip, deque())
            while dq and dq[0] <= now - 1.0:
                dq.popleft()
            if len(dq) >= ip_rate:
                return f"connection_creation_rate quota ({ip_rate:g}/s) exceeded"
            dq.append(now)
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)
            self._recent_ip.pop(ip, None)


class RequestMemory:
    """A broker-wide bound on the bytes of requests read and not yet handled
    (``queued.max.request.bytes``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # <= 0: unbounded
        self.used = 0
        self._waiting: deque[Any] = deque()  # connections waiting for room, in arrival order

    @property
    def bounded(self) -> bool:
        return self.capacity > 0

    def try_reserve(self, n: int) -> bool:
        if self.capacity <= 0:
            return True
        if self.used + n > self.capacity and self.used > 0:
            return False
        self.used += n
        return True

    def wait(self, conn: Any) -> None:
        self._waiting.append(conn)

    def release(self, n: int) -> None:
        if self.capacity <= 0:
            return
        self.used -= n
        # wake waiters in order while there is room; one that still does not fit queues again at the end
        for _ in range(len(self._waiting)):
            if self.used >= self.capacity or not self._waiting:
                break
            self._waiting.popleft().memory_available()


# ------------------------------------------------------------------------------------------ request bounds
MAX_PARTITIONS_PER_BATCH = 10_000  # Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."
MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."


def policy_violation(message: str) -> KafkaError:
    return KafkaError.for_code(int(ErrorCode.POLICY_VIOLATION), message)


def requested_partitions(topics: Any, default_num_partitions: int) -> int:
    """Partitions a CreateTopics request asks for, counted as Kafka's ``validateTotalNumberOfPartitions``:
    the assignments when given, else ``num_partitions`` (the broker's default for -1; nothing for other
    non-positive values, which fail on their own)."""
    total = 0
    for t in topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += default_num_partitions
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


def check_partitions_per_request(total: int) -> None:
    """POLICY_VIOLATION for more than 10,000 partitions in one CreateTopics or CreatePartitions."""
    if total > MAX_PARTITIONS_PER_BATCH:
        raise policy_violation(EXCESSIVE_PARTITIONS)


def check_records_per_request(count: int) -> None:
    """POLICY_VIOLATION for more than 10,000 items (ACL bindings, quota entities) in one request, as Kafka's
    controller refuses a request that would write more records than ``MAX_RECORDS_PER_USER_OP``."""
    if count > MAX_RECORDS_PER_USER_OP:
        raise policy_violation(EXCESSIVE_BATCH)


class PartitionCeilings:
    """``max.topic.partitions`` (moldau: partitions of one topic) and ``max.broker.partitions`` (KIP-578's
    name: partition replicas one broker holds; replicas are spread evenly, so a cluster counts the average
    over its live brokers, rounded up), for one request: :meth:`check` before a topic is created or grown
    (POLICY_VIOLATION), :meth:`add` after."""

    def __init__(self, config: Any, topics: Iterable[Any], brokers: int) -> None:
        self.max_topic = int(config.get("max.topic.partitions"))
        self.max_broker = int(config.get("max.broker.partitions"))
        self.brokers = max(1, brokers)
        self.replicas = sum(t.num_partitions * max(1, int(getattr(t, "replication_factor", 1) or 1))
                            for t in topics)

    def per_broker(self, replicas: int) -> int:
        return -(-replicas // self.brokers)

    def check(self, name: str, topic_partitions: int, new_replicas: int) -> None:
        if topic_partitions > self.max_topic:
            raise policy_violation(
                f"Topic '{name}' would have {topic_partitions} partitions, more than max.topic.partitions "
                f"({self.max_topic}).")
        after = self.per_broker(self.replicas + new_replicas)
        if new_replicas > 0 and after > self.max_broker:
            raise policy_violation(
                f"Topic '{name}' would bring a broker to {after} partition replicas, more than "
                f"max.broker.partitions ({self.max_broker}).")

    def add(self, new_replicas: int) -> None:
        self.replicas += new_replicas

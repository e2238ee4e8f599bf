"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546, KIP-612): the store, Kafka's precedence and the
throttle computation.

* Entities: ``user``, ``client-id`` (alone or together) and ``ip``; a ``None`` name is the entity type's
  default (``<default>``). Keys: ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
  ``controller_mutation_rate`` for user/client-id entities, ``connection_creation_rate`` for ip entities.
* Precedence per quota key, most specific first (Kafka's DefaultQuotaCallback)::

      user + client-id, user + default client-id, user,
      default user + client-id, default user + default client-id, default user,
      client-id, default client-id

  The matched entity is also the *sharing* group: a quota set on a user is one budget for all of its
  clients, a quota on (user, client-id) one budget per client.
* Throttling as KIP-599's token bucket (Kafka uses it for controller mutations): credit accrues at the quota's
  rate up to ``quota.window.num * quota.window.size.seconds`` worth (what Kafka's sampled rate tolerates
  after an idle period), a new client starts with one window's worth, every request takes its bytes (or
  request time) out, and a negative balance is the throttle time: ``-balance / quota`` (capped at the full
  window). Kafka throttles bytes with the sampled ``Rate`` (``(rate - quota) / quota * window``), which lets
  a new client send ``num - 1`` windows' worth at once, and gives a throttle pause back as a new burst when
  the sample that caused it expires; with the bucket a greedy client holds its rate within a few percent
  over any 10 s (simulated in tests/unit/test_quotas.py). The sampled rate is still kept per client for the
  metrics.
* ``controller_mutation_rate`` (KIP-599): partitions created or deleted per second by CreateTopics,
  CreatePartitions and DeleteTopics, counted in a token bucket per sharing group exactly as Kafka's
  ``TokenBucket``: a burst of ``quota * quota.window.num * quota.window.size.seconds`` (a new client starts
  with the whole burst), refilled at the quota. :class:`ControllerMutationQuota` is one request's view: strict
  (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+: a mutation is refused with
  THROTTLING_QUOTA_EXCEEDED while the bucket is negative, one that finds it non-negative is accepted whole,
  as Kafka's ``StrictControllerMutationQuota``) or permissive (older versions: everything is accepted and the
  deficit becomes the throttle time, ``PermissiveControllerMutationQuota``).
* The store sits behind :class:`QuotaStore`. :class:`FileQuotaStore` keeps the quotas in
  ``<data-dir>/__moldau_quotas.json`` (atomic rewrite on every change); a cluster keeps them elsewhere
  (ZooKeeper ``/config/users``, ``/config/clients``, ``/config/ips``) behind the same interface.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from moldau.log.checkpoint import atomic_write
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

QUOTAS_FILE = "__moldau_quotas.json"

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
CLIENT_KEYS = frozenset(
    {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE}
)
IP_KEYS = frozenset({CONNECTION_CREATION_RATE})

# ApiVersions and the SASL requests are never throttled (a client must be able to connect and log in).
QUOTA_EXEMPT_APIS = frozenset({17, 18, 36})

# Sensors, buckets and resolved quotas are kept per sharing group, and client ids are chosen by clients (any
# string of up to 32,767 characters): each table drops a group unused for an hour, as Kafka expires a quota
# sensor (ClientQuotaManager's InactiveSensorExpirationTimeSeconds), and beyond this many groups or this many
# characters of user and client-id names the least recently used go first (Kafka has no such bound).
SENSOR_EXPIRY_S = 3600.0
MAX_SENSORS = 100_000
MAX_SENSOR_NAME_CHARS = 16 << 20

# An entity: sorted tuple of (entity type, name or None for the default).
Entity = tuple[tuple[str, "str | None"], ...]


class QuotaError(ValueError):
    """An invalid entity or quota (the protocol's INVALID_REQUEST)."""


def make_entity(parts: Iterable[tuple[str, str | None]]) -> Entity:
    """Validate and normalise entity components: known types, no type twice, ip never combined."""
    items = list(parts)
    if not items:
        raise QuotaError("the entity is empty")
    types = [t for t, _ in items]
    for t in types:
        if t not in ENTITY_TYPES:
            raise QuotaError(f"unknown entity type {t!r}")
    if len(set(types)) != len(types):
        raise QuotaError("an entity type is given twice")
    if IP in types and len(types) > 1:
        raise QuotaError("an ip entity cannot be combined with user or client-id")
    for t, name in items:
        if name is not None and name == "":
            raise QuotaError(f"empty {t} name (use the default entity for <default>)")
    return tuple(sorted(items))


def valid_keys(entity: Entity) -> frozenset[str]:
    return IP_KEYS if entity[0][0] == IP else CLIENT_KEYS


def validate_quota(entity: Entity, key: str, value: float) -> None:
    if key not in valid_keys(entity):
        raise QuotaError(f"invalid quota key {key!r} for {describe_entity(entity)}")
    if not value > 0:
        raise QuotaError(f"quota {key} must be greater than 0, not {value}")
    if key == CONNECTION_CREATION_RATE and value != int(value):
        raise QuotaError(f"quota {key} must be an integer, not {value}")


def describe_entity(entity: Entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def apply_changes(
    quotas: dict[Entity, dict[str, float]], changes: list[tuple[Entity, dict[str, float | None]]]
) -> dict[Entity, dict[str, float]]:
    """A copy of ``quotas`` with the changes applied (value None removes a key; an entity left without keys
    goes)."""
    new = {e: dict(v) for e, v in quotas.items()}
    for entity, ops in changes:
        values = new.setdefault(entity, {})
        for k, v in ops.items():
            if v is None:
                values.pop(k, None)
            else:
                values[k] = float(v)
        if not values:
            del new[entity]
    return new


class QuotaStore(Protocol):
    """Where quotas are kept. The manager reads through ``all()`` and writes through ``alter()``."""

    def all(self) -> dict[Entity, dict[str, float]]: ...

    def alter(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> None:
        """Apply changes (value None removes a key) atomically and durably."""


class FileQuotaStore:
    """Quotas in one JSON file in the broker's data directory."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, QUOTAS_FILE)
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            log.error("cannot read %s (%s): starting without client quotas", self.path, e)
            return
        for row in doc.get("quotas", []):
            try:
                entity = make_entity((p[0], p[1]) for p in row["entity"])
                values = {str(k): float(v) for k, v in row["values"].items()}
            except (KeyError, TypeError, ValueError, QuotaError) as e:
                log.error("skipping an unreadable quota entry in %s: %s", self.path, e)
                continue
            if values:
                self._quotas[entity] = values

    def all(self) -> dict[Entity, dict[str, float]]:
        return {e: dict(v) for e, v in self._quotas.items()}

    def alter(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> None:
        new = apply_changes(self._quotas, changes)
        doc = {
            "version": 1,
            "quotas": [{"entity": [list(p) for p in e], "values": v} for e, v in new.items()],
        }
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())
        self._quotas = new


class MemoryQuotaStore:
    """Quotas held in memory only (unit tests)."""

    def __init__(self) -> None:
        self._quotas: dict[Entity, dict[str, float]] = {}

    def all(self) -> dict[Entity, dict[str, float]]:
        return {e: dict(v) for e, v in self._quotas.items()}

    def alter(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> None:
        self._quotas = apply_changes(self._quotas, changes)


# ------------------------------------------------------------------------------------------------ rates
@dataclass(slots=True)
class Rate:
    """A sampled rate: samples on a grid of ``window_s`` seconds, the current one and ``num - 1`` before
    it."""

    num: int
    window_s: float
    created: float | None = None
    starts: list[float] = field(default_factory=list)  # grid-aligned sample starts, ascending
    values: list[float] = field(default_factory=list)

    def _oldest_start(self, now: float) -> float:
        current = (now // self.window_s) * self.window_s
        return current - (self.num - 1) * self.window_s

    def record(self, value: float, now: float) -> None:
        if self.created is None:
            self.created = now
        start = (now // self.window_s) * self.window_s
        if self.starts and self.starts[-1] == start:
            self.values[-1] += value
        else:
            self.starts.append(start)
            self.values.append(value)
        self._purge(now)

    def _purge(self, now: float) -> None:
        oldest = self._oldest_start(now)
        while self.starts and self.starts[0] < oldest:
            self.starts.pop(0)
            self.values.pop(0)

    def window(self, now: float) -> float:
        """The time the samples cover (empty samples count): from the oldest sample slot, or from the first
        record when that is later; at least one sample window."""
        begin = self._oldest_start(now)
        if self.created is not None and self.created > begin:
            begin = self.created
        return max(self.window_s, now - begin)

    def measure(self, now: float) -> float:
        self._purge(now)
        return sum(self.values) / self.window(now)


# ------------------------------------------------------------------------------------------------ groups
K = TypeVar("K", bound=tuple[Any, ...])
V = TypeVar("V")


def _name_chars(key: tuple[Any, ...]) -> int:
    return sum(len(part) for part in key if isinstance(part, str))


class GroupTable(Generic[K, V]):
    """State per key chosen by clients, least recently used first: an entry unused for ``expiry_s`` goes
    (Kafka's quota sensor expiry), and so do the least recently used beyond ``max_entries`` entries or
    ``max_chars`` characters of the keys' names. Every access removes at most what is due, oldest first."""

    __slots__ = ("expiry_s", "max_entries", "max_chars", "chars", "_d")

    def __init__(self, expiry_s: float = SENSOR_EXPIRY_S, max_entries: int = MAX_SENSORS,
                 max_chars: int = MAX_SENSOR_NAME_CHARS) -> None:
        self.expiry_s = expiry_s
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.chars = 0
        self._d: dict[K, list[Any]] = {}  # key -> [value, last used]; insertion order is use order

    def get(self, key: K, now: float) -> V | None:
        entry = self._d.pop(key, None)
        if entry is not None:
            entry[1] = now
            self._d[key] = entry  # the most recently used now
        self._evict(now)
        return None if entry is None else entry[0]

    def contains(self, key: K) -> bool:
        return key in self._d

    def put(self, key: K, value: V, now: float) -> V:
        old = self._d.pop(key, None)
        if old is not None:
            self.chars -= _name_chars(key)
        self._d[key] = [value, now]
        self.chars += _name_chars(key)
        self._evict(now)
        return value

    def _evict(self, now: float) -> None:
        d = self._d
        while d:
            key = next(iter(d))
            if (now - d[key][1] < self.expiry_s and len(d) <= self.max_entries
                    and self.chars <= self.max_chars):
                return
            del d[key]
            self.chars -= _name_chars(key)

    def clear(self) -> None:
        self._d.clear()
        self.chars = 0

    def items(self) -> list[tuple[K, V]]:
        return [(k, e[0]) for k, e in self._d.items()]

    def __len__(self) -> int:
        return len(self._d)


# ------------------------------------------------------------------------------------------------ manager
@dataclass(slots=True)
class ClientMetrics:
    """Per quota group (user, client-id) and key: the token bucket that throttles, the measured rate and the
    throttle time handed out."""

    rate: Rate
    tokens: float | None = None  # None: not yet used (a new client starts with one window's worth)
    last: float = 0.0
    throttle_ms_total: float = 0.0
    throttled: int = 0
    recorded_total: float = 0.0


@dataclass(slots=True)
class MutationBucket:
    """Kafka's ``TokenBucket`` of one sharing group's controller mutations."""

    tokens: float
    last: float
    throttle_ms_total: float = 0.0
    throttled: int = 0
    recorded_total: float = 0.0


# the strict controller mutation quota applies from these versions on (Kafka's KafkaApis / ControllerApis)
STRICT_MUTATION_SINCE = {19: 6, 20: 5, 37: 3}  # CreateTopics, DeleteTopics, CreatePartitions


class ControllerMutationQuota:
    """One request's controller mutation quota (Kafka's ``ControllerMutationQuota``): ``record(partitions)``
    before each topic's mutation, ``throttle_time_ms`` for the response. Without a quota for the client
    (``bound`` None) it accepts everything (Kafka's ``UnboundedControllerMutationQuota``)."""

    def __init__(self, manager: "QuotaManager | None", group: tuple[str, str] | None, bound: float | None,
                 strict: bool) -> None:
        self.manager = manager
        self.group = group
        self.bound = bound
        self.strict = strict
        self._throttle_ms = 0
        self._recorded_at = 0.0

    @property
    def unbounded(self) -> bool:
        return self.bound is None or self.manager is None

    def record(self, partitions: int) -> None:
        """Charge ``partitions`` mutations. Strict: raises KafkaError THROTTLING_QUOTA_EXCEEDED (nothing
        charged) while the bucket is negative. Permissive: always charged; a negative balance is the throttle
        time."""
        if self.manager is None or self.bound is None or self.group is None:
            return
        now = self.manager.clock()
        bucket = self.manager._mutation_bucket(self.group, self.bound, now)
        if self.strict and bucket.tokens < 0:
            self._set_throttle(bucket, now)
            raise KafkaError.for_code(int(ErrorCode.THROTTLING_QUOTA_EXCEEDED),
                                      "The throttling quota has been exceeded.")
        burst = self.bound * self.manager.window_num * self.manager.window_s
        bucket.tokens = min(burst, bucket.tokens - partitions)
        bucket.recorded_total += partitions
        if not self.strict and bucket.tokens < 0:
            self._set_throttle(bucket, now)

    def _set_throttle(self, bucket: MutationBucket, now: float) -> None:
        assert self.bound is not None
        self._throttle_ms = round(-bucket.tokens / self.bound * 1000)
        self._recorded_at = now
        bucket.throttled += 1
        bucket.throttle_ms_total += self._throttle_ms

    @property
    def throttle_time_ms(self) -> int:
        """The throttle time recorded, less the time since (the answer may leave later than the refusal)."""
        if not self._throttle_ms or self.manager is None:
            return 0
        elapsed_ms = (self.manager.clock() - self._recorded_at) * 1000
        return max(0, int(self._throttle_ms - elapsed_ms))


class QuotaManager:
    """Resolves quotas for (user, client-id) and ip, records usage and computes throttle times."""

    def __init__(
        self,
        store: QuotaStore,
        *,
        window_num: int = 11,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        max_groups: int = MAX_SENSORS,
        max_name_chars: int = MAX_SENSOR_NAME_CHARS,
    ) -> None:
        self.store = store
        self.window_num = max(2, int(window_num))
        self.window_s = float(window_s)
        self.clock = clock
        self._quotas: dict[Entity, dict[str, float]] = store.all()
        bounds = (SENSOR_EXPIRY_S, max_groups, max_name_chars)
        self._sensors: GroupTable[tuple[str, str, str], ClientMetrics] = GroupTable(*bounds)
        self._resolved: GroupTable[tuple[str, str, str], tuple[float, tuple[str, str]] | None] = GroupTable(
            *bounds)
        self._mutation_buckets: GroupTable[tuple[str, str], MutationBucket] = GroupTable(*bounds)

    # --------------------------------------------------------------------------- admin
    @property
    def quotas(self) -> dict[Entity, dict[str, float]]:
        return self._quotas

    def alter(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> None:
        self.store.alter(changes)
        self._quotas = self.store.all()
        self._resolved.clear()

    def reload(self) -> None:
        """Re-read the store (for a store changed from outside, e.g. a cluster's watcher)."""
        self._quotas = self.store.all()
        self._resolved.clear()

    def describe(
        self, components: list[tuple[str, int, str | None]], strict: bool
    ) -> dict[Entity, dict[str, float]]:
        """DescribeClientQuotas filter: (entity type, match type 0 exact / 1 default / 2 any specified,
        name). ``strict``: only entities made of exactly the given types. "Any specified" matches every entity
        with that type, its default included, as Kafka's (KRaft) ClientQuotasImage.describe does."""
        for t, match_type, _ in components:
            if t not in ENTITY_TYPES:
                raise QuotaError(f"unknown entity type {t!r}")
            if match_type not in (0, 1, 2):
                raise QuotaError(f"unknown match type {match_type}")
        types = [c[0] for c in components]
        if len(set(types)) != len(types):
            raise QuotaError("an entity type is given twice in the filter")
        out: dict[Entity, dict[str, float]] = {}
        for entity, values in self._quotas.items():
            names = dict(entity)
            if strict and set(names) != set(types):
                continue
            ok = True
            for t, match_type, match in components:
                if t not in names:
                    ok = False
                elif match_type == 0:
                    ok = names[t] is not None and names[t] == match
                elif match_type == 1:
                    ok = names[t] is None
                if not ok:
                    break
            if ok and values:
                out[entity] = dict(values)
        return out

    # --------------------------------------------------------------------------- resolution
    def quota_for(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """(bound, sharing group) of ``key`` for this user and client id, or None without a quota."""
        ck = (key, user, client_id)
        now = self.clock()
        cached = self._resolved.get(ck, now)
        if cached is not None or self._resolved.contains(ck):
            return cached
        q = self._quotas
        candidates: list[tuple[Entity, tuple[str, str]]] = [
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        ]
        found: tuple[float, tuple[str, str]] | None = None
        for entity, group in candidates:
            values = q.get(entity)
            if values is not None and key in values:
                found = (values[key], group)
                break
        self._resolved.put(ck, found, now)
        return found

    def ip_quota(self, ip: str) -> float | None:
        for entity in (((IP, ip),), ((IP, None),)):
            values = self._quotas.get(entity)
            if values is not None and CONNECTION_CREATION_RATE in values:
                return values[CONNECTION_CREATION_RATE]
        return None

    @property
    def empty(self) -> bool:
        return not self._quotas

    # --------------------------------------------------------------------------- enforcement
    def record(self, key: str, user: str, client_id: str, value: float, now: float | None = None) -> int:
        """Record ``value`` (bytes, or request-time percentage) against the client's quota for ``key``;
        the throttle time in ms (0 when within the quota or without one)."""
        resolved = self.quota_for(key, user, client_id)
        if resolved is None:
            return 0
        bound, group = resolved
        now = self.clock() if now is None else now
        sk = (key, group[0], group[1])
        sensor = self._sensors.get(sk, now)
        if sensor is None:
            sensor = self._sensors.put(sk, ClientMetrics(Rate(self.window_num, self.window_s)), now)
        sensor.rate.record(value, now)
        sensor.recorded_total += value
        horizon = self.window_num * self.window_s
        if sensor.tokens is None:
            sensor.tokens = bound * self.window_s
        else:
            sensor.tokens = min(bound * horizon, sensor.tokens + (now - sensor.last) * bound)
        sensor.last = now
        sensor.tokens -= value
        if sensor.tokens >= 0:
            return 0
        ms = int(min(-sensor.tokens / bound, horizon) * 1000)
        if ms > 0:
            sensor.throttled += 1
            sensor.throttle_ms_total += ms
        return ms

    def request_throttle(
        self,
        principal: str | None,
        client_id: str | None,
        api_key: int,
        request_bytes: int,
        response_bytes: int,
        seconds: float,
    ) -> int:
        """Throttle time in ms of one handled request: produce bytes against ``producer_byte_rate``, fetch
        response bytes against ``consumer_byte_rate``, handler time against ``request_percentage`` (100 = one
        thread busy all the time); the largest wins, as Kafka."""
        user = user_of(principal)
        cid = client_id or ""
        ms = 0
        if api_key == 0:
            ms = self.record(PRODUCER_BYTE_RATE, user, cid, request_bytes)
        elif api_key == 1:
            ms = self.record(CONSUMER_BYTE_RATE, user, cid, response_bytes)
        if api_key not in QUOTA_EXEMPT_APIS:
            ms = max(ms, self.record(REQUEST_PERCENTAGE, user, cid, seconds * 100.0))
        return ms

    def mutation_quota(self, principal: str | None, client_id: str | None, api_key: int,
                       version: int) -> ControllerMutationQuota:
        """The controller mutation quota of one CreateTopics / CreatePartitions / DeleteTopics request: strict
        from the version Kafka made it strict, permissive before."""
        strict = version >= STRICT_MUTATION_SINCE.get(api_key, 0)
        resolved = self.quota_for(CONTROLLER_MUTATION_RATE, user_of(principal), client_id or "")
        if resolved is None:
            return ControllerMutationQuota(None, None, None, strict)
        bound, group = resolved
        return ControllerMutationQuota(self, group, bound, strict)

    def _mutation_bucket(self, group: tuple[str, str], bound: float, now: float) -> MutationBucket:
        """The sharing group's bucket, refilled at ``bound`` per second up to the burst (a new one is
        full)."""
        burst = bound * self.window_num * self.window_s
        bucket = self._mutation_buckets.get(group, now)
        if bucket is None:
            bucket = self._mutation_buckets.put(group, MutationBucket(burst, now), now)
        else:
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.last) * bound)
            bucket.last = now
        return bucket

    def metrics(self) -> list[tuple[str, str, str, float, float, float]]:
        """(key, user, client_id, rate now, throttle ms total, recorded total) per sensor."""
        now = self.clock()
        return [
            (k, u, c, s.rate.measure(now), s.throttle_ms_total, s.recorded_total)
            for (k, u, c), s in sorted(self._sensors.items(), key=lambda kv: kv[0])
        ]


def user_of(principal: str | None) -> str:
    """The quota user of a principal ``User:name`` (Kafka quotas use the principal's name)."""
    if not principal:
        return "ANONYMOUS"
    return principal.removeprefix("User:")


def request_mutation_quota(ctx: Any) -> ControllerMutationQuota:
    """The controller mutation quota of the request in ``ctx`` (a handler's RequestContext)."""
    quotas = ctx.services.quotas
    if quotas is None or quotas.empty:
        return ControllerMutationQuota(None, None, None, False)
    return quotas.mutation_quota(getattr(ctx.connection, "principal", None), ctx.client_id, ctx.api_key,
                                 ctx.version)


def mutation_throttle(ctx: Any, quota: ControllerMutationQuota) -> int:
    """The throttle time for the response of a mutating request (KIP-599); a throttled connection handles
    nothing more for that long (KIP-219), as for the other client quotas."""
    ms = quota.throttle_time_ms
    if ms > 0:
        mute = getattr(ctx.connection, "mute", None)
        if mute is not None:
            mute(ms)
    return ms

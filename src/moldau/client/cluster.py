"""Cluster metadata and the connections to its brokers.

``Cluster`` bootstraps from ``bootstrap.servers``, keeps one ``Connection`` per broker (opened on demand,
reconnected with exponential backoff and jitter), and keeps the metadata of the topics the client uses:
refreshed every ``metadata.max.age.ms``, on request (``request_update()``: after NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, a new leader epoch...) and when a topic is first used.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable, TypeVar

from moldau._aio import wait_for
from moldau.protocol import messages as m

from .config import ClientConfig, parse_bootstrap
from .conn import Connection, describe_os_error
from .errors import (
    AuthenticationError,
    BootstrapError,
    Codes,
    KafkaConnectionError,
    KafkaTimeoutError,
    broker_error,
    error_name,
)
from .security import build_ssl_context, sasl_credentials
from .types import BrokerMetadata, PartitionMetadata, TopicMetadata

if TYPE_CHECKING:  # the message stubs' base classes (no run-time module)
    from moldau.protocol.messages._types import ApiMessage, ApiRequest

_Resp = TypeVar("_Resp", bound="ApiMessage")

log = logging.getLogger(__name__)

__all__ = ["Cluster"]

_METADATA = 3
_FIND_COORDINATOR = 10
_ZERO_UUID = uuid.UUID(int=0)
# connection ids above this are second connections to a broker for group-coordinator traffic
_COORDINATOR_BASE = (1 << 31) - 1


def _silence(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()



def _forget(connecting: dict[int, asyncio.Future[Connection]], node_id: int, _fut: object) -> None:
    connecting.pop(node_id, None)


class _NodeState:
    __slots__ = ("failures", "next_attempt", "last_error")

    def __init__(self) -> None:
        self.failures = 0
        self.next_attempt = 0.0
        self.last_error: str | None = None


class Cluster:
    """Metadata + broker connections shared by one producer, consumer or admin client."""

    def __init__(self, config: ClientConfig, *, allow_auto_topic_creation: bool = True) -> None:
        self.config = config
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.bootstrap = [parse_bootstrap(a) for a in config["bootstrap.servers"]]
        self.client_id = config["client.id"]
        # TLS context and SASL credentials, checked once here (ConfigError naming a bad setting)
        self.ssl_context = build_ssl_context(config)
        self.sasl = sasl_credentials(config)
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.topic_errors: dict[str, int] = {}
        self.topic_ids: dict[uuid.UUID, str] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.version = 0  # bumped by every metadata update
        self.last_refresh = 0.0
        self._wanted: set[str] = set()
        self._all_topics = False
        self._conns: dict[int, Connection] = {}
        self._connecting: dict[int, asyncio.Future[Connection]] = {}
        self._nodes: dict[int, _NodeState] = {}
        self._aliases: dict[int, int] = {}  # coordinator connection id -> broker node id
        self._update_event: asyncio.Event | None = None
        self._update_waiters: list[asyncio.Future] = []
        self._refresh_task: asyncio.Task | None = None
        self._listeners: list[Callable[[Cluster], object]] = []
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rand = random.Random()

    # ------------------------------------------------------------------------------------------------
    # lifecycle

    async def start(self) -> None:
        """Reach a bootstrap server and load the first metadata (BootstrapError when none answers)."""
        self._loop = asyncio.get_running_loop()
        self._update_event = asyncio.Event()
        await self._bootstrap()
        self._refresh_task = self._loop.create_task(self._refresh_loop(), name="moldau-metadata")

    async def _bootstrap(self) -> None:
        causes: list[str] = []
        for i, (host, port) in enumerate(self.bootstrap):
            node_id = -1 - i
            try:
                conn = await self._open(node_id, host, port)
            except KafkaConnectionError as exc:
                causes.append(f"{host}:{port}: "
                              f"{getattr(exc, 'reason', None) or describe_os_error(exc.__cause__ or exc)}")
                continue
            try:
                resp = await conn.send(_METADATA, self._metadata_request(conn, []))
            except Exception as exc:  # noqa: BLE001
                causes.append(f"{host}:{port}: {exc}")
                conn.close()
                continue
            self._apply_metadata(resp, [])
            self._adopt_bootstrap(conn)
            return
        if len(causes) == 1:
            raise BootstrapError(f"cannot reach bootstrap server {causes[0]}")
        raise BootstrapError("cannot reach any bootstrap server: " + "; ".join(causes))

    def _adopt_bootstrap(self, conn: Connection) -> None:
        """Keep the bootstrap connection as the connection of the broker at the same address."""
        for b in self.brokers.values():
            if (b.host, b.port) == (conn.host, conn.port) and b.node_id not in self._conns:
                conn.node_id = b.node_id
                self._conns[b.node_id] = conn
                conn.add_close_callback(self._on_conn_closed)
                return
        conn.close()

    async def close(self) -> None:
        self._closed = True
        if self._refresh_task is not None:
            self._refresh_task.cancel()
            try:
                await self._refresh_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        for fut in self._update_waiters:
            if not fut.done():
                fut.set_exception(KafkaConnectionError("client closed"))
        self._update_waiters.clear()
        for conn in list(self._conns.values()):
            conn.close()
        self._conns.clear()

    # ------------------------------------------------------------------------------------------------
    # connections

    async def _open(self, node_id: int, host: str, port: int) -> Connection:
        c = self.config
        return await Connection.open(
            host,
            port,
            connect_timeout_ms=c["socket.connection.setup.timeout.ms"],
            node_id=node_id,
            client_id=self.client_id,
            request_timeout_ms=c["request.timeout.ms"],
            software_name=c["client.software.name"] or "moldau",
            software_version=c["client.software.version"],
            send_buffer_bytes=c["send.buffer.bytes"],
            receive_buffer_bytes=c["receive.buffer.bytes"],
            ssl_context=self.ssl_context,
            sasl=self.sasl,
        )

    def _on_conn_closed(self, conn: Connection) -> None:
        if self._conns.get(conn.node_id) is conn:
            del self._conns[conn.node_id]

    def connected(self, node_id: int) -> Connection | None:
        conn = self._conns.get(node_id)
        return conn if conn is not None and conn.connected else None

    async def connection(self, node_id: int) -> Connection:
        """The connection to a broker, opened (or reopened after backoff) when needed."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        fut = self._connecting.get(node_id)
        if fut is None:
            fut = asyncio.ensure_future(self._connect(node_id))
            self._connecting[node_id] = fut
            fut.add_done_callback(partial(_forget, self._connecting, node_id))
        return await asyncio.shield(fut)

    def coordinator_node(self, node_id: int) -> int:
        """The id of a second connection to broker ``node_id``, for group-coordinator requests: a broker
        answers one connection's requests in order, so heartbeats and commits sharing it with fetches would
        wait behind every fetch long poll (the Java client keeps its coordinator connection apart for this
        too)."""
        alias = _COORDINATOR_BASE - node_id
        self._aliases[alias] = node_id
        return alias

    async def _connect(self, node_id: int) -> Connection:
        broker = self.brokers.get(self._aliases.get(node_id, node_id))
        if broker is None:
            if node_id < 0 and -1 - node_id < len(self.bootstrap):
                host, port = self.bootstrap[-1 - node_id]
            else:
                raise KafkaConnectionError(f"unknown broker node {node_id}")
        else:
            host, port = broker.host, broker.port
        st = self._nodes.setdefault(node_id, _NodeState())
        wait = st.next_attempt - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            conn = await self._open(node_id, host, port)
        except AuthenticationError as exc:
            # fatal: reported to the caller as it is; the node waits out the longest backoff before another
            # try
            st.failures += 1
            st.next_attempt = time.monotonic() + self.config["reconnect.backoff.max.ms"] / 1000.0
            st.last_error = str(exc)
            log.error("node %d (%s:%d): %s", node_id, host, port, exc)
            raise
        except KafkaConnectionError as exc:
            st.failures += 1
            base = self.config["reconnect.backoff.ms"]
            cap = self.config["reconnect.backoff.max.ms"]
            backoff = min(base * (2 ** min(st.failures - 1, 20)), cap) * self._rand.uniform(0.8, 1.2)
            st.next_attempt = time.monotonic() + backoff / 1000.0
            st.last_error = str(exc)
            log.info(
                "node %d (%s:%d) unreachable (%s); next attempt in %.0f ms", node_id, host, port, exc, backoff
            )
            self.request_update()
            raise
        st.failures = 0
        st.next_attempt = 0.0
        self._conns[node_id] = conn
        conn.add_close_callback(self._on_conn_closed)
        return conn

    async def send(self, node_id: int, api_key: int, request: ApiRequest[_Resp], *,
                   timeout_ms: int | None = None) -> _Resp:
        conn = await self.connection(node_id)
        return await conn.send(api_key, request, timeout_ms=timeout_ms)

    def least_loaded_node(self) -> int:
        """A connected broker with the fewest requests in flight, else a broker not in backoff."""
        best, best_load = None, 1 << 30
        for node_id, conn in self._conns.items():
            if conn.connected and conn.in_flight < best_load and node_id not in self._aliases:
                best, best_load = node_id, conn.in_flight
        if best is not None:
            return best
        now = time.monotonic()
        nodes = list(self.brokers) or [-1 - i for i in range(len(self.bootstrap))]
        self._rand.shuffle(nodes)
        ready = [n for n in nodes if self._nodes.get(n, _NodeState()).next_attempt <= now]
        return (ready or nodes)[0]

    async def send_any(
        self, api_key: int, request: ApiRequest[_Resp], *, timeout_ms: int | None = None
    ) -> _Resp:
        """Send to the least loaded broker, trying others when one cannot be reached."""
        last: Exception | None = None
        tried: set[int] = set()
        for _ in range(max(len(self.brokers), 1) + 1):
            node = self.least_loaded_node()
            if node in tried and len(tried) >= max(len(self.brokers), 1):
                break
            tried.add(node)
            try:
                conn = await self.connection(node)
            except KafkaConnectionError as exc:
                last = exc
                continue
            return await conn.send(api_key, request, timeout_ms=timeout_ms)
        raise last or KafkaConnectionError("no broker reachable")

    async def any_connection(self) -> Connection:
        last: Exception | None = None
        for _ in range(max(len(self.brokers), 1) + 1):
            try:
                return await self.connection(self.least_loaded_node())
            except KafkaConnectionError as exc:
                last = exc
        raise last or KafkaConnectionError("no broker reachable")

    async def find_coordinator(self, key: str, key_type: int = 0, conn: Connection | None = None
                               ) -> tuple[int, int]:
        """One FindCoordinator request for a group (``key_type`` 0) or a transactional id (1), on ``conn`` or
        the least loaded broker: ``(error code, node id)``. A coordinator found is added to ``brokers`` when
        missing. Retries are the caller's."""
        if conn is None:
            conn = await self.any_connection()
        R = m.FindCoordinatorRequest
        if conn.api_version(_FIND_COORDINATOR) >= 4:  # batched form: one key here
            resp = await conn.send(_FIND_COORDINATOR, R.new(key_type=key_type, coordinator_keys=[key]))
            c = resp.coordinators[0]
            code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            resp = await conn.send(_FIND_COORDINATOR, R.new(key=key, key_type=key_type))
            code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if code == 0 and node_id not in self.brokers:
            self.brokers[node_id] = BrokerMetadata(node_id, host, port)
        return code, node_id

    # ------------------------------------------------------------------------------------------------
    # metadata queries

    def partitions_for(self, topic: str) -> list[int] | None:
        t = self.topics.get(topic)
        return None if t is None else sorted(t.partitions)

    def num_partitions(self, topic: str) -> int:
        t = self.topics.get(topic)
        return 0 if t is None else len(t.partitions)

    def available_partitions(self, topic: str) -> list[int]:
        t = self.topics.get(topic)
        if t is None:
            return []
        return [p for p, pm in t.partitions.items() if pm.leader >= 0]

    def leader(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:
            return -1
        pm = t.partitions.get(partition)
        return -1 if pm is None else pm.leader

    def leader_epoch(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:
            return -1
        pm = t.partitions.get(partition)
        return -1 if pm is None else pm.leader_epoch

    def add_listener(self, fn: Callable[[Cluster], object]) -> None:
        """fn(cluster) after every metadata update."""
        self._listeners.append(fn)

    # ------------------------------------------------------------------------------------------------
    # metadata updates

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track more topics; returns True when one was new (an update was requested)."""
        new = set(topics) - self._wanted
        if new:
            self._wanted |= new
            self.request_update()
            return True
        return False

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self._wanted:
            self._wanted = topics
            self.request_update()

    def want_all_topics(self, flag: bool = True) -> None:
        if flag != self._all_topics:
            self._all_topics = flag
            self.request_update()

    def request_update(self) -> asyncio.Future:
        """Ask for a metadata refresh; the future resolves after the next successful one."""
        loop = self._loop or asyncio.get_event_loop()
        fut = loop.create_future()
        fut.add_done_callback(_silence)  # many callers only want the refresh, not its outcome
        if self._closed:
            fut.set_exception(KafkaConnectionError("client closed"))
            return fut
        self._update_waiters.append(fut)
        if self._update_event is not None:
            self._update_event.set()
        return fut

    def update_leader(self, topic: str, partition: int, leader_id: int, leader_epoch: int) -> None:
        """A response named a newer leader (Produce/Fetch CurrentLeader): use it until the next refresh."""
        t = self.topics.get(topic)
        pm = t.partitions.get(partition) if t else None
        if pm is None or leader_id < 0 or leader_epoch < pm.leader_epoch:
            return
        if leader_id in self.brokers and (pm.leader != leader_id or pm.leader_epoch != leader_epoch):
            pm.leader = leader_id
            pm.leader_epoch = leader_epoch
            self.version += 1

    async def refresh(self, topics: Iterable[str] | None = None, timeout_ms: int | None = None) -> None:
        """Fetch metadata now for the tracked topics (+ ``topics``) and wait for it."""
        if topics:
            self._wanted |= set(topics)
        fut = self.request_update()
        t = (timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"]) / 1000.0
        try:
            await wait_for(asyncio.shield(fut), t)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"metadata not refreshed within {t * 1000:.0f} ms") from None

    async def wait_for_topic(self, topic: str, timeout_ms: int) -> TopicMetadata:
        """Metadata of a topic, waiting (and refreshing) up to ``timeout_ms`` until its partitions are
        known."""
        t = self.topics.get(topic)
        if t is not None and t.partitions:
            return t
        self.add_topics([topic])
        deadline = time.monotonic() + timeout_ms / 1000.0
        backoff = self.config["retry.backoff.ms"] / 1000.0
        while True:
            fut = self.request_update()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                await wait_for(asyncio.shield(fut), remaining)
            except asyncio.TimeoutError:
                break
            except KafkaConnectionError:
                await asyncio.sleep(min(backoff, max(deadline - time.monotonic(), 0)))
                continue
            t = self.topics.get(topic)
            if t is not None and t.partitions:
                return t
            code = self.topic_errors.get(topic)
            if code in (Codes.INVALID_TOPIC_EXCEPTION, Codes.TOPIC_AUTHORIZATION_FAILED):
                raise broker_error(code, f"topic {topic!r}")
            await asyncio.sleep(min(backoff, max(deadline - time.monotonic(), 0)))
        code = self.topic_errors.get(topic)
        why = f" (last error {error_name(code)})" if code else ""
        raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after {timeout_ms} ms{why}")

    def _metadata_request(self, conn: Connection, topics: list[str] | None) -> m.MetadataRequest:
        version = conn.api_version(_METADATA)
        Req = m.MetadataRequest
        if topics is None:
            tlist = None
        else:
            tlist = [Req.MetadataRequestTopic(name=t, topic_id=_ZERO_UUID) for t in topics]
        return Req.new(
            topics=tlist,
            allow_auto_topic_creation=self.allow_auto_topic_creation,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ) if version >= 4 else Req.new(topics=tlist)

    async def _refresh_loop(self) -> None:
        assert self._update_event is not None
        max_age = self.config["metadata.max.age.ms"] / 1000.0
        backoff = self.config["retry.backoff.ms"] / 1000.0
        backoff_max = max(self.config["retry.backoff.max.ms"] / 1000.0, backoff)
        failures = 0
        while not self._closed:
            timeout = max(self.last_refresh + max_age - time.monotonic(), 0)
            try:
                await wait_for(self._update_event.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._update_event.clear()
            try:
                await self._refresh_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                failures += 1
                delay = min(backoff * 2 ** min(failures - 1, 10), backoff_max) * self._rand.uniform(0.8, 1.2)
                log.debug("metadata refresh failed (%s); retrying in %.0f ms", exc, delay * 1000)
                self._update_event.set()
                await asyncio.sleep(delay)
                continue
            # brief pause so bursts of update requests coalesce into one refresh
            await asyncio.sleep(min(backoff, 0.05))

    async def _refresh_once(self) -> None:
        waiters, self._update_waiters = self._update_waiters, []
        try:
            conn = await self.any_connection()
            topics = None if self._all_topics else sorted(self._wanted)
            resp = await conn.send(_METADATA, self._metadata_request(conn, topics))
        except BaseException:
            self._update_waiters[:0] = waiters
            raise
        self._apply_metadata(resp, topics)
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _apply_metadata(self, resp: m.MetadataResponse, requested: list[str] | None) -> None:
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        for node_id, b in brokers.items():
            old = self.brokers.get(node_id)
            if old is not None and (old.host, old.port) != (b.host, b.port):
                conn = self._conns.pop(node_id, None)
                if conn is not None:
                    conn.close()
        self.brokers = brokers
        self.cluster_id = getattr(resp, "cluster_id", None)
        self.controller_id = getattr(resp, "controller_id", -1)
        seen: set[str] = set()
        for t in resp.topics:
            name = t.name
            if name is None:
                continue
            seen.add(name)
            if t.error_code and t.error_code != Codes.NONE:
                self.topic_errors[name] = t.error_code
                if t.error_code in (Codes.UNKNOWN_TOPIC_OR_PARTITION, Codes.INVALID_TOPIC_EXCEPTION,
                                    Codes.TOPIC_AUTHORIZATION_FAILED):
                    self.topics.pop(name, None)
                continue
            self.topic_errors.pop(name, None)
            old_topic = self.topics.get(name)
            parts: dict[int, PartitionMetadata] = {}
            for p in t.partitions:
                leader = p.leader_id if p.error_code in (0, Codes.REPLICA_NOT_AVAILABLE) else -1
                epoch = getattr(p, "leader_epoch", -1)
                prev = old_topic.partitions.get(p.partition_index) if old_topic is not None else None
                if prev is not None and 0 <= epoch < prev.leader_epoch:
                    parts[p.partition_index] = prev  # stale answer from a lagging broker: keep the newer
                    continue
                parts[p.partition_index] = PartitionMetadata(
                    name, p.partition_index, leader, epoch, list(p.replica_nodes), list(p.isr_nodes),
                    list(getattr(p, "offline_replicas", []) or []), p.error_code,
                )
            topic_id = getattr(t, "topic_id", None)
            self.topics[name] = TopicMetadata(name, topic_id, bool(t.is_internal), parts)
            if topic_id is not None and topic_id != _ZERO_UUID:
                self.topic_ids[topic_id] = name
        if requested is None:
            for name in list(self.topics):
                if name not in seen:
                    del self.topics[name]
        self.version += 1
        self.last_refresh = time.monotonic()
        for fn in list(self._listeners):
            try:
                fn(self)
            except Exception:  # noqa: BLE001
                log.exception("metadata listener failed")

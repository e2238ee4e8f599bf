"""The Broker: owns the config, the log manager, metadata, the replica manager and the listeners."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from moldau.log.checkpoint import atomic_write

from .config import BrokerConfig, Listener
from .metadata import MetadataStore

log = logging.getLogger(__name__)

PRODUCER_ID_FILE = "__moldau_producer_ids"
PRODUCER_ID_BLOCK = 1000


class SystemClock:
    """Wall clock in ms (timestamps) and a monotonic clock in seconds (timeouts). Injected for tests."""

    __slots__ = ()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def time(self) -> float:
        return time.time()

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ProducerIdManager:
    """Producer ids handed out from blocks whose end is persisted before use: never reused after a restart."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, PRODUCER_ID_FILE)
        self._next = 0
        self._block_end = 0
        try:
            with open(self.path, encoding="ascii") as f:
                self._next = self._block_end = int(f.read().strip() or 0)
        except FileNotFoundError:
            pass
        except ValueError:
            log.error("%s is unreadable; producer ids restart from a safe high value", self.path)
            self._next = self._block_end = int(time.time() * 1000)

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._persist(self._next + PRODUCER_ID_BLOCK)
        pid = self._next
        self._next += 1
        return pid

    def _persist(self, block_end: int) -> None:
        atomic_write(self.path, f"{block_end}\n".encode())
        self._block_end = block_end


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Any = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.data_dir = os.path.abspath(config.log_dirs[0])
        self.node_id = config.node_id
        self.cluster_id: str = config.get("cluster.id") or ""
        self.log_manager: Any = None
        self.metadata: MetadataStore = None  # type: ignore[assignment]
        self.replica_manager: Any = None
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]
        self.group_coordinator: Any = None
        self.transaction_coordinator: Any = None
        self.security: Any = None    # security.SecurityManager, made by the server before it listens
        self.authorizer: Any = None  # security.authorizer.AclAuthorizer when authorizer.class.name is set
        self.server: Any = None
        self.cluster: Any = None     # cluster.ClusterServices when zookeeper.connect is set (docs/cluster.md)
        self.metrics: Any = None     # metrics.BrokerMetrics when metrics.listener is set
        self.listeners: list[Listener] = []        # bound listeners (actual ports)
        self.connections: set[Any] = set()
        self._started = False
        self._stopping = False
        self.started_at = 0.0

    # ----------------------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        from moldau.log import LogManager

        from .replica_manager import ReplicaManager
        from .server import Server
        from .topic_config import log_config_for, validate_topic_configs

        t0 = time.monotonic()
        os.makedirs(self.data_dir, exist_ok=True)
        try:
            from .topic_config import load_dynamic_broker_configs

            load_dynamic_broker_configs(self)
        except Exception:  # pragma: no cover - optional
            log.exception("cannot load dynamic broker configs")
        default_log_config = log_config_for({}, self.config)
        cfg = self.config
        cluster_id = cfg.get("cluster.id") or None
        if cfg.get("zookeeper.connect"):
            from .cluster import ClusterServices

            self.cluster = ClusterServices(self)
            await self.cluster.connect()
            cluster_id = self.cluster.cluster_id
        self.log_manager = LogManager(
            cfg.log_dirs, default_log_config, self.clock, node_id=self.node_id,
            cluster_id=cluster_id,
            retention_check_interval_ms=int(cfg.get("log.retention.check.interval.ms")),
            checkpoint_interval_ms=int(cfg.get("log.flush.offset.checkpoint.interval.ms")))
        self.cluster_id = str(self.log_manager.cluster_id)
        self.node_id = int(self.log_manager.node_id)
        if self.cluster is not None:
            from .cluster.replica import ClusterReplicaManager
            from .cluster.store import ZkMetadataStore

            self.metadata = ZkMetadataStore(self.cluster.zk, node_id=self.node_id,  # type: ignore[assignment]
                                            broker_config=self.config, config_validator=validate_topic_configs)
            await self.metadata.load()
            self.replica_manager = ClusterReplicaManager(self, self.cluster.zk)
        else:
            self.metadata = MetadataStore(self.data_dir, broker_config=self.config,
                                          config_validator=validate_topic_configs)
            self.metadata.load()
            self.replica_manager = ReplicaManager(self)
        if self.cluster is not None:
            from .cluster.producer_ids import ZkProducerIdManager

            self.producer_ids = ZkProducerIdManager(self.cluster.zk, self.node_id)  # type: ignore[assignment]
        else:
            self.producer_ids = ProducerIdManager(self.data_dir)
        self.replica_manager.load()
        self.metadata.listeners.append(self.replica_manager)
        self._start_optional_components()
        self.server = Server(self)
        try:
            from .metrics import start_metrics

            self.metrics = await start_metrics(self)
            await self.server.start()
        except BaseException:
            self.server.stop_accepting()
            self.log_manager.close()
            raise
        self.listeners = self.server.bound
        if isinstance(self.metadata, MetadataStore):
            self.metadata.node_id = self.node_id
            self.metadata.rack = self.config.get("broker.rack")
            self.metadata.advertised = self._advertised_address
        self.replica_manager.start()
        if self.cluster is not None:
            await self.cluster.register()
        self._started = True
        self.started_at = time.monotonic()
        first = self.listeners[0]
        log.info("moldau broker ready on %s:%d (node %d, cluster %s, data %s)", first.host or "0.0.0.0",
                 first.port, self.node_id, self.cluster_id, self.data_dir)
        log.debug("startup took %.0f ms", (time.monotonic() - t0) * 1000)

    def _start_optional_components(self) -> None:
        """The group and transaction coordinators. A coordinator that cannot start (its internal topic
        unreadable, say) is logged and left out: the broker still serves produce and fetch."""
        from .groups import create_group_coordinator
        from .txn import create_transaction_coordinator

        try:
            self.group_coordinator = create_group_coordinator(self)
        except Exception:  # pragma: no cover
            log.exception("cannot start the group coordinator")
        # after the group coordinator: completing transactions found prepared at start completes their
        # transactional offset commits too
        try:
            self.transaction_coordinator = create_transaction_coordinator(self)
            self.transaction_coordinator.start()
        except Exception:  # pragma: no cover
            log.exception("cannot start the transaction coordinator")
            self.transaction_coordinator = None

    async def stop(self, drain_timeout: float = 5.0) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self.cluster is not None:
            try:
                await self.cluster.controlled_shutdown()
            except Exception:  # pragma: no cover
                log.exception("controlled shutdown failed")
        if self.server is not None:
            self.server.stop_accepting()
        conns = list(self.connections)
        for c in conns:
            c.stop_reading()
        if self.replica_manager is not None:
            self.replica_manager.begin_shutdown()  # long polls answer now
        if conns:
            await asyncio.gather(*(c.drain(drain_timeout) for c in conns), return_exceptions=True)
        for c in conns:
            c.close()
        if self.server is not None:
            await self.server.wait_closed()
        if self.transaction_coordinator is not None:
            try:
                await self.transaction_coordinator.stop()
            except Exception:  # pragma: no cover
                log.exception("error stopping the transaction coordinator")
        if self.group_coordinator is not None:
            try:
                self.group_coordinator.stop()
            except Exception:  # pragma: no cover
                log.exception("error stopping the group coordinator")
        if self.replica_manager is not None:
            await self.replica_manager.stop()
        if self.cluster is not None:
            try:
                await self.cluster.close()
            except Exception:  # pragma: no cover
                log.exception("error closing the ZooKeeper session")
        if self.metrics is not None:
            await self.metrics.stop()
        if self.log_manager is not None:
            try:
                self.log_manager.close()
            except Exception:  # pragma: no cover
                log.exception("error closing the logs")

    # ----------------------------------------------------------------------------------------- listeners
    def advertised_listener(self, listener_name: str | None) -> Listener:
        """The advertised endpoint for clients that connected on ``listener_name``."""
        bound = {lst.name: lst for lst in self.listeners}
        adv = self.config.get("advertised.listeners")
        if adv:
            for lst in self.config.advertised_listeners:
                if lst.name == listener_name:
                    host = lst.host or socket.getfqdn()
                    port = lst.port or (bound[lst.name].port if lst.name in bound else lst.port)
                    return Listener(lst.name, host, port, lst.security_protocol)
        lst = bound.get(listener_name or "") or (self.listeners[0] if self.listeners else None)
        if lst is None:
            first = self.config.listeners[0]
            return first
        host = lst.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        return Listener(lst.name, host, lst.port, lst.security_protocol)

    def _advertised_address(self, listener_name: str | None) -> tuple[str, int]:
        lst = self.advertised_listener(listener_name)
        return lst.host, lst.port

    @property
    def port(self) -> int:
        return self.listeners[0].port if self.listeners else self.config.listeners[0].port

    # ----------------------------------------------------------------------------------------- connections
    def connection_opened(self, conn: Any) -> None:
        self.connections.add(conn)

    def connection_closed(self, conn: Any) -> None:
        self.connections.discard(conn)

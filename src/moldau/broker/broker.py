"""The Broker: builds the services (``services.BrokerServices``) and owns the lifecycle, the listeners and the
open connections. Handlers and components never see it: they get the services."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import time
from typing import Any

from .config import BrokerConfig, Listener
from .metadata import MetadataStore
from .services import PRODUCER_ID_BLOCK, PRODUCER_ID_FILE, BrokerServices, ProducerIdManager, SystemClock

__all__ = ["Broker", "BrokerServices", "run", "serve", "ProducerIdManager", "SystemClock",
           "PRODUCER_ID_BLOCK",
           "PRODUCER_ID_FILE"]

log = logging.getLogger(__name__)

class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Any = None) -> None:
        self.services = BrokerServices(config=config, clock=clock or SystemClock(),
                                       data_dir=os.path.abspath(config.log_dirs[0]), node_id=config.node_id,
                                       cluster_id=config.get("cluster.id") or "")
        self.services.advertised_listener = self.advertised_listener
        self.server: Any = None
        self.console: Any = None     # moldau.console's server when console.listener is set
        self.listeners: list[Listener] = []        # bound listeners (actual ports)
        self.connections: set[Any] = set()
        self._started = False
        self._stopping = False
        self.started_at = 0.0

    # ----------------------------------------------------------------------------------------- services
    # the services, also reachable on the broker (tools, tests, the metrics scrape)
    @property
    def config(self) -> BrokerConfig:
        return self.services.config

    @config.setter
    def config(self, value: BrokerConfig) -> None:
        self.services.config = value

    @property
    def clock(self) -> Any:
        return self.services.clock

    @clock.setter
    def clock(self, value: Any) -> None:
        self.services.clock = value

    @property
    def data_dir(self) -> str:
        return self.services.data_dir

    @data_dir.setter
    def data_dir(self, value: str) -> None:
        self.services.data_dir = value

    @property
    def node_id(self) -> int:
        return self.services.node_id

    @node_id.setter
    def node_id(self, value: int) -> None:
        self.services.node_id = value

    @property
    def cluster_id(self) -> str:
        return self.services.cluster_id

    @cluster_id.setter
    def cluster_id(self, value: str) -> None:
        self.services.cluster_id = value

    @property
    def log_manager(self) -> Any:
        return self.services.log_manager

    @log_manager.setter
    def log_manager(self, value: Any) -> None:
        self.services.log_manager = value

    @property
    def metadata(self) -> MetadataStore:
        return self.services.metadata

    @metadata.setter
    def metadata(self, value: MetadataStore) -> None:
        self.services.metadata = value

    @property
    def quotas(self) -> Any:
        return self.services.quotas

    @property
    def limiter(self) -> Any:
        return self.services.limiter

    @property
    def request_memory(self) -> Any:
        return self.services.request_memory

    @property
    def client_log(self) -> Any:
        return self.services.client_log

    @property
    def replica_manager(self) -> Any:
        return self.services.replica_manager

    @replica_manager.setter
    def replica_manager(self, value: Any) -> None:
        self.services.replica_manager = value

    @property
    def producer_ids(self) -> ProducerIdManager:
        return self.services.producer_ids

    @producer_ids.setter
    def producer_ids(self, value: ProducerIdManager) -> None:
        self.services.producer_ids = value

    @property
    def group_coordinator(self) -> Any:
        return self.services.group_coordinator

    @group_coordinator.setter
    def group_coordinator(self, value: Any) -> None:
        self.services.group_coordinator = value

    @property
    def transaction_coordinator(self) -> Any:
        return self.services.transaction_coordinator

    @transaction_coordinator.setter
    def transaction_coordinator(self, value: Any) -> None:
        self.services.transaction_coordinator = value

    @property
    def security(self) -> Any:
        return self.services.security

    @security.setter
    def security(self, value: Any) -> None:
        self.services.security = value

    @property
    def authorizer(self) -> Any:
        return self.services.authorizer

    @authorizer.setter
    def authorizer(self, value: Any) -> None:
        self.services.authorizer = value

    @property
    def cluster(self) -> Any:
        """cluster.ClusterServices when zookeeper.connect is set (docs/cluster.md), else None."""
        return self.services.cluster

    @cluster.setter
    def cluster(self, value: Any) -> None:
        self.services.cluster = value

    @property
    def metrics(self) -> Any:
        return self.services.metrics

    @metrics.setter
    def metrics(self, value: Any) -> None:
        self.services.metrics = value

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

            load_dynamic_broker_configs(self.services)
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
        # Loading builds objects per partition that live as long as the broker; the cyclic GC would scan
        # them again and again while they are made: off while loading.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self.log_manager = LogManager(
                cfg.log_dirs, default_log_config, self.clock, node_id=self.node_id,
                cluster_id=cluster_id,
                retention_check_interval_ms=int(cfg.get("log.retention.check.interval.ms")),
                checkpoint_interval_ms=int(cfg.get("log.flush.offset.checkpoint.interval.ms")))
            self.cluster_id = str(self.log_manager.cluster_id)
            self.node_id = int(self.log_manager.node_id)
            if self.cluster is not None:
                from .cluster.producer_ids import ZkProducerIdManager
                from .cluster.store import ZkMetadataStore

                self.metadata = ZkMetadataStore(  # type: ignore[assignment]
                    self.cluster.zk, node_id=self.node_id, broker_config=self.config,
                    config_validator=validate_topic_configs)
                await self.metadata.load()  # type: ignore[attr-defined]
                self.producer_ids = ZkProducerIdManager(  # type: ignore[assignment]
                    self.cluster.zk, self.node_id)
            else:
                self.metadata = MetadataStore(self.data_dir, broker_config=self.config,
                                              config_validator=validate_topic_configs)
                self.metadata.load()
                self.producer_ids = ProducerIdManager(self.data_dir)
            from .limits import ConnectionLimiter, RequestMemory
            from .quotas import FileQuotaStore, QuotaManager

            # quotas and dynamic broker configs: in the data dir, or in ZooKeeper in a cluster (/config/...)
            quota_store = self.cluster.quota_store() if self.cluster is not None else FileQuotaStore(
                self.data_dir)
            self.services.quotas = QuotaManager(
                quota_store, window_num=int(cfg.get("quota.window.num")),
                window_s=float(cfg.get("quota.window.size.seconds")))
            if self.cluster is not None:
                quota_store.on_change = self.services.quotas.reload
                self.services.broker_configs = self.cluster.broker_config_store(self.services)
            self.services.limiter = ConnectionLimiter(cfg, self.services.quotas,
                                                      client_log=self.services.client_log)
            self.services.request_memory = RequestMemory(int(cfg.get("queued.max.request.bytes")))
            if self.cluster is not None:
                from .cluster.replica import ClusterReplicaManager

                self.replica_manager = ClusterReplicaManager(self.services, self.cluster.zk)
            else:
                self.replica_manager = ReplicaManager(self.services)
            self.replica_manager.load()
        finally:
            if gc_was_enabled:
                gc.enable()
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
        if self.config.get("console.listener"):  # the web console (moldau.console), served from this process
            from moldau.console.embedded import start_console

            self.console = await start_console(self)
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
            self.group_coordinator = create_group_coordinator(self.services)
        except Exception:  # pragma: no cover
            log.exception("cannot start the group coordinator")
        # after the group coordinator: completing transactions found prepared at start completes their
        # transactional offset commits too
        try:
            markers = None
            if self.cluster is not None:
                from .cluster.txn_markers import MarkerSender

                markers = MarkerSender(self.services).write  # markers to other leaders with WriteTxnMarkers
            self.transaction_coordinator = create_transaction_coordinator(self.services, markers)
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
        if self.console is not None:
            await self.console.stop()
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


# --------------------------------------------------------------------------------------------- entry point
async def serve(config: BrokerConfig, *, ready_callback: Any = None) -> None:
    """Run a broker until SIGINT/SIGTERM, then stop cleanly."""
    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-main thread / platform
            pass
    if ready_callback is not None:
        ready_callback(broker)
    try:
        await stop.wait()
    finally:
        log.info("moldau broker stopping")
        await broker.stop()
        log.info("moldau broker stopped")


def run(config: BrokerConfig) -> None:
    """Blocking entry point used by ``moldau broker``."""
    from .server import install_uvloop

    install_uvloop()
    asyncio.run(serve(config))

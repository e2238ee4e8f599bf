"""The Broker: has its services (``services.BrokerServices``) built by its mode's factory
(``compose.SingleNode`` or ``compose.Cluster``) and owns the lifecycle, the listeners and the open
connections. Handlers, components, tools and tests use the services, never the broker's internals."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import time
from typing import TYPE_CHECKING, Any

from moldau._aio import wait_for

from .compose import ModeFactory, factory_for
from .config import BrokerConfig, Listener
from .services import (
    PRODUCER_ID_BLOCK,
    PRODUCER_ID_FILE,
    BrokerServices,
    Clock,
    ProducerIdManager,
    SystemClock,
)

if TYPE_CHECKING:
    from .server import Server

__all__ = ["Broker", "BrokerServices", "run", "serve", "ProducerIdManager", "SystemClock",
           "PRODUCER_ID_BLOCK",
           "PRODUCER_ID_FILE"]

log = logging.getLogger(__name__)

class Broker:
    """One broker process: its services (``services``, built by the mode's ``compose.ModeFactory``), the
    listeners, the open connections and the lifecycle. Tools and tests reach what the broker serves through
    ``broker.services``."""

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.services = BrokerServices(config=config, clock=clock or SystemClock(),
                                       data_dir=os.path.abspath(config.log_dirs[0]), node_id=config.node_id,
                                       cluster_id=config.get("cluster.id") or "")
        self.services.advertised_listener = self.advertised_listener
        self.factory: ModeFactory = factory_for(self.services)
        self.server: Server | None = None
        self.console: Any = None     # moldau.console's server when console.listener is set
        self.registry: Any = None    # moldau.registry's server when schema.registry.listener is set
        self.listeners: list[Listener] = []        # bound listeners (actual ports)
        self.connections: set[Any] = set()
        self._started = False
        self._stopping = False
        self.started_at = 0.0

    # ----------------------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        from moldau.log import LogManager

        from .server import Server
        from .topic_config import load_dynamic_broker_configs, log_config_for

        t0 = time.monotonic()
        services = self.services
        cfg = services.config
        os.makedirs(services.data_dir, exist_ok=True)
        try:
            load_dynamic_broker_configs(services)
        except Exception:  # pragma: no cover - optional
            log.exception("cannot load dynamic broker configs")
        default_log_config = log_config_for({}, cfg)
        cluster_id = await self.factory.connect(services)
        # Loading builds objects per partition that live as long as the broker; the cyclic GC would scan
        # them again and again while they are made: off while loading.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            services.log_manager = LogManager(
                cfg.log_dirs, default_log_config, services.clock, node_id=services.node_id,
                cluster_id=cluster_id,
                retention_check_interval_ms=cfg.log.retention_check_interval_ms,
                checkpoint_interval_ms=cfg.log.flush_offset_checkpoint_interval_ms,
                load_threads=int(cfg.get("num.recovery.threads.per.data.dir")),
                cleaner_enable=bool(cfg.get("log.cleaner.enable")),
                cleaner_backoff_ms=int(cfg.get("log.cleaner.backoff.ms")),
                cleaner_dedupe_buffer_size=int(cfg.get("log.cleaner.dedupe.buffer.size")),
                cleaner_io_buffer_load_factor=float(cfg.get("log.cleaner.io.buffer.load.factor")))
            services.cluster_id = str(services.log_manager.cluster_id)
            services.node_id = int(services.log_manager.node_id)
            await self.factory.build_metadata(services)
            from .limits import ConnectionLimiter, RequestMemory
            from .quotas import QuotaManager

            # quotas and dynamic broker configs: in the data dir, or in ZooKeeper in a cluster (/config/...)
            services.quotas = QuotaManager(
                self.factory.quota_store(services), window_num=cfg.quota.window_num,
                window_s=cfg.quota.window_size_seconds)
            self.factory.after_quotas(services)
            services.limiter = ConnectionLimiter(cfg, services.quotas, client_log=services.client_log)
            services.request_memory = RequestMemory(cfg.socket.queued_max_request_bytes)
            services.replica_manager = self.factory.build_replica_manager(services)
            services.replica_manager.load()
            # what was loaded lives as long as the broker: frozen (gc.freeze), later collections skip it
            # instead of walking every partition's objects (a topic deletion unfreezes, as after a large
            # creation: replica_manager._GilShare)
            gc.freeze()
        finally:
            if gc_was_enabled:
                gc.enable()
        services.metadata.listeners.append(services.replica_manager)
        self._start_coordinators()
        self.server = Server(self)
        try:
            from .metrics import start_metrics

            services.metrics = await start_metrics(services, self)
            await self.server.start()
        except BaseException:
            self.server.stop_accepting()
            services.log_manager.close()
            raise
        self.listeners = self.server.bound
        await self.factory.listening(services, self.listeners)
        services.replica_manager.start()
        self._started = True
        self.started_at = time.monotonic()
        if cfg.get("console.listener"):  # the web console (moldau.console), served from this process
            from moldau.console.embedded import start_console

            self.console = await start_console(cfg.get("console.listener"), self.listeners)
        if cfg.get("schema.registry.listener"):  # the schema registry (moldau.registry), a client too
            from moldau.registry.embedded import start_registry

            self.registry = await start_registry(cfg.get("schema.registry.listener"), self.listeners)
        first = self.listeners[0]
        log.info("moldau broker ready on %s:%d (node %d, cluster %s, data %s)", first.host or "0.0.0.0",
                 first.port, services.node_id, services.cluster_id, services.data_dir)
        log.debug("startup took %.0f ms", (time.monotonic() - t0) * 1000)

    def _start_coordinators(self) -> None:
        """The group and transaction coordinators, on the coordinator runtime, following the replica manager's
        leadership. A coordinator that cannot start is logged and left out: the broker still serves produce
        and fetch."""
        from .groups import create_group_coordinator
        from .txn import create_transaction_coordinator

        services = self.services
        try:
            services.group_coordinator = create_group_coordinator(services)
        except Exception:  # pragma: no cover
            log.exception("cannot start the group coordinator")
        # after the group coordinator: completing transactions found prepared at start completes their
        # transactional offset commits too
        try:
            tc = create_transaction_coordinator(services, self.factory.transaction_markers(services))
            tc.start()
            services.transaction_coordinator = tc
        except Exception:  # pragma: no cover
            log.exception("cannot start the transaction coordinator")
            services.transaction_coordinator = None
        try:
            from .share import create_share_service

            services.share = create_share_service(services)
        except Exception:  # pragma: no cover
            log.exception("cannot start the share coordinator")
            services.share = None

    async def stop(self, drain_timeout: float = 5.0) -> None:
        if self._stopping:
            return
        self._stopping = True
        services = self.services
        if self.registry is not None:  # first: it is a client of this broker (its group leaves cleanly)
            try:
                await wait_for(self.registry.stop(), drain_timeout)
            except Exception:  # pragma: no cover
                log.exception("error stopping the schema registry")
        await self.factory.stopping()
        if self.server is not None:
            self.server.stop_accepting()
        conns = list(self.connections)
        for c in conns:
            c.stop_reading()
        rm = services.replica_manager
        if rm is not None:
            rm.begin_shutdown()  # long polls answer now
        if conns:
            await asyncio.gather(*(c.drain(drain_timeout) for c in conns), return_exceptions=True)
        for c in conns:
            c.close()
        if self.server is not None:
            await self.server.wait_closed()
        if services.share is not None:
            try:
                await services.share.stop()
            except Exception:  # pragma: no cover
                log.exception("error stopping the share coordinator")
        if services.transaction_coordinator is not None:
            try:
                await services.transaction_coordinator.stop()
            except Exception:  # pragma: no cover
                log.exception("error stopping the transaction coordinator")
        if services.group_coordinator is not None:
            try:
                services.group_coordinator.stop()
            except Exception:  # pragma: no cover
                log.exception("error stopping the group coordinator")
        if rm is not None:
            await rm.stop()
        if self.console is not None:
            await self.console.stop()
        await self.factory.close()
        if services.metrics is not None:
            await services.metrics.stop()
        if services.log_manager is not None:
            try:
                services.log_manager.close()
            except Exception:  # pragma: no cover
                log.exception("error closing the logs")

    @property
    def ready(self) -> bool:
        """Started and not stopping (the metrics endpoint's /ready)."""
        return self._started and not self._stopping

    # ----------------------------------------------------------------------------------------- listeners
    def advertised_listener(self, listener_name: str | None) -> Listener:
        """The advertised endpoint for clients that connected on ``listener_name``."""
        bound = {lst.name: lst for lst in self.listeners}
        adv = self.services.config.get("advertised.listeners")
        if adv:
            for lst in self.services.config.advertised_listeners:
                if lst.name == listener_name:
                    host = lst.host or socket.getfqdn()
                    port = lst.port or (bound[lst.name].port if lst.name in bound else lst.port)
                    return Listener(lst.name, host, port, lst.security_protocol)
        found = bound.get(listener_name or "") or (self.listeners[0] if self.listeners else None)
        if found is None:
            return self.services.config.listeners[0]
        lst = found
        host = lst.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        return Listener(lst.name, host, lst.port, lst.security_protocol)

    def _advertised_address(self, listener_name: str | None) -> tuple[str, int]:
        lst = self.advertised_listener(listener_name)
        return lst.host, lst.port

    @property
    def port(self) -> int:
        return self.listeners[0].port if self.listeners else self.services.config.listeners[0].port

    # ----------------------------------------------------------------------------------------- connections
    def connection_opened(self, conn: Any) -> None:
        self.connections.add(conn)

    def connection_closed(self, conn: Any) -> None:
        self.connections.discard(conn)
        if self.services.share is not None:
            self.services.share.connection_closed(conn)


# --------------------------------------------------------------------------------------------- entry point
async def serve(config: BrokerConfig, *, ready_callback: Any = None) -> None:
    """Run a broker until SIGINT/SIGTERM, then stop cleanly."""
    broker = Broker(config)
    await broker.start()
    # What start-up made (modules, codecs, the loaded logs and partitions) lives as long as the process: moved
    # out of the cyclic GC's generations, so that no full collection walks it again while serving (a full
    # collection over a freshly started broker's objects takes ~18 ms of CPU on the loop, measured with
    # time.thread_time; after the freeze well under 1 ms). Only in the broker process: an embedded broker
    # leaves its host process's collector alone.
    gc.freeze()
    from .loop_probe import from_env

    probe = from_env()
    if probe is not None:
        probe.start()
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
        if probe is not None:
            await probe.stop()
        await broker.stop()
        log.info("moldau broker stopped")


def run(config: BrokerConfig) -> None:
    """Blocking entry point used by ``moldau broker``."""
    from .heap import tune_heap
    from .server import install_uvloop

    tune_heap()  # the process is the broker's (module doc of .heap)
    install_uvloop()
    asyncio.run(serve(config))

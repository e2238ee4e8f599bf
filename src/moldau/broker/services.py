"""The broker's services: what request handlers (``RequestContext.services``) and the components reach.

``BrokerServices`` is built once by ``Broker`` and filled in by ``Broker.start`` as the components are made;
every request context points at the same instance (no per-request allocation). Handlers see exactly these
services, never the ``Broker`` itself (its lifecycle, server and connection set stay private to it).

Components do not import this module: each one declares the few services it needs as a small Protocol of
its own (``replica_manager.ReplicaDeps``, ``groups.broker_storage.GroupDeps``, ``txn.coordinator.TxnDeps``,
``txn.markers.MarkerDeps``) which ``BrokerServices`` satisfies. So ``services`` sits above the components in
the import graph and below the handlers, and ``tools/check_imports.py`` keeps it that way.

The mode plugs in here (``compose.SingleNode`` / ``compose.Cluster``, docs/cluster.md): ``metadata`` is an
``interfaces.MetadataService`` (the data dir's store, or the ZooKeeper-backed one), ``replica_manager`` the
``ReplicaManager`` or the ``ClusterReplicaManager`` (with the replica fetchers; both
``interfaces.ReplicaService``), ``producer_ids`` the data dir's or the ZooKeeper block allocator, and
``cluster`` the ``ClusterServices`` (ZooKeeper session, controller) in a cluster.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

from moldau.log.checkpoint import atomic_write

from .clock import Clock, SystemClock
from .limits import ClientLog

if TYPE_CHECKING:
    from moldau.log import LogManager

    from .config import BrokerConfig, Listener
    from .groups.coordinator import GroupCoordinator
    from .limits import ConnectionLimiter, RequestMemory
    from .metadata import MetadataService
    from .metrics import BrokerMetrics
    from .quotas import QuotaManager
    from .replica_manager import ReplicaManager
    from .security import SecurityManager
    from .security.authorizer import AclAuthorizer
    from .share import ShareService
    from .txn.coordinator import TransactionCoordinator

__all__ = ["BrokerServices", "Clock", "ProducerIdManager", "SystemClock", "PRODUCER_ID_BLOCK",
           "PRODUCER_ID_FILE"]

log = logging.getLogger(__name__)

PRODUCER_ID_FILE = "__moldau_producer_ids"
PRODUCER_ID_BLOCK = 1000


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


class ProducerIds(Protocol):
    """Producer ids: ``ProducerIdManager`` on one node, ``cluster.producer_ids.ZkProducerIdManager`` (blocks
    from ZooKeeper) in a cluster."""

    def next_id(self) -> int: ...


def _no_listener(listener_name: str | None) -> Listener:
    raise RuntimeError("the broker is not listening yet")


@dataclass(slots=True, eq=False)
class BrokerServices:
    """One broker's services. ``log_manager``, ``metadata``, ``replica_manager`` and ``producer_ids`` are set
    by ``Broker.start`` before the first request is read; the optional ones stay None when not running
    (a coordinator that could not start, no ACL authorizer, no metrics listener)."""

    config: BrokerConfig
    clock: Clock
    data_dir: str
    node_id: int
    cluster_id: str
    log_manager: LogManager = None  # type: ignore[assignment]
    metadata: MetadataService = None  # type: ignore[assignment]
    replica_manager: ReplicaManager = None  # type: ignore[assignment]
    producer_ids: ProducerIds = None  # type: ignore[assignment]
    group_coordinator: GroupCoordinator | None = None
    transaction_coordinator: TransactionCoordinator | None = None
    share: ShareService | None = None                  # share groups (KIP-932), after the group coordinator
    security: SecurityManager | None = None
    authorizer: AclAuthorizer | None = None
    metrics: BrokerMetrics | None = None
    #: client quotas (``quotas.QuotaManager``), connection limits and the request-bytes pool (``limits``), set
    #: by ``Broker.start``; the rate-limited per-client log exists from the start
    quotas: QuotaManager = None  # type: ignore[assignment]
    limiter: ConnectionLimiter | None = None
    request_memory: RequestMemory | None = None
    client_log: ClientLog = field(default_factory=ClientLog)
    #: cluster.ClusterServices (ZooKeeper session, controller, inter-broker listener) when
    #: zookeeper.connect is set; None on a single node (docs/cluster.md)
    cluster: Any = None
    #: where dynamic broker configs are kept (``topic_config.FileBrokerConfigStore`` when None; in a cluster
    #: ``cluster.zkconfig.ZkBrokerConfigStore``)
    broker_configs: Any = None
    #: the endpoint advertised to clients that connected on a listener (the broker's bound listeners)
    advertised_listener: Callable[[str | None], Listener] = _no_listener

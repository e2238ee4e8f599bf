"""How a broker's services are built, per mode: ``SingleNode`` or ``Cluster`` (``zookeeper.connect`` set).

Both fill the same ``services.BrokerServices`` with implementations of the same interfaces
(``interfaces.MetadataService``, ``interfaces.ReplicaService``, a producer id allocator, the quota and dynamic
broker config stores, the transaction markers' writer); ``Broker`` drives either through ``ModeFactory`` and
has no branch on the mode. The group and transaction coordinators are built the same way in both modes and
follow the replica manager's leadership (``coordinator.CoordinatorRuntime``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from .metadata import MetadataStore
from .replica_manager import ReplicaManager
from .services import ProducerIdManager

if TYPE_CHECKING:
    from .cluster import ClusterServices
    from .cluster.zkconfig import ZkQuotaStore
    from .config import Listener
    from .quotas import QuotaStore
    from .services import BrokerServices
    from .txn.coordinator import MarkerWriter

log = logging.getLogger(__name__)

__all__ = ["Cluster", "ModeFactory", "SingleNode", "factory_for"]


class ModeFactory(Protocol):
    """What differs between a single node and a cluster member, in the order ``Broker.start`` asks."""

    async def connect(self, services: BrokerServices) -> str | None:
        """Before the logs are opened: the cluster id to keep (None: the data dir's own)."""
        ...

    async def build_metadata(self, services: BrokerServices) -> None:
        """``services.metadata`` and ``services.producer_ids``, loaded."""
        ...

    def quota_store(self, services: BrokerServices) -> QuotaStore: ...

    def after_quotas(self, services: BrokerServices) -> None:
        """Once ``services.quotas`` exists: where dynamic broker configs are kept, quota change watches."""
        ...

    def build_replica_manager(self, services: BrokerServices) -> ReplicaManager: ...

    def transaction_markers(self, services: BrokerServices) -> MarkerWriter | None:
        """How the transaction coordinator's markers reach their partitions (None: written here)."""
        ...

    async def listening(self, services: BrokerServices, listeners: list[Listener]) -> None:
        """The listeners are bound: tell the metadata (one node) or register in ZooKeeper (a cluster)."""
        ...

    async def stopping(self) -> None:
        """Before the connections are drained (a cluster moves its leaderships away)."""
        ...

    async def close(self) -> None: ...


class SingleNode:
    """One broker: metadata and producer ids in the data dir, every partition led here."""

    async def connect(self, services: BrokerServices) -> str | None:
        return services.config.get("cluster.id") or None

    async def build_metadata(self, services: BrokerServices) -> None:
        from .topic_config import validate_topic_configs

        store = MetadataStore(services.data_dir, broker_config=services.config,
                              config_validator=validate_topic_configs)
        store.load()
        services.metadata = store
        services.producer_ids = ProducerIdManager(services.data_dir)

    def quota_store(self, services: BrokerServices) -> QuotaStore:
        from .quotas import FileQuotaStore

        return FileQuotaStore(services.data_dir)

    def after_quotas(self, services: BrokerServices) -> None:
        """Dynamic broker configs stay in the data dir (``topic_config.FileBrokerConfigStore``)."""

    def build_replica_manager(self, services: BrokerServices) -> ReplicaManager:
        return ReplicaManager(services)

    def transaction_markers(self, services: BrokerServices) -> MarkerWriter | None:
        return None

    async def listening(self, services: BrokerServices, listeners: list[Listener]) -> None:
        store = services.metadata
        assert isinstance(store, MetadataStore)
        store.node_id = services.node_id
        store.rack = services.config.get("broker.rack")
        store.advertised = lambda name: _address(services.advertised_listener(name))

    async def stopping(self) -> None:
        """Nothing to hand over."""

    async def close(self) -> None:
        """Nothing to close."""


class Cluster:
    """A member of a ZooKeeper cluster (docs/cluster.md): metadata, producer id blocks, quotas and dynamic
    configs in ZooKeeper, partitions led as the controller's LeaderAndIsr says, replica fetchers."""

    def __init__(self) -> None:
        self.cluster: ClusterServices | None = None
        self._quotas: ZkQuotaStore | None = None

    def _services(self) -> ClusterServices:
        assert self.cluster is not None, "connect() first"
        return self.cluster

    async def connect(self, services: BrokerServices) -> str | None:
        from .cluster import ClusterServices

        self.cluster = ClusterServices(services)
        services.cluster = self.cluster
        await self.cluster.connect()
        return self.cluster.cluster_id

    async def build_metadata(self, services: BrokerServices) -> None:
        from .cluster.producer_ids import ZkProducerIdManager
        from .cluster.store import ZkMetadataStore
        from .topic_config import validate_topic_configs

        zk = self._services().zk
        store = ZkMetadataStore(zk, node_id=services.node_id, broker_config=services.config,
                                config_validator=validate_topic_configs)
        await store.load()
        services.metadata = store
        self._services().store = store
        services.producer_ids = ZkProducerIdManager(zk, services.node_id)

    def quota_store(self, services: BrokerServices) -> QuotaStore:
        self._quotas = self._services().quota_store()
        return self._quotas

    def after_quotas(self, services: BrokerServices) -> None:
        if self._quotas is not None:
            self._quotas.on_change = services.quotas.reload  # another broker changed a quota
        services.broker_configs = self._services().broker_config_store(services)

    def build_replica_manager(self, services: BrokerServices) -> ReplicaManager:
        from .cluster.replica import ClusterReplicaManager

        return ClusterReplicaManager(services, self._services())

    def transaction_markers(self, services: BrokerServices) -> MarkerWriter | None:
        from .cluster.txn_markers import MarkerSender

        return MarkerSender(services).write  # markers to other leaders with WriteTxnMarkers

    async def listening(self, services: BrokerServices, listeners: list[Listener]) -> None:
        await self._services().register(listeners)

    async def stopping(self) -> None:
        if self.cluster is None:
            return
        try:
            await self.cluster.controlled_shutdown()
        except Exception:  # pragma: no cover
            log.exception("controlled shutdown failed")

    async def close(self) -> None:
        if self.cluster is None:
            return
        try:
            await self.cluster.close()
        except Exception:  # pragma: no cover
            log.exception("error closing the ZooKeeper session")


def factory_for(services: BrokerServices) -> ModeFactory:
    """``Cluster`` when ``zookeeper.connect`` is set, else ``SingleNode``."""
    return Cluster() if services.config.get("zookeeper.connect") else SingleNode()


def _address(listener: Listener) -> tuple[str, int]:
    return listener.host, listener.port

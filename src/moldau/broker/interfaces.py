"""The interfaces both broker modes implement (docs/architecture.md, "A broker composed per mode").

* ``MetadataService``: topics and their partitions' leaders, brokers, the controller. One node:
  ``metadata.MetadataStore`` (a JSON file in the data dir); a cluster: ``cluster.store.ZkMetadataStore``
  (ZooKeeper, with watches).
* ``ReplicaService``: the partitions this broker has, appends and reads, who leads (and the leadership
  subscription of the coordinator runtimes). One node: ``replica_manager.ReplicaManager``; a cluster:
  ``cluster.replica.ClusterReplicaManager``.

The interfaces are defined next to their single-node implementation (``metadata.MetadataService``,
``replica_manager.ReplicaService``); ``_implementations`` below makes mypy check each implementation of both
modes against them (this module is in the type gate and imported by nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .metadata import MetadataService
from .replica_manager import ReplicaService

if TYPE_CHECKING:
    from .cluster.replica import ClusterReplicaManager
    from .cluster.store import ZkMetadataStore
    from .metadata import MetadataStore
    from .replica_manager import ReplicaManager

__all__ = ["MetadataService", "ReplicaService"]


def _implementations(single: MetadataStore, zk: ZkMetadataStore, rm: ReplicaManager,
                     crm: ClusterReplicaManager) -> tuple[list[MetadataService], list[ReplicaService]]:
    """Never called: mypy checks that each mode's implementation has its interface."""
    return [single, zk], [rm, crm]

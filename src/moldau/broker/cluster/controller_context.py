"""What the active controller knows of the cluster (Kafka's ``ControllerContext``): its epoch, the live
brokers and their epochs, the brokers shutting down, every topic's replica assignment and every partition's
leader and ISR, as last read from or written to ZooKeeper, and the channel to the brokers.

One object, shared by the controller's parts (``controller.Controller``: events and failover;
``partition_state.PartitionStateMachine``: partition states and leader election;
``controller_requests.ControllerRequests``: LeaderAndIsr, UpdateMetadata, StopReplica). Only the controller's
event task changes it.
"""

from __future__ import annotations

from . import zkdata as zd
from .channel import ControllerChannel

TP = tuple[str, int]


class ControllerContext:
    def __init__(self, broker_id: int, listener_name: str) -> None:
        self.broker_id = broker_id
        self.listener_name = listener_name  # the inter-broker listener
        self.epoch = 0
        self.epoch_zk_version = -1
        self.live: dict[int, zd.BrokerInfo] = {}
        self.broker_epochs: dict[int, int] = {}  # czxid of each live broker's registration znode
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, zd.TopicAssignment] = {}
        self.states: dict[TP, zd.LeaderAndIsr] = {}
        self.channel: ControllerChannel | None = None

    def replicas(self, tp: TP) -> list[int]:
        """The replicas assigned to ``tp`` ([] for an unknown topic or partition)."""
        a = self.assignments.get(tp[0])
        return a.partitions.get(tp[1], []) if a is not None else []

    def add_live(self, info: zd.BrokerInfo) -> None:
        """A broker is alive: known, and reachable through the channel on its inter-broker listener."""
        self.live[info.broker_id] = info
        ep = info.endpoint(self.listener_name) or (info.endpoints[0] if info.endpoints else None)
        if ep is not None and self.channel is not None:
            self.channel.add_broker(info.broker_id, ep.host, ep.port)

"""The share-partition leader's persister (KIP-932): reads, initializes and writes a share-partition's state
at the share coordinator of its key, in-process when this broker leads the key's ``__share_group_state``
partition, otherwise as Kafka's ``DefaultStatePersister`` does: FindCoordinator key type 2
(``group:topicId:partition``) to a live broker, then Initialize/Read/WriteShareGroupState (83-85) to the
coordinator it names. The coordinator of a state partition is cached until a request to it fails.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.share_state import ShareKey, ShareState, StateBatch

from ..metadata import SHARE_STATE_TOPIC
from .state import ShareCoordinator

log = logging.getLogger(__name__)

FIND_COORDINATOR_VERSION = 6
# a coordinator answer that sends the caller elsewhere (or to wait): the cached coordinator is dropped
_MOVED = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


class SharePersister:
    def __init__(self, services: Any, coordinator: ShareCoordinator) -> None:
        self.services = services
        self.coordinator = coordinator
        self.nodes: dict[int, tuple[int, str, int]] = {}  # state partition -> (node id, host, port)
        self.conns: dict[tuple[str, int], Any] = {}

    # ------------------------------------------------------------------------------------ routing
    def is_local(self, key: ShareKey) -> bool:
        """Whether this broker's share coordinator serves ``key`` or will (one node; in a cluster: this broker
        is the leader of the key's partition in the metadata, its load may still be under way)."""
        p = self.coordinator.partition_of(key)
        if self.coordinator.runtime.serves(p) or getattr(self.services, "cluster", None) is None:
            return True
        view = self.services.metadata.partition_state(SHARE_STATE_TOPIC, p)
        return view is not None and view.leader == self.services.node_id

    async def _conn(self, host: str, port: int) -> Any:
        from moldau.client.conn import Connection

        c = self.conns.get((host, port))
        if c is not None and c.connected:
            return c
        c = await Connection.open(host, port, client_id=f"share-persister-{self.services.node_id}")
        self.conns[(host, port)] = c
        return c

    def _drop(self, host: str, port: int) -> None:
        c = self.conns.pop((host, port), None)
        if c is not None:
            c.close()

    def _endpoint(self, node_id: int) -> tuple[str, int] | None:
        b = getattr(self.services.metadata, "live", {}).get(node_id)
        if b is None:
            return None
        name = self.services.cluster.listener_name
        host, port = b.endpoints.get(name) or next(iter(b.endpoints.values()))
        return host, int(port)

    async def _find(self, key: ShareKey) -> tuple[int, str, int]:
        """The share coordinator of ``key`` by FindCoordinator key type 2 to a live broker."""
        p = self.coordinator.partition_of(key)
        cached = self.nodes.get(p)
        if cached is not None:
            return cached
        live = sorted(getattr(self.services.metadata, "live", {}))
        others = [n for n in live if n != self.services.node_id] or live
        if not others:
            raise KafkaError.for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE, "No live broker.")
        ep = self._endpoint(random.choice(others))
        if ep is None:
            raise KafkaError.for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE, "No live broker.")
        req = m.FindCoordinatorRequest.new(key_type=2, coordinator_keys=[key.coordinator_key()])
        try:
            conn = await self._conn(*ep)
            resp = await conn.send(10, req, version=FIND_COORDINATOR_VERSION, timeout_ms=10000)
        except Exception as e:  # noqa: BLE001 - retried by the caller
            self._drop(*ep)
            raise KafkaError.for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"FindCoordinator failed: {e}")
        c = resp.coordinators[0]
        if c.error_code:
            raise KafkaError.for_code(c.error_code, c.error_message or "FindCoordinator failed")
        found = (c.node_id, c.host, c.port)
        self.nodes[p] = found
        return found

    async def _call(self, key: ShareKey, api_key: int, req: Any) -> Any:
        """Send ``req`` (v0) to the share coordinator of ``key``: its one PartitionResult."""
        node, host, port = await self._find(key)
        try:
            conn = await self._conn(host, port)
            resp = await conn.send(api_key, req, version=0, timeout_ms=15000)
        except Exception as e:  # noqa: BLE001 - retried by the caller
            self._drop(host, port)
            self.nodes.pop(self.coordinator.partition_of(key), None)
            raise KafkaError.for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"share coordinator {node}: {e}")
        pr = resp.results[0].partitions[0]
        if pr.error_code in _MOVED:
            self.nodes.pop(self.coordinator.partition_of(key), None)
        return pr

    # ------------------------------------------------------------------------------------ operations
    async def read(self, key: ShareKey) -> ShareState | None:
        if self.is_local(key):
            return self.coordinator.read(key)
        Req = m.ReadShareGroupStateRequest
        req = Req.new(group_id=key.group_id, topics=[Req.ReadStateData(
            topic_id=key.topic_id, partitions=[Req.PartitionData(partition=key.partition, leader_epoch=-1)])])
        pr = await self._call(key, 84, req)
        if pr.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return None  # never initialized
        if pr.error_code:
            raise KafkaError.for_code(pr.error_code, pr.error_message or "ReadShareGroupState failed")
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in pr.state_batches or []]
        log.info("share-partition %s: state read from the share coordinator %d (start offset %d, %d batches)",
                 key.coordinator_key(), self.nodes.get(self.coordinator.partition_of(key), (-1,))[0],
                 pr.start_offset, len(batches))
        return ShareState(-1, pr.state_epoch, -1, pr.start_offset, -1, -1, -1, batches)

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> None:
        if self.is_local(key):
            await self.coordinator.initialize(key, state_epoch, start_offset)
            return
        Req = m.InitializeShareGroupStateRequest
        part = Req.PartitionData(partition=key.partition, state_epoch=state_epoch, start_offset=start_offset)
        req = Req.new(group_id=key.group_id,
                      topics=[Req.InitializeStateData(topic_id=key.topic_id, partitions=[part])])
        pr = await self._call(key, 83, req)
        if pr.error_code:
            raise KafkaError.for_code(pr.error_code, pr.error_message or "InitializeShareGroupState failed")

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[StateBatch]) -> None:
        if self.is_local(key):
            await self.coordinator.write(key, state_epoch, leader_epoch, start_offset, batches)
            return
        Req = m.WriteShareGroupStateRequest
        sbs = [Req.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                              delivery_state=b.delivery_state, delivery_count=b.delivery_count)
               for b in batches]
        part = Req.PartitionData(partition=key.partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                 start_offset=start_offset, delivery_complete_count=-1, state_batches=sbs)
        req = Req.new(group_id=key.group_id,
                      topics=[Req.WriteStateData(topic_id=key.topic_id, partitions=[part])])
        pr = await self._call(key, 85, req)
        if pr.error_code:
            raise KafkaError.for_code(pr.error_code, pr.error_message or "WriteShareGroupState failed")

    async def delete(self, key: ShareKey) -> None:
        """The state of ``key`` goes (nothing to do when it has none)."""
        if self.is_local(key):
            await self.coordinator.delete(key)
            return
        Req = m.DeleteShareGroupStateRequest
        req = Req.new(group_id=key.group_id, topics=[Req.DeleteStateData(
            topic_id=key.topic_id, partitions=[Req.PartitionData(partition=key.partition)])])
        pr = await self._call(key, 86, req)
        if pr.error_code and pr.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise KafkaError.for_code(pr.error_code, pr.error_message or "DeleteShareGroupState failed")

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()


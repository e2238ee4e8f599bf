"""Transaction markers in a cluster (Kafka's TransactionMarkerChannelManager): the coordinator writes markers
of partitions this broker leads in-process (``txn.markers.write_markers``) and sends WriteTxnMarkers (27) to
the
leaders of the others. A partition without a known leader, or a request that fails, answers its error code
(NOT_LEADER_OR_FOLLOWER ...): the coordinator retries the completion later."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..txn.markers import write_markers

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1


class MarkerSender:
    def __init__(self, services: Any) -> None:
        self.services = services
        self.conns: dict[int, Any] = {}

    async def _conn(self, node_id: int) -> Any:
        from moldau.client.conn import Connection

        c = self.conns.get(node_id)
        if c is not None and c.connected:
            return c
        store = self.services.metadata
        b = store.live.get(node_id)
        if b is None:
            raise ConnectionError(f"broker {node_id} is not live")
        name = self.services.cluster.listener_name
        host, port = b.endpoints.get(name) or next(iter(b.endpoints.values()))
        c = await Connection.open(host, port, client_id=f"txn-markers-{self.services.node_id}")
        self.conns[node_id] = c
        return c

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        partitions: Iterable[tuple[str, int]],
        coordinator_epoch: int,
    ) -> dict[tuple[str, int], int]:
        store = self.services.metadata
        me = self.services.node_id
        local: list[tuple[str, int]] = []
        remote: dict[int, list[tuple[str, int]]] = {}
        results: dict[tuple[str, int], int] = {}
        for tp in sorted(set(partitions)):
            view = store.partition_state(*tp)
            leader = view.leader if view is not None else me
            if leader == me:
                local.append(tp)
            elif leader < 0:
                results[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                remote.setdefault(leader, []).append(tp)
        if local:
            results.update(
                await write_markers(
                    self.services, producer_id, producer_epoch, commit, local, coordinator_epoch
                )
            )
        for node, tps in remote.items():
            results.update(
                await self._send(node, producer_id, producer_epoch, commit, tps, coordinator_epoch)
            )
        return results

    async def _send(
        self,
        node: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        tps: list[tuple[str, int]],
        coordinator_epoch: int,
    ) -> dict[tuple[str, int], int]:
        Req = m.WriteTxnMarkersRequest
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        req = Req.new(
            markers=[
                Req.WritableTxnMarker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=commit,
                    topics=[
                        Req.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
                    ],
                    coordinator_epoch=coordinator_epoch,
                    transaction_version=0,
                )
            ]
        )
        try:
            conn = await self._conn(node)
            resp = await conn.send(27, req, version=WRITE_TXN_MARKERS_VERSION, timeout_ms=30000)
        except Exception as e:  # noqa: BLE001 - the coordinator retries
            log.info("WriteTxnMarkers to broker %d failed: %s", node, e)
            c = self.conns.pop(node, None)
            if c is not None:
                c.close()
            return {tp: ErrorCode.NOT_LEADER_OR_FOLLOWER for tp in tps}
        out: dict[tuple[str, int], int] = {}
        for mk in resp.markers:
            for t in mk.topics:
                for pr in t.partitions:
                    out[(t.name, pr.partition_index)] = pr.error_code
        return out

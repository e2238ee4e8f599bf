"""Producer ids unique across the cluster: blocks claimed from ``/latest_producer_id_block`` (Kafka's
ZooKeeper-mode ProducerIdManager: JSON {"version":1,"broker":..,"block_start":"..","block_end":".."}, updated
with a znode version check so two brokers never claim the same block)."""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000


class ZkProducerIdManager:
    def __init__(self, zk: Any, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._next = 0
        self._end = 0  # exclusive

    def next_id(self) -> int:
        if self._next >= self._end:
            self._claim()
        pid = self._next
        self._next += 1
        return pid

    def _claim(self) -> None:
        """Synchronous kazoo calls (rare: once per BLOCK_SIZE ids)."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        kz = self.zk.sync
        while True:
            try:
                data, stat = kz.get(PRODUCER_ID_BLOCK_PATH)
                cur = json.loads(data.decode()) if data else None
                version = stat.version
            except NoNodeError:
                cur, version = None, -1
            start = int(cur["block_end"]) + 1 if cur else 0
            end = start + BLOCK_SIZE - 1
            doc = json.dumps(
                {"version": 1, "broker": self.broker_id, "block_start": str(start), "block_end": str(end)}
            ).encode()
            try:
                if version < 0:
                    kz.create(PRODUCER_ID_BLOCK_PATH, doc)
                else:
                    kz.set(PRODUCER_ID_BLOCK_PATH, doc, version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed a block meanwhile
            self._next, self._end = start, end + 1
            log.info("claimed producer id block %d..%d", start, end)
            return

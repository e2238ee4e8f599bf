"""Leader election between registry instances, through Kafka's group protocol as Confluent's registry does
(``schema.registry.group.id``, default ``schema-registry``).

Every instance is a member of one consumer group subscribed to the one-partition ``_schemas`` topic, its
``client.id`` the URL it serves on: the group gives that partition to exactly one member, which is the leader
(the consumer is paused, so it fetches nothing). A follower finds the leader's URL by describing the group
(the member whose assignment holds the partition) and forwards writes there. When the leader dies, its session
times out, the group rebalances and another instance takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from moldau.client import AsyncAdmin, AsyncConsumer, TopicPartition

log = logging.getLogger(__name__)

GROUP = "schema-registry"


class LeaderElector:
    def __init__(
        self,
        client_conf: Mapping[str, Any],
        topic: str,
        group_id: str,
        url: str,
        session_timeout_ms: int = 10000,
    ) -> None:
        self.client_conf = dict(client_conf)
        self.topic = topic
        self.group_id = group_id
        self.url = url
        self.session_timeout_ms = session_timeout_ms
        self.is_leader = False
        self._tp = TopicPartition(topic, 0)
        self._consumer: AsyncConsumer | None = None
        self._admin: AsyncAdmin | None = None
        self._task: asyncio.Task[None] | None = None
        self._leader_url: str | None = None
        self._leader_seen = 0.0

    async def start(self) -> None:
        self._consumer = AsyncConsumer(
            config={
                **self.client_conf,
                "group.id": self.group_id,
                "client.id": self.url,
                "enable.auto.commit": False,
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": max(self.session_timeout_ms // 5, 100),
            }
        )
        await self._consumer.start()
        self._consumer.subscribe([self.topic], listener=self)
        self._admin = AsyncAdmin(self.client_conf)
        await self._admin.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="moldau-registry-election")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._consumer is not None:
            await self._consumer.close(autocommit=False)
            self._consumer = None
        if self._admin is not None:
            await self._admin.close()
            self._admin = None
        self.is_leader = False

    # the rebalance listener
    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self._tp in assigned:
            self.is_leader = True
            self._leader_url = self.url
            assert self._consumer is not None
            self._consumer.pause(self._tp)  # the store's own reader reads the topic
            log.info("schema registry: %s is the leader (group %s)", self.url, self.group_id)

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if self._tp in revoked and self.is_leader:
            self.is_leader = False
            self._leader_url = None
            log.info("schema registry: %s is no longer the leader", self.url)

    on_partitions_lost = on_partitions_revoked

    async def _run(self) -> None:
        assert self._consumer is not None
        while True:
            try:
                await self._consumer.poll(timeout=0.5)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the group is retried; a follower meanwhile forwards nowhere
                log.warning("schema registry election: %s", e)
                await asyncio.sleep(0.5)

    async def leader_url(self, timeout: float = 10.0, refresh: bool = False) -> str | None:
        """This instance's URL when it leads; else the leader's, from the group's description (cached for a
        second); None when no leader is known within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            if self.is_leader:
                return self.url
            if not refresh and self._leader_url and time.monotonic() - self._leader_seen < 1.0:
                return self._leader_url
            refresh = False
            self._leader_url = await self._describe()
            self._leader_seen = time.monotonic()
            if self._leader_url or time.monotonic() >= deadline:
                return self._leader_url
            await asyncio.sleep(0.2)

    async def _describe(self) -> str | None:
        if self._admin is None:
            return None
        try:
            desc = (await self._admin.describe_consumer_groups([self.group_id], timeout=5.0))[self.group_id]
        except Exception as e:
            log.debug("schema registry election: describe %s: %s", self.group_id, e)
            return None
        if desc.state != "Stable":
            return None
        for m in desc.members:
            if self._tp in m.assignment and m.client_id.startswith(("http://", "https://")):
                return str(m.client_id)
        return None

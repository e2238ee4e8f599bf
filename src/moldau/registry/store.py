"""``KafkaStore``: the registry's state kept in the compacted one-partition topic ``_schemas``.

A reader task applies every record of the topic, in offset order, to a ``RegistryState``. A write produces
its records with acks=all and returns once the reader has applied them, so a write is visible to the next
request on this instance (read-your-writes), and the state is always exactly what the topic says.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from moldau._aio import wait_for
from moldau.client import AsyncAdmin, AsyncConsumer, AsyncProducer, NewTopic, TopicPartition

from .state import RegistryState

log = logging.getLogger(__name__)

TOPIC = "_schemas"


class StoreError(Exception):
    """The backing topic cannot be read or written (Confluent's 50001 / 50002)."""


class KafkaStore:
    def __init__(
        self,
        client_conf: Mapping[str, Any],
        state: RegistryState,
        topic: str = TOPIC,
        replication_factor: int = -1,
        timeout: float = 30.0,
    ) -> None:
        self.client_conf = dict(client_conf)
        self.state = state
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout = timeout
        self._tp = TopicPartition(topic, 0)
        self._producer: AsyncProducer | None = None
        self._consumer: AsyncConsumer | None = None
        # end offsets on a connection of their own: the reader's long-polling Fetch would hold them back
        self._admin: AsyncAdmin | None = None
        self._reader: asyncio.Task[None] | None = None
        self._applied = asyncio.Condition()
        self.lock = asyncio.Lock()  # held by a write from reading the state to its records being applied

    async def start(self) -> None:
        await self._create_topic()
        self._producer = AsyncProducer({**self.client_conf, "acks": "all", "linger.ms": 0})
        await self._producer.start()
        self._consumer = AsyncConsumer(
            config={**self.client_conf, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )
        await self._consumer.start()
        self._consumer.assign([self._tp])
        self._consumer.seek(self._tp, 0)
        self._reader = asyncio.get_running_loop().create_task(self._read(), name="moldau-registry-reader")
        await self.catch_up()
        log.info(
            "schema registry: %s replayed up to offset %d (%d subjects, max id %d)",
            self.topic,
            self.state.applied_offset,
            len(self.state.subjects),
            self.state.max_id,
        )

    async def _create_topic(self) -> None:
        admin = self._admin = AsyncAdmin(self.client_conf)
        await admin.start()
        topics = await admin.list_topics(include_internal=True)
        if self.topic in topics:
            if topics[self.topic] != 1:
                log.warning(
                    "%s has %d partitions; the registry reads partition 0 only",
                    self.topic,
                    topics[self.topic],
                )
            return
        res = await admin.create_topics(
            [NewTopic(self.topic, 1, self.replication_factor, config={"cleanup.policy": "compact"})],
            timeout=self.timeout,
            raise_errors=False,
        )
        err = res.get(self.topic)
        if err is not None and "exists" not in str(err).lower():
            raise StoreError(f"cannot create {self.topic}: {err}")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None
        if self._consumer is not None:
            await self._consumer.close(autocommit=False)
            self._consumer = None
        if self._producer is not None:
            await self._producer.close()
            self._producer = None
        if self._admin is not None:
            await self._admin.close()
            self._admin = None

    async def _read(self) -> None:
        assert self._consumer is not None
        while True:
            try:
                batch = await self._consumer.poll(timeout=0.5)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("schema registry: reading %s", self.topic)
                await asyncio.sleep(1.0)
                continue
            if not batch:
                continue
            for r in batch:
                self.state.apply(r.key, r.value, r.offset)
            async with self._applied:
                self._applied.notify_all()

    async def _wait_applied(self, offset: int) -> None:
        async def wait() -> None:
            async with self._applied:
                await self._applied.wait_for(lambda: self.state.applied_offset >= offset)

        try:
            await wait_for(wait(), self.timeout)
        except TimeoutError:
            raise StoreError(
                f"{self.topic}: offset {offset} not read back within {self.timeout:.0f} s"
            ) from None

    async def catch_up(self) -> None:
        """Return once every record in the topic now has been applied (a read after another instance's
        write sees it)."""
        assert self._admin is not None
        try:
            end = (await self._admin.list_offsets({self._tp: "latest"}, timeout=self.timeout))[
                self._tp
            ].offset
        except Exception as e:
            raise StoreError(f"{self.topic}: cannot read its end offset: {e}") from None
        if end > 0:
            await self._wait_applied(end - 1)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Serialise a write: hold ``lock``, and read the topic to its end first, so that what the write
        computes (the next id and version) follows every record written before it, by any instance."""
        async with self.lock:
            await self.catch_up()
            yield

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Produce the records (in order) and wait until the reader has applied the last one. Call with
        ``lock`` held."""
        assert self._producer is not None
        last = -1
        try:
            futs = [
                await self._producer.send(self.topic, value, key=key, partition=0) for key, value in records
            ]
            for fut in futs:
                md = await wait_for(fut, self.timeout)
                last = max(last, md.offset)
        except (TimeoutError, Exception) as e:
            if isinstance(e, StoreError):
                raise
            raise StoreError(f"cannot write to {self.topic}: {e}") from None
        if last >= 0:
            await self._wait_applied(last)

"""ControllerChannel: the controller's connections to the brokers (Kafka's ControllerChannelManager).

One queue and one sender task per live broker, so requests reach each broker in the order the controller made
them; a request that fails on a broken connection is retried on a new one while the broker stays live.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from moldau._aio import cancel_and_wait

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1


async def stop_task_and_connection(task: asyncio.Task[Any], conn: Any) -> None:
    """Cancel a sender's (or a fetcher's) task, wait for it, close its connection."""
    await cancel_and_wait(task)  # bounded: the controller's event queue never waits for ever on a sender
    if conn is not None:
        conn.close()


class BrokerSender:
    def __init__(self, broker_id: int, host: str, port: int, *, client_id: str, timeout_ms: int) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self.queue: asyncio.Queue[tuple[int, int, Any, asyncio.Future[Any]]] = asyncio.Queue()
        self.conn: Any = None
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-to-{broker_id}")

    def send(self, api_key: int, version: int, request: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((api_key, version, request, fut))
        return fut

    async def _connection(self) -> Any:
        from moldau.client.conn import Connection

        if self.conn is not None and self.conn.connected:
            return self.conn
        self.conn = await Connection.open(
            self.host,
            self.port,
            client_id=self.client_id,
            request_timeout_ms=self.timeout_ms,
            connect_timeout_ms=self.timeout_ms,
        )
        return self.conn

    async def _run(self) -> None:
        while True:
            api_key, version, request, fut = await self.queue.get()
            while not fut.done():
                try:
                    conn = await self._connection()
                    resp = await conn.send(api_key, request, version=version)
                    if not fut.done():
                        fut.set_result(resp)
                except asyncio.CancelledError:
                    if not fut.done():
                        fut.cancel()
                    raise
                except Exception as e:  # noqa: BLE001
                    log.debug("request %d to broker %d failed (%s); retrying", api_key, self.broker_id, e)
                    if self.conn is not None:
                        self.conn.close()
                        self.conn = None
                    await asyncio.sleep(RETRY_BACKOFF_S)

    async def close(self) -> None:
        await stop_task_and_connection(self.task, self.conn)
        self.conn = None
        while not self.queue.empty():
            _k, _v, _r, fut = self.queue.get_nowait()
            if not fut.done():
                fut.cancel()


class ControllerChannel:
    def __init__(self, *, client_id: str, timeout_ms: int = 30000) -> None:
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self.senders: dict[int, BrokerSender] = {}

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        s = self.senders.get(broker_id)
        if s is not None and (s.host, s.port) == (host, port):
            return
        if s is not None:
            asyncio.get_running_loop().create_task(s.close())
        self.senders[broker_id] = BrokerSender(
            broker_id, host, port, client_id=self.client_id, timeout_ms=self.timeout_ms
        )

    async def remove_broker(self, broker_id: int) -> None:
        s = self.senders.pop(broker_id, None)
        if s is not None:
            await s.close()

    def send(self, broker_id: int, api_key: int, version: int, request: Any) -> asyncio.Future[Any] | None:
        s = self.senders.get(broker_id)
        if s is None:
            return None
        return s.send(api_key, version, request)

    async def close(self) -> None:
        for bid in list(self.senders):
            await self.remove_broker(bid)

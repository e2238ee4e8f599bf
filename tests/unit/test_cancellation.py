"""Cancellation reaches every task: Python 3.11's asyncio.wait_for could lose it (CPython gh-86296), and a
controller's sender reconnecting to a stopped broker then never ended, so the controller's event queue, which
waits for it when the broker leaves, stopped for good (no leader elections, no ISR changes)."""

import asyncio
import random
import re
import socket
from pathlib import Path

import pytest

from moldau._aio import cancel_and_wait, wait_for
from moldau.broker.cluster import channel

SRC = Path(__file__).resolve().parents[2] / "src" / "moldau"


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_sender_to_a_stopped_broker_stops_when_removed(monkeypatch):
    monkeypatch.setattr(channel, "RETRY_BACKOFF_S", 0.0005)  # reconnect as often as possible: many races

    async def main() -> list[int]:
        port = _closed_port()
        slow = []
        for i in range(300):
            sender = channel.BrokerSender(3, "127.0.0.1", port, client_id="t", timeout_ms=30000)
            sender.send(6, 7, None)  # pending: the sender keeps reconnecting
            await asyncio.sleep(random.random() * 0.01)
            t0 = asyncio.get_running_loop().time()
            await sender.close()
            if asyncio.get_running_loop().time() - t0 > 0.5:
                slow.append(i)
        return slow

    assert asyncio.run(main()) == []


def test_wait_for_propagates_a_cancellation_racing_the_result():
    async def main() -> int:
        lost = 0
        for _ in range(200):
            fut = asyncio.get_running_loop().create_future()
            task = asyncio.ensure_future(wait_for(fut, 10))
            await asyncio.sleep(0)
            fut.set_result(1)  # the result and the cancellation in the same loop iteration
            task.cancel()
            try:
                await task
                lost += 1
            except asyncio.CancelledError:
                pass
        return lost

    assert asyncio.run(main()) == 0


def test_wait_for_times_out():
    async def main() -> None:
        with pytest.raises(TimeoutError):
            await wait_for(asyncio.sleep(5), 0.05)
        assert await wait_for(asyncio.sleep(0, "x"), None) == "x"

    asyncio.run(main())


def test_cancel_and_wait_gives_up_on_a_task_that_refuses():
    refuse = [True]

    async def stubborn() -> None:
        while refuse[0]:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    async def main() -> tuple[bool, bool]:
        task = asyncio.ensure_future(stubborn())
        await asyncio.sleep(0)
        t0 = asyncio.get_running_loop().time()
        ended = await cancel_and_wait(task, patience_s=0.3)
        took = asyncio.get_running_loop().time() - t0
        ok = await cancel_and_wait(asyncio.ensure_future(asyncio.sleep(10)))
        refuse[0] = False
        task.cancel()
        await asyncio.wait({task})
        return ended, took < 1.0 and ok

    assert asyncio.run(main()) == (False, True)


def test_no_asyncio_wait_for_in_moldau():
    used = [
        f"{p.relative_to(SRC)}:{n}"
        for p in SRC.rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"asyncio\.wait_for\(", line) and not line.lstrip().startswith("#")
    ]
    assert used == [], f"use moldau._aio.wait_for (asyncio.wait_for loses cancellations on 3.11): {used}"

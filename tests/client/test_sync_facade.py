"""The sync facade's machinery (no broker)."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
import time

import pytest

from moldau.client.errors import IllegalStateError
from moldau.client.futures import BatchResult, RecordFuture
from moldau.client.sync import LoopThread, _CallbackBridge


def test_loop_thread_runs_coroutines_and_refuses_reentry():
    lt = LoopThread("t")
    try:
        async def add(a, b):
            await asyncio.sleep(0)
            return a + b

        assert lt.run(add(1, 2)) == 3
        assert isinstance(lt.submit(add(2, 2)), cf.Future)

        async def reenter():
            lt.run(add(1, 1))

        with pytest.raises(IllegalStateError):
            lt.run(reenter())
    finally:
        lt.stop()
    assert not lt.thread.is_alive()


def test_callback_bridge_runs_callbacks_on_the_calling_thread_even_when_nested():
    lt = LoopThread("t")
    bridge = _CallbackBridge(lt)
    seen = []

    async def inner():
        return "inner"

    def callback(arg):
        seen.append((arg, threading.current_thread() is threading.main_thread()))
        time.sleep(0.2)  # the outer call ends meanwhile (like poll() returning while a rebalance goes on)
        assert bridge.run(inner()) == "inner"  # a blocking call from inside the callback

    async def outer():
        asyncio.get_running_loop().create_task(bridge.runner(callback, 7))
        await asyncio.sleep(0.05)
        return "outer"

    try:
        assert bridge.run(outer()) == "outer"
        assert seen == [(7, True)]
    finally:
        lt.stop()


def test_record_future_is_a_concurrent_future_and_awaitable():
    b = BatchResult("t", 3)
    futs = [RecordFuture(b, i, 1000 + i) for i in range(3)]
    calls = []
    futs[0].add_done_callback(lambda f: calls.append(f.result().offset))
    assert not futs[1].done()
    with pytest.raises(cf.TimeoutError):
        futs[1].result(timeout=0.01)

    def complete():
        time.sleep(0.05)
        b.complete(40, -1)

    threading.Thread(target=complete).start()
    done, not_done = cf.wait(futs, timeout=5)
    assert len(done) == 3 and not not_done
    assert [f.result().offset for f in futs] == [40, 41, 42]
    assert futs[2].result().timestamp == 1002 and calls == [40]

    async def main():
        b2 = BatchResult("t", 0)
        f = RecordFuture(b2, 1, 5)
        asyncio.get_running_loop().call_later(0.01, b2.complete, -1, -1, RuntimeError("boom"))
        with pytest.raises(RuntimeError, match="boom"):
            await f

    asyncio.run(main())

"""asyncio helpers that keep cancellation intact.

Python 3.11's ``asyncio.wait_for`` loses a cancellation that arrives in the same loop iteration as the end of
the awaitable it waits for: it returns that result (or raises its error) instead of ``CancelledError``
(CPython gh-86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``). A task in a retry loop,
such as a controller's sender reconnecting to a broker that just stopped, then never ends, and whoever awaits
its cancellation waits for ever. moldau therefore never calls ``asyncio.wait_for``; it uses ``wait_for``
below, which is ``asyncio.timeout`` (3.11+, cancellation-safe) around the await.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """Await ``aw`` for at most ``timeout`` seconds (None: no limit); on expiry cancel it and raise
    ``TimeoutError``. A cancellation of the caller always propagates."""
    async with asyncio.timeout(timeout):
        return await aw


async def cancel_and_wait(task: asyncio.Task[Any], *, patience_s: float = 5.0) -> bool:
    """Cancel ``task`` and wait until it ended. A task that swallows the cancellation (third-party code
    can) is cancelled again every second, up to ``patience_s``; then it is left behind with a warning
    rather than blocking the caller. True when the task ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience_s
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=max(0.0, min(1.0, deadline - loop.time())))
        if loop.time() >= deadline and not task.done():
            log.warning("task %s did not stop when cancelled", task.get_name())
            return False
    if not task.cancelled():
        task.exception()  # retrieved: its end is of no interest to a caller that cancelled it
    return True

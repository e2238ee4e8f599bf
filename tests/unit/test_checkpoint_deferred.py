"""moldau.log.checkpoint.deferred_writes: queued atomic writes, performed in order off the event loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from moldau.log import checkpoint as cp


def test_writes_are_queued_until_flush_and_run_in_the_writer_thread(tmp_path: Path, monkeypatch):
    threads: list[str] = []
    real = cp._atomic_write_now

    def spy(*args):
        threads.append(threading.current_thread().name)
        real(*args)

    monkeypatch.setattr(cp, "_atomic_write_now", spy)
    a, b = tmp_path / "a", tmp_path / "b"

    async def main() -> None:
        with cp.deferred_writes() as batch:
            cp.atomic_write(str(a), b"one")
            cp.atomic_write(str(b), b"two")
            cp.atomic_write(str(a), b"three")  # supersedes "one"
        assert len(batch) == 3 and not a.exists() and not b.exists()
        await batch.flush()

    asyncio.run(main())
    assert a.read_bytes() == b"three" and b.read_bytes() == b"two"
    assert len(threads) == 2 and all(t.startswith("moldau-checkpoint-writer") for t in threads)
    assert not (tmp_path / "a.tmp").exists()


def test_a_later_direct_write_wins_over_a_queued_one(tmp_path: Path):
    p = tmp_path / "f"

    async def main() -> None:
        with cp.deferred_writes() as batch:
            cp.atomic_write(str(p), b"old")
        cp.atomic_write(str(p), b"new")  # outside the block: written at once
        assert p.read_bytes() == b"new"
        await batch.flush()

    asyncio.run(main())
    assert p.read_bytes() == b"new"


def test_tasks_started_inside_the_block_write_at_once_after_it(tmp_path: Path):
    p = tmp_path / "late"

    async def later() -> None:
        await asyncio.sleep(0.01)
        cp.atomic_write(str(p), b"x")  # the block is closed by now: not queued into a flushed batch

    async def main() -> None:
        with cp.deferred_writes() as batch:
            task = asyncio.get_running_loop().create_task(later())
        await batch.flush()
        await task
        assert p.read_bytes() == b"x"

    asyncio.run(main())

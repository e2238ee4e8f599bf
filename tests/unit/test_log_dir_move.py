"""moldau.log.dir_move: a replica moved between log dirs while it is appended to, and the start after a stop
at each step of the swap (exactly one replica, none of the data lost)."""

from __future__ import annotations

import asyncio
import os
import shutil

from moldau.log import LogConfig, LogManager
from moldau.log.dir_move import run_move
from moldau.protocol.records import BatchBuilder, split_batches

# small segments: the move copies several, and rolls happen while it runs
CONFIG = LogConfig(segment_bytes=16384)


def _batch(i: int) -> bytearray:
    b = BatchBuilder()
    for j in range(10):
        b.append(1000 + j, b"k%d-%d" % (i, j), b"v" * 200)
    return bytearray(b.build())


def _append(lg, i: int) -> None:
    buf = _batch(i)
    lg.append(buf, split_batches(buf), 5000)


def _offsets(lg) -> int:
    """Records readable from offset 0 to the end, counted batch by batch."""
    n, off = 0, lg.log_start_offset
    while off < lg.log_end_offset:
        r = lg.read(off, 1 << 20)
        assert r.size > 0
        n += r.last_offset_exclusive - off
        off = r.last_offset_exclusive
    return n


def _manager(tmp_path) -> tuple[LogManager, list[str]]:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    return LogManager(dirs, CONFIG), dirs


def _entries(dirs: list[str], prefix: str) -> list[str]:
    return sorted(f"{os.path.basename(d)}/{n}" for d in dirs for n in os.listdir(d) if n.startswith(prefix))


def test_move_while_appending(tmp_path):
    lm, dirs = _manager(tmp_path)
    lg = lm.create("t", 0)
    src = lm.dir_of("t", 0)
    dest = next(d for d in dirs if d != src)
    for i in range(50):
        _append(lg, i)

    async def go() -> None:
        move = lm.start_move("t", 0, dest)
        assert move is not None and os.path.isdir(move.future_path)
        assert lm.start_move("t", 0, dest) is None  # already moving there
        task = asyncio.ensure_future(run_move(lm, move, lambda: 200_000))  # throttled: appends interleave
        i = 50
        while not task.done():
            _append(lg, i)
            i += 1
            await asyncio.sleep(0.005)
        await task
        assert i > 50

    asyncio.run(go())
    assert lm.dir_of("t", 0) == dest and lm.get("t", 0) is lg and os.path.dirname(lg.dir) == dest
    assert not lm.moves
    assert _entries(dirs, "t-0") == [f"{os.path.basename(dest)}/t-0"]
    leo = lg.log_end_offset
    assert _offsets(lg) == leo
    _append(lg, 999)  # the moved log keeps taking appends, in its new directory
    assert lg.log_end_offset == leo + 10
    lm.close()
    lm2 = LogManager(dirs, CONFIG)
    assert lm2.dir_of("t", 0) == dest
    assert lm2.get("t", 0).log_end_offset == leo + 10 and _offsets(lm2.get("t", 0)) == leo + 10
    lm2.close()


def _prepared(tmp_path) -> tuple[list[str], str, str, int]:
    """A closed manager's partition t-0 with data: (dirs, its dir, the other dir, its log end offset)."""
    lm, dirs = _manager(tmp_path)
    lg = lm.create("t", 0)
    for i in range(20):
        _append(lg, i)
    leo = lg.log_end_offset
    src = lm.dir_of("t", 0)
    lm.close()
    return dirs, src, next(d for d in dirs if d != src), leo


def test_start_after_stop_mid_copy(tmp_path):
    dirs, src, dest, leo = _prepared(tmp_path)
    shutil.copytree(os.path.join(src, "t-0"), os.path.join(dest, "t-0.abc-future"))
    lm = LogManager(dirs, CONFIG)
    assert lm.dir_of("t", 0) == src and _offsets(lm.get("t", 0)) == leo
    assert _entries(dirs, "t-0") == [f"{os.path.basename(src)}/t-0"]  # the unfinished copy is gone
    lm.close()


def test_start_after_stop_between_the_renames(tmp_path):
    dirs, src, dest, leo = _prepared(tmp_path)
    shutil.copytree(os.path.join(src, "t-0"), os.path.join(dest, "t-0.abc-future"))
    os.rename(os.path.join(src, "t-0"), os.path.join(src, "t-0.def-moved"))  # step 3 done, step 4 not
    lm = LogManager(dirs, CONFIG)
    assert lm.dir_of("t", 0) == src and _offsets(lm.get("t", 0)) == leo  # the original, renamed back
    assert _entries(dirs, "t-0") == [f"{os.path.basename(src)}/t-0"]
    lm.close()


def test_start_after_stop_before_the_old_copy_is_removed(tmp_path):
    dirs, src, dest, leo = _prepared(tmp_path)
    shutil.copytree(os.path.join(src, "t-0"), os.path.join(dest, "t-0"))
    os.rename(os.path.join(src, "t-0"), os.path.join(src, "t-0.def-moved"))  # steps 3 and 4 done
    lm = LogManager(dirs, CONFIG)
    assert lm.dir_of("t", 0) == dest and _offsets(lm.get("t", 0)) == leo
    assert _entries(dirs, "t-0") == [f"{os.path.basename(dest)}/t-0"]
    lm.close()

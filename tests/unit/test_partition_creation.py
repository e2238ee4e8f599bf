"""A new partition's log made in three steps (moldau.log.manager: dir_for_new_log on the owner's thread,
build_log in a worker thread, register_log back on the owner's), and the log maintenance tick in steps."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor

from moldau.log import LogConfig, LogManager
from moldau.log.checkpoint import read_partition_metadata, uuid_to_base64


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def test_logs_built_in_worker_threads_are_registered_by_the_owner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    lm = LogManager(dirs, LogConfig(), FakeClock())
    tid = uuid.uuid4()
    try:
        with ThreadPoolExecutor(4) as pool:
            jobs = [(lm.dir_for_new_log(), i) for i in range(40)]
            built = list(pool.map(lambda job: (job[0], lm.build_log(job[0], "t", job[1], topic_id=tid)),
                                  jobs))
        assert lm.partitions() == []  # nothing registered by the workers
        for d, plog in built:
            lm.register_log(plog, d)
        assert lm.partitions() == [("t", i) for i in range(40)]
        for i in range(40):
            plog = lm.get("t", i)
            assert plog is not None and os.path.isdir(plog.dir)
            assert read_partition_metadata(plog.dir) == uuid_to_base64(tid)
        # the directory for the next log: the one holding fewer partitions
        counts = {d: sum(1 for k in lm.partitions() if lm.dir_of(*k) == d) for d in lm.log_dirs}
        assert lm.dir_for_new_log() == min(counts, key=lambda d: counts[d])
    finally:
        lm.close()


def test_tick_steps_yield_and_still_visit_every_partition(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lm = LogManager([str(tmp_path)], LogConfig(), FakeClock())
    try:
        for i in range(300):
            lm.create("t", i)
        seen: list[int] = []
        for plog in lm.logs():
            plog.maybe_roll_by_time = (lambda p: lambda now: seen.append(p))(plog.partition)  # type: ignore
        steps = sum(1 for _ in lm.tick_steps(slice_s=0.0))
        assert steps >= 300 // 64  # a yield after every 64 partitions when each slice is used up at once
        assert sorted(seen) == list(range(300))
        seen.clear()
        lm.tick()  # the whole tick at once, as before
        assert sorted(seen) == list(range(300))
    finally:
        lm.close()

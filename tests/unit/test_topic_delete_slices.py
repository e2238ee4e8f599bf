"""A topic deletion renames its partition directories in slices of the event loop (ReplicaManager.
on_topic_deleted, LogManager.detach_topic_for_delete / rename_detached): the partitions leave at once, a topic
of the same name made meanwhile never meets the old directories, and a start after a crash in the middle of
a deletion deletes the directories not renamed yet instead of adopting them (the metadata's pending
deletions), in-process brokers on real log directories."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from moldau.broker.broker import Broker
from moldau.broker.config import BrokerConfig
from moldau.broker.metadata import METADATA_FILE
from moldau.protocol.records import BatchBuilder


async def start_broker(data: Path) -> Broker:
    cfg = BrokerConfig.load(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data)}, env={})
    b = Broker(cfg)
    await b.start()
    return b


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def records(*values: bytes) -> bytearray:
    bb = BatchBuilder()
    for v in values:
        bb.append(timestamp=int(time.time() * 1000), key=None, value=v)
    return bytearray(bb.build(0))


def dirs_of(data: Path, topic: str) -> list[str]:
    """The partition directories of ``topic`` and the renamed ones (``<topic>-<p>.<id>-delete``)."""
    return sorted(e.name for e in os.scandir(data) if e.is_dir() and e.name.startswith(topic + "-"))


def test_partitions_leave_at_once_directories_renamed_in_slices_name_reused(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def main() -> None:
        b = await start_broker(data)
        rm, lm, md = b.services.replica_manager, b.services.log_manager, b.services.metadata
        try:
            old = md.create_topic("t", 400, 1)
            assert await rm.wait_created(["t"], 30) == set()
            assert rm.append(rm.get_partition("t", 0), records(b"old")).error == 0
            assert len(dirs_of(data, "t")) == 400
            md.delete_topic("t")
            # at once: no partition, nothing the log manager tracks; the directories are not renamed yet
            assert rm.get_partition("t", 0) is None and not any(k[0] == "t" for k in rm.partitions)
            assert not any(k[0] == "t" for k in lm.partitions())
            assert rm.deleting("t") and lm.awaits_rename("t", 399)
            assert old.topic_id in md.pending_deletions
            # a topic of the same name at once: its partition's old directory is renamed first
            md.create_topic("t", 1, 1)
            p = rm.get_partition("t", 0)
            assert p is not None and p.log.log_end_offset == 0
            assert rm.append(p, records(b"new")).error == 0
            while rm.deleting("t"):
                await asyncio.sleep(0.01)
            assert old.topic_id not in md.pending_deletions
            deadline = time.monotonic() + 30
            while dirs_of(data, "t") != ["t-0"]:
                assert time.monotonic() < deadline, dirs_of(data, "t")
                await asyncio.sleep(0.05)
            assert p.log.log_end_offset == 1
            # a large topic of the same name while the old one's directories are renamed waits for them
            md.create_topic("u", 300, 1)
            assert await rm.wait_created(["u"], 30) == set()
            md.delete_topic("u")
            md.create_topic("u", 300, 1)
            assert rm.deleting("u") and rm.creating("u")
            assert await rm.wait_created(["u"], 30) == set()
            assert not rm.deleting("u")
            assert all(rm.get_partition("u", i).log.log_end_offset == 0 for i in range(300))  # type: ignore
            deadline = time.monotonic() + 30
            while len(dirs_of(data, "u")) != 300:
                assert time.monotonic() < deadline, len(dirs_of(data, "u"))
                await asyncio.sleep(0.05)
        finally:
            await b.stop()

    run(main())


def test_stop_in_the_middle_of_a_deletion_then_start(tmp_path: Path) -> None:
    """A stop while directories are still to be renamed: the log manager's close renames them, the next
    start removes them; the topic does not come back."""
    data = tmp_path / "data"

    async def main() -> None:
        b = await start_broker(data)
        md = b.services.metadata
        md.create_topic("t", 300, 1)
        assert await b.services.replica_manager.wait_created(["t"], 30) == set()
        md.delete_topic("t")
        assert b.services.replica_manager.deleting("t")
        await b.stop()
        assert all(n.endswith("-delete") for n in dirs_of(data, "t")), dirs_of(data, "t")
        b = await start_broker(data)
        try:
            assert "t" not in b.services.metadata.topics and dirs_of(data, "t") == []
        finally:
            await b.stop()

    run(main())


def test_start_after_a_crash_in_the_middle_of_a_deletion(tmp_path: Path) -> None:
    """The state a crash leaves when a deletion had renamed some directories only: the metadata without
    the topic but with its pending deletion, the other directories as they were. The start removes them
    all and adopts nothing; a topic of the same name created since (another id) keeps its own partition,
    and a partition of another topic stays."""
    data = tmp_path / "data"

    async def main() -> None:
        b = await start_broker(data)
        md, rm = b.services.metadata, b.services.replica_manager
        try:
            gone = md.create_topic("t", 40, 1)
            kept = md.create_topic("k", 2, 1)
            assert await rm.wait_created(["t"], 30) == set()
            assert rm.append(rm.get_partition("t", 5), records(b"old")).error == 0
            assert rm.append(rm.get_partition("k", 1), records(b"kept")).error == 0
        finally:
            await b.stop()
        os.rename(data / "t-3", data / f"t-3.{uuid.uuid4().hex}-delete")  # renamed before the crash
        doc = json.loads((data / METADATA_FILE).read_text())
        new_id = uuid.uuid4()
        doc["topics"] = [t for t in doc["topics"] if t["name"] != "t"]
        doc["deleting"] = [{"name": "t", "topic_id": str(gone.topic_id)}]
        (data / METADATA_FILE).write_text(json.dumps(doc))

        b = await start_broker(data)
        try:
            assert "t" not in b.services.metadata.topics, "a deleted topic came back"
            assert dirs_of(data, "t") == []
            assert b.services.replica_manager.get_partition("k", 1).log.log_end_offset == 1  # type: ignore
            assert b.services.metadata.topics["k"].topic_id == kept.topic_id
        finally:
            await b.stop()
        assert "deleting" not in json.loads((data / METADATA_FILE).read_text())

        # the same crash, with a topic of the same name created meanwhile (its partition 0 made, the old
        # directories of partitions 1.. not renamed yet)
        b = await start_broker(data)
        md, rm = b.services.metadata, b.services.replica_manager
        try:
            gone = md.create_topic("t", 40, 1)
            assert await rm.wait_created(["t"], 30) == set()
            assert rm.append(rm.get_partition("t", 5), records(b"old")).error == 0
        finally:
            await b.stop()
        doc = json.loads((data / METADATA_FILE).read_text())
        for t in doc["topics"]:
            if t["name"] == "t":
                t["topic_id"], t["num_partitions"] = str(new_id), 1
        doc["deleting"] = [{"name": "t", "topic_id": str(gone.topic_id)}]
        (data / METADATA_FILE).write_text(json.dumps(doc))
        b = await start_broker(data)
        try:
            md, rm = b.services.metadata, b.services.replica_manager
            assert md.topics["t"].topic_id == new_id and md.topics["t"].num_partitions == 1
            assert dirs_of(data, "t") == ["t-0"]
            p = rm.get_partition("t", 0)
            assert p is not None and p.log.log_end_offset == 0 and rm.get_partition("t", 5) is None
        finally:
            await b.stop()

    run(main())

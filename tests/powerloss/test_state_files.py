"""Every small state file moldau writes, under a power loss at every point of its write.

For each writer, on the lazy file system: version 1 is written; then, for every changing file-system
operation n of writing version 2 (create, write, fsync, rename, directory fsync, ...), the power goes at
operation n (a write it hits is torn) and the file is read back from what survived: it must hold version 1
or version 2, never a torn or missing file; and once the writer returned, version 2 must survive a power loss
(the write was acknowledged to whoever asked for it). Finally the readers are given torn copies (every
truncation of the file) and must either read them or refuse them with their own error, never crash with
another exception or return garbage silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.metadata import MetadataStore
from moldau.broker.quotas import QUOTAS_FILE, FileQuotaStore, make_entity
from moldau.broker.security.authorizer import (
    ACL_FILE,
    ALLOW,
    LITERAL,
    READ,
    TOPIC,
    AclAuthorizer,
    AclBinding,
    AclFilter,
)
from moldau.broker.security.credentials import CREDENTIALS_FILE, CredentialStore
from moldau.broker.services import ProducerIdManager
from moldau.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CorruptCheckpointError,
    read_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    write_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)
from moldau.log.index import TxnIndex
from moldau.log.producer_state import CorruptSnapshotError, ProducerStateManager

from .lazyfs import LazyFSMount

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def lazy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LazyFSMount, Path]]:
    from .lazyfs import fuse_unavailable

    reason = fuse_unavailable()
    if reason:
        pytest.skip(f"no lazy file system: {reason}")
    base = tmp_path_factory.mktemp("statefiles")
    fs = LazyFSMount(base / "disk", base / "mnt").mount()
    try:
        yield fs, base / "mnt"
    finally:
        fs.unmount()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fresh_dir(mnt: Path, name: str) -> Path:
    d = mnt / name
    d.mkdir()
    _fsync(d)
    _fsync(mnt)
    return d


Writer = Callable[[Path, int], None]  # (directory, version)
Reader = Callable[[Path], Any]  # directory -> what a restarted broker reads


def _crash_points(fs: LazyFSMount, mnt: Path, name: str, write: Writer, read: Reader) -> int:
    """Version 1, then a power loss at every operation of writing version 2; returns the operations seen."""
    d = _fresh_dir(mnt, name)
    write(d, 1)
    v1 = read(d)
    before = fs.stats()
    write(d, 2)
    v2 = read(d)
    assert v1 != v2
    after = fs.stats()
    ops = (after["write"] - before["write"]) + (after["fsync"] - before["fsync"]) + (
        after["fsyncdir"] - before["fsyncdir"])
    assert ops > 0
    # a loss just after the writer returned: version 2 is durable
    fs.power_loss()
    fs.revive()
    assert read(d) == v2, f"{name}: version 2 not durable once written"
    write(d, 1)
    assert read(d) == v1
    n = 1
    while True:
        fs.arm(ops=n, tear=True, seed=n)
        try:
            write(d, 2)
            done = True
        except OSError:
            done = False
        dead = fs.wait_dead(0.0 if done else 5.0)
        if dead is None:  # the writer finished before the n-th operation: every point was tried
            fs.disarm()
            break
        fs.revive()
        got = read(d)
        assert got in (v1, v2), f"{name}: power loss at operation {n} ({dead.get('at')}) left {got!r}"
        write(d, 1)  # version 1 again, durably, for the next point
        assert read(d) == v1
        n += 1
    return n - 1


def _torn_copies(path: Path, read: Callable[[], Any], errors: tuple[type[BaseException], ...]) -> None:
    """Every truncation of ``path``: the reader reads it or refuses it with one of ``errors``."""
    data = path.read_bytes()
    try:
        for cut in range(len(data)):
            path.write_bytes(data[:cut])
            try:
                read()
            except errors:
                pass
    finally:
        path.write_bytes(data)


# --------------------------------------------------------------------------------------------- the writers

def _offsets(d: Path, v: int) -> None:
    write_offset_checkpoint(str(d / "recovery-point-offset-checkpoint"), {("t", 0): 100 * v, ("t", 1): v})


def _epochs(d: Path, v: int) -> None:
    write_epoch_checkpoint(str(d / "leader-epoch-checkpoint"), [(e, e * 10) for e in range(v + 1)])


def _partition_metadata(d: Path, v: int) -> None:
    write_partition_metadata(str(d), ["AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"][v - 1])


def _meta_properties(d: Path, v: int) -> None:
    write_meta_properties(str(d), {"version": "1", "node.id": str(v), "cluster.id": "c"})


def _producer_snapshot(d: Path, v: int) -> None:
    psm = ProducerStateManager(86400000)
    psm.load_entries([(pid, 0, 10 * v, 100 * v, 5, 1000, -1, -1) for pid in range(v)], None)
    psm.write_snapshot(str(d / "00000000000000000010.snapshot"))


def _read_snapshot(d: Path) -> Any:
    try:
        return ProducerStateManager.parse_snapshot((d / "00000000000000000010.snapshot").read_bytes())
    except FileNotFoundError:
        return None


def _txn_index(d: Path, v: int) -> None:
    path = str(d / "00000000000000000000.txnindex")
    if v == 1:
        TxnIndex.rewrite(path, [(7, 1, 5, 1)])
    else:
        TxnIndex.append(path, 8, 6, 9, 6)


def _producer_ids(d: Path, v: int) -> None:
    ProducerIdManager(str(d))._persist(1000 * v)


def _read_producer_ids(d: Path) -> int:
    return ProducerIdManager(str(d))._block_end


def _quotas(d: Path, v: int) -> None:
    store = FileQuotaStore(str(d))
    store.alter([(make_entity([("user", "alice")]), {"producer_byte_rate": float(1000 * v)})])


def _credentials(d: Path, v: int) -> None:
    """Version 1: alice; version 2: alice and bob (salts are random: versions differ by their users)."""
    store = CredentialStore(str(d))
    if v == 1:
        if not store.has_user("alice"):
            store.add_password("alice", "secret", ["SCRAM-SHA-256"], iterations=4096)
        store.delete("bob")
    else:
        store.add_password("bob", "secret", ["SCRAM-SHA-512"], iterations=8192)


def _read_credentials(d: Path) -> Any:
    return CredentialStore(str(d)).users()


def _acls(d: Path, v: int) -> None:
    """Version 1: an ACL on topic-1; version 2: and one on topic-2."""
    a = AclAuthorizer(str(d))
    if v == 1:
        a.create([AclBinding(TOPIC, "topic-1", LITERAL, "User:alice", "*", READ, ALLOW)])
        a.delete([AclFilter(name="topic-2")])
    else:
        a.create([AclBinding(TOPIC, "topic-2", LITERAL, "User:alice", "*", READ, ALLOW)])


def _read_acls(d: Path) -> Any:
    a = AclAuthorizer(str(d))
    return sorted(str(b) for b in a.describe(AclFilter()))


def _metadata(d: Path, v: int) -> None:
    """The single node's topics. Version 1: t1; version 2: t1 and t2."""
    m = MetadataStore(str(d))
    m.load()
    if v == 1:
        if "t1" not in m.topics:
            m.create_topic("t1", 2, 1)
        if "t2" in m.topics:
            m.delete_topic("t2")
    else:
        m.create_topic("t2", 3, 1)


def _read_metadata(d: Path) -> Any:
    m = MetadataStore(str(d))
    m.load()
    return sorted((t.name, t.num_partitions, str(t.topic_id)) for t in m.topics.values())


WRITERS: dict[str, tuple[Writer, Reader]] = {
    "single-node-metadata": (_metadata, _read_metadata),
    "offset-checkpoint": (_offsets, lambda d: read_offset_checkpoint(str(d / RECOVERY_POINT_CHECKPOINT))),
    "leader-epoch-checkpoint": (_epochs, lambda d: read_epoch_checkpoint(str(d / LEADER_EPOCH_CHECKPOINT))),
    "partition.metadata": (_partition_metadata, lambda d: read_partition_metadata(str(d))),
    "meta.properties": (_meta_properties, lambda d: read_meta_properties(str(d))),
    "producer-snapshot": (_producer_snapshot, _read_snapshot),
    "txnindex": (_txn_index, lambda d: TxnIndex.read(str(d / "00000000000000000000.txnindex"))),
    "producer-id-block": (_producer_ids, _read_producer_ids),
    "quotas": (_quotas, lambda d: FileQuotaStore(str(d)).all()),
    "scram-credentials": (_credentials, _read_credentials),
    "acls": (_acls, _read_acls),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_power_loss_at_every_point_of_a_state_file_write(lazy: tuple[LazyFSMount, Path], name: str) -> None:
    fs, mnt = lazy
    write, read = WRITERS[name]
    points = _crash_points(fs, mnt, name, write, read)
    assert points >= 1


def test_checkpoint_readers_refuse_torn_files(tmp_path: Path) -> None:
    _offsets(tmp_path, 2)
    _torn_copies(tmp_path / "recovery-point-offset-checkpoint",
                 lambda: read_offset_checkpoint(str(tmp_path / "recovery-point-offset-checkpoint")),
                 (CorruptCheckpointError,))
    _epochs(tmp_path, 3)
    _torn_copies(tmp_path / "leader-epoch-checkpoint",
                 lambda: read_epoch_checkpoint(str(tmp_path / "leader-epoch-checkpoint")),
                 (CorruptCheckpointError,))


def test_snapshot_and_txnindex_readers_on_torn_files(tmp_path: Path) -> None:
    _producer_snapshot(tmp_path, 3)
    _torn_copies(tmp_path / "00000000000000000010.snapshot", lambda: _read_snapshot(tmp_path),
                 (CorruptSnapshotError,))
    path = tmp_path / "00000000000000000000.txnindex"
    TxnIndex.rewrite(str(path), [(7, 1, 5, 1), (8, 6, 9, 6)])
    whole = path.read_bytes()
    for cut in range(len(whole)):
        path.write_bytes(whole[:cut])
        entries = TxnIndex.read(str(path))
        assert entries == [(7, 1, 5, 1), (8, 6, 9, 6)][: len(entries)]  # whole entries only, in order


def test_json_state_stores_survive_torn_files(tmp_path: Path) -> None:
    """Quotas and credentials: a torn file is reported and skipped (the stores still open); ACLs: refused
    with "cannot read the ACL file" (the broker does not start with half of its ACLs)."""
    _quotas(tmp_path, 1)
    _torn_copies(tmp_path / QUOTAS_FILE, lambda: FileQuotaStore(str(tmp_path)).all(), ())
    _credentials(tmp_path, 1)
    _torn_copies(tmp_path / CREDENTIALS_FILE, lambda: _read_credentials(tmp_path), ())
    _acls(tmp_path, 1)
    _torn_copies(tmp_path / ACL_FILE, lambda: _read_acls(tmp_path), (ValueError,))

"""The lazy file system itself: what survives a power loss is exactly what was fsynced (the model without
FUSE, then the mounted file system through ordinary system calls)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from .lazyfs import PAGE, LazyFSMount, Model, _read_pages

pytestmark = pytest.mark.timeout(120)


def _file(m: Model, path: str) -> bytes:
    n = m.resolve(path)
    return _read_pages(n, 0, n.size)


def test_only_fsynced_data_and_entries_survive() -> None:
    m = Model()
    d = m.create("/d", stat.S_IFDIR | 0o755, is_dir=True)
    a = m.create("/d/a", stat.S_IFREG | 0o644)
    m.write(a, 0, b"x" * 5000)
    m.fsync(a)
    m.write(a, 5000, b"unsynced")
    m.fsyncdir(d)
    m.fsyncdir(m.resolve("/"))
    b = m.create("/d/b", stat.S_IFREG | 0o644)  # entry never made durable
    m.write(b, 0, b"gone")
    m.fsync(b)
    m.power_loss()
    assert _file(m, "/d/a") == b"x" * 5000
    with pytest.raises(FileNotFoundError):
        m.resolve("/d/b")


def test_a_new_file_whose_entry_is_durable_but_data_not_is_empty() -> None:
    m = Model()
    f = m.create("/f", stat.S_IFREG | 0o644)
    m.write(f, 0, b"data")
    m.fsyncdir(m.resolve("/"))
    m.power_loss()
    assert _file(m, "/f") == b""


def test_rename_is_durable_only_with_the_directory() -> None:
    m = Model()
    root = m.resolve("/")
    old = m.create("/cp", stat.S_IFREG | 0o644)
    m.write(old, 0, b"old")
    m.fsync(old)
    m.fsyncdir(root)
    tmp = m.create("/cp.tmp", stat.S_IFREG | 0o644)
    m.write(tmp, 0, b"new")
    m.fsync(tmp)
    m.rename("/cp.tmp", "/cp")
    m.power_loss()  # the rename was not made durable: the old file is there
    assert _file(m, "/cp") == b"old"
    m.dead = False
    tmp = m.create("/cp.tmp", stat.S_IFREG | 0o644)
    m.write(tmp, 0, b"new")
    m.fsync(tmp)
    m.rename("/cp.tmp", "/cp")
    m.fsyncdir(m.resolve("/"))
    m.power_loss()
    assert _file(m, "/cp") == b"new"
    assert sorted(m.resolve("/").entries) == ["cp"]


def test_torn_last_write_and_kept_pages() -> None:
    m = Model()
    f = m.create("/seg", stat.S_IFREG | 0o644)
    m.fsyncdir(m.resolve("/"))
    m.write(f, 0, b"a" * 100)
    m.fsync(f)
    m.write(f, 100, b"b" * 1000)
    report = m.power_loss(tear=True, seed=3)
    torn = report["torn"]
    assert torn is not None and 0 < torn["kept"] < 1000
    assert _file(m, "/seg") == b"a" * 100 + b"b" * torn["kept"]
    # unsynced pages kept out of order: a later page can survive while an earlier one does not
    m.dead = False
    g = m.resolve("/seg")
    m.truncate(g, 0)
    m.fsync(g)
    m.write(g, 0, b"1" * (4 * PAGE))
    report = m.power_loss(keep=0.5, seed=7)
    data = _file(m, "/seg")
    assert 0 < report["kept_pages"] < 4
    for pno in range(len(data) // PAGE):
        assert data[pno * PAGE:(pno + 1) * PAGE] in (b"1" * PAGE, bytes(PAGE))


def test_mounted_file_system_drops_unsynced_writes(tmp_path: Path, require_fuse: None) -> None:
    fs = LazyFSMount(tmp_path / "disk", tmp_path / "mnt").mount()
    mnt = tmp_path / "mnt"
    try:
        os.mkdir(mnt / "d")
        fd = os.open(mnt / "d" / "a", os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"synced" * 1000)
        os.fsync(fd)
        os.write(fd, b"-lost")
        os.close(fd)
        for d in (mnt / "d", mnt):
            dfd = os.open(d, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
        (mnt / "d" / "never").write_bytes(b"never synced")
        os.rename(mnt / "d" / "a", mnt / "d" / "renamed")  # not made durable
        assert fs.stats()["files"] == 2
        report = fs.power_loss()
        assert report["unsynced_files"] == 2
        with pytest.raises(OSError):
            os.listdir(mnt)  # the disk is gone until remounted
        fs.remount()
        assert sorted(os.listdir(mnt / "d")) == ["a"]
        assert (mnt / "d" / "a").read_bytes() == b"synced" * 1000
        # a clean unmount keeps everything, synced or not
        (mnt / "d" / "b").write_bytes(b"kept")
        fs.unmount()
        assert (tmp_path / "disk" / "d" / "b").read_bytes() == b"kept"
    finally:
        fs.unmount()


def test_power_loss_during_a_chosen_write(tmp_path: Path, require_fuse: None) -> None:
    fs = LazyFSMount(tmp_path / "disk", tmp_path / "mnt").mount()
    mnt = tmp_path / "mnt"
    try:
        fd = os.open(mnt / "log", os.O_CREAT | os.O_WRONLY, 0o644)
        os.fsync(fd)
        dfd = os.open(mnt, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        os.write(fd, b"A" * 512)
        os.fsync(fd)
        fs.arm(2, tear=True, seed=5)
        os.write(fd, b"B" * 512)
        with pytest.raises(OSError):
            os.write(fd, b"C" * 512)
        with pytest.raises(OSError):
            os.close(fd)  # the descriptor is gone all the same
        report = fs.wait_dead(5)
        assert report is not None and report["torn"]["length"] == 512
        fs.remount()
        data = (mnt / "log").read_bytes()
        # the unsynced B write is gone; only a prefix of C landed, at C's offset: a hole of zeros before it
        kept = report["torn"]["kept"]
        assert data == b"A" * 512 + bytes(512) + b"C" * kept
    finally:
        fs.unmount()

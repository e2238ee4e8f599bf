"""A lazy file system for power-loss tests: writes live in memory until they are fsynced.

The idea is LazyFS's (a FUSE file system that keeps written data in its own page cache and drops it on a
simulated power failure); the code is moldau's own, on ``fusepy`` (ctypes bindings over Debian's libfuse2).

The model, per mount:

* the **live** state: a tree of inodes (directories: name -> inode; files: 4 KiB pages and a size) that every
  operation reads and changes at once, what the processes on the mount see;
* the **durable** state: what a disk would hold after a power loss. ``fsync``/``fdatasync`` of a file copies
  that file's live content (pages, size, mode, mtime) into it; ``fsync`` of a directory copies that
  directory's live entries (creations, renames, unlinks in it become durable; a file linked there that was
  never fsynced is durable empty, as ext4 leaves it). Nothing else makes anything durable: not ``close``, not
  ``flush``, not time (a stricter disk than ext4, whose background writeback may save unsynced data; see
  ``keep`` below for that).

A **power loss** (``crash`` on the control socket) makes the mount dead (every operation fails with EIO, as a
disk that lost power), replaces the live state by the durable one and writes it to the backing directory;
optionally

* ``tear=1``: the last write not yet synced reaches the disk in part (a prefix of it, cut at a random byte:
  a torn page);
* ``keep=F``: each page written since its file's last fsync reaches the disk with probability ``F`` (the
  kernel's writeback flushed it before the power went), in any order: holes of old content or zeros in the
  middle of a file are possible.

The test then kills the processes that used the mount, unmounts it, and mounts a new lazy file system over the
backing directory: it starts from what survived. A clean unmount (no power loss) writes the live state.

The mount uses ``direct_io`` with no attribute or entry caching, so the kernel's page cache holds nothing the
daemon does not know about (moldau does not mmap its files).

Run: ``python -m tests.powerloss.lazyfs BACKING MOUNTPOINT CONTROL_SOCKET`` (as root, or with access to
/dev/fuse); :class:`LazyFSMount` starts and drives it from a test.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PAGE = 4096
ROOT_INO = 1
# the operations an armed power loss counts (``arm ops=N``)
MUTATING = frozenset({"create", "mkdir", "write", "truncate", "fallocate", "rename", "unlink", "rmdir",
                      "chmod", "utimens", "fsync", "fsyncdir"})


@dataclass
class Node:
    """One inode, live or durable. Files: ``pages`` (page number -> PAGE bytes; absent pages read as zeros)
    and ``size``; directories: ``entries``."""

    ino: int
    is_dir: bool
    mode: int
    mtime: float
    size: int = 0
    pages: dict[int, bytes] = field(default_factory=dict)
    entries: dict[str, int] = field(default_factory=dict)

    def clone(self) -> Node:
        return Node(self.ino, self.is_dir, self.mode, self.mtime, self.size, dict(self.pages),
                    dict(self.entries))


def _read_pages(node: Node, offset: int, length: int) -> bytes:
    end = min(node.size, offset + length)
    if offset >= end:
        return b""
    out = bytearray()
    pos = offset
    while pos < end:
        pno, within = divmod(pos, PAGE)
        take = min(PAGE - within, end - pos)
        page = node.pages.get(pno)
        out += page[within:within + take] if page is not None else bytes(take)
        pos += take
    return bytes(out)


def _write_pages(node: Node, offset: int, data: bytes, dirty: set[int] | None = None) -> None:
    pos = offset
    view = memoryview(data)
    while view:
        pno, within = divmod(pos, PAGE)
        take = min(PAGE - within, len(view))
        old = node.pages.get(pno, b"")
        page = bytearray(old.ljust(PAGE, b"\0"))
        page[within:within + take] = view[:take]
        node.pages[pno] = bytes(page)
        if dirty is not None:
            dirty.add(pno)
        pos += take
        view = view[take:]
    node.size = max(node.size, offset + len(data))


def _truncate_pages(node: Node, length: int) -> None:
    if length < node.size:
        last = length // PAGE
        for pno in [p for p in node.pages if p > last or (p == last and length % PAGE == 0)]:
            del node.pages[pno]
        if length % PAGE and last in node.pages:
            node.pages[last] = node.pages[last][: length % PAGE].ljust(PAGE, b"\0")
    node.size = length


class Model:
    """The live and durable states and the operations on them (no FUSE here: unit-testable)."""

    def __init__(self) -> None:
        now = time.time()
        self.live: dict[int, Node] = {ROOT_INO: Node(ROOT_INO, True, stat.S_IFDIR | 0o755, now)}
        self.durable: dict[int, Node] = {ROOT_INO: self.live[ROOT_INO].clone()}
        self.next_ino = ROOT_INO + 1
        # pages written since the file's last fsync, per inode; the last unsynced write
        self.dirty: dict[int, set[int]] = {}
        self.last_write: tuple[int, int, bytes] | None = None
        self.dead = False
        self.counts = {"fsync": 0, "fsyncdir": 0, "write": 0, "bytes_written": 0}

    # ------------------------------------------------------------------------------------- loading
    @classmethod
    def load(cls, backing: str) -> Model:
        """Live = durable = the content of the backing directory."""
        m = cls()

        def walk(path: str, ino: int) -> None:
            with os.scandir(path) as it:
                for e in it:
                    st = e.stat(follow_symlinks=False)
                    child = m.new_node(stat.S_ISDIR(st.st_mode), st.st_mode, st.st_mtime)
                    m.live[ino].entries[e.name] = child.ino
                    if child.is_dir:
                        walk(e.path, child.ino)
                    else:
                        with open(e.path, "rb") as f:
                            data = f.read()
                        pno = 0
                        for pos in range(0, len(data), PAGE):
                            chunk = data[pos:pos + PAGE]
                            if chunk.count(0) != len(chunk):
                                child.pages[pno] = chunk.ljust(PAGE, b"\0")
                            pno += 1
                        child.size = len(data)

        walk(backing, ROOT_INO)
        m.durable = {ino: n.clone() for ino, n in m.live.items()}
        return m

    def new_node(self, is_dir: bool, mode: int, mtime: float | None = None) -> Node:
        node = Node(self.next_ino, is_dir, mode, time.time() if mtime is None else mtime)
        self.next_ino += 1
        self.live[node.ino] = node
        return node

    # ------------------------------------------------------------------------------------- lookups
    def resolve(self, path: str) -> Node:
        node = self.live[ROOT_INO]
        for part in path.strip("/").split("/"):
            if not part:
                continue
            if not node.is_dir:
                raise OSError(errno.ENOTDIR, path)
            ino = node.entries.get(part)
            if ino is None:
                raise OSError(errno.ENOENT, path)
            node = self.live[ino]
        return node

    def parent_of(self, path: str) -> tuple[Node, str]:
        head, name = os.path.split(path.rstrip("/"))
        parent = self.resolve(head or "/")
        if not parent.is_dir:
            raise OSError(errno.ENOTDIR, path)
        return parent, name

    # ------------------------------------------------------------------------------------- changes
    def create(self, path: str, mode: int, is_dir: bool = False) -> Node:
        parent, name = self.parent_of(path)
        if name in parent.entries:
            raise OSError(errno.EEXIST, path)
        node = self.new_node(is_dir, mode)
        parent.entries[name] = node.ino
        parent.mtime = node.mtime
        return node

    def unlink(self, path: str, want_dir: bool = False) -> None:
        parent, name = self.parent_of(path)
        ino = parent.entries.get(name)
        if ino is None:
            raise OSError(errno.ENOENT, path)
        node = self.live[ino]
        if want_dir and not node.is_dir:
            raise OSError(errno.ENOTDIR, path)
        if not want_dir and node.is_dir:
            raise OSError(errno.EISDIR, path)
        if want_dir and node.entries:
            raise OSError(errno.ENOTEMPTY, path)
        del parent.entries[name]
        parent.mtime = time.time()

    def rename(self, old: str, new: str) -> None:
        src_parent, src_name = self.parent_of(old)
        ino = src_parent.entries.get(src_name)
        if ino is None:
            raise OSError(errno.ENOENT, old)
        dst_parent, dst_name = self.parent_of(new)
        target = dst_parent.entries.get(dst_name)
        if target is not None and target != ino:
            tnode = self.live[target]
            if tnode.is_dir and tnode.entries:
                raise OSError(errno.ENOTEMPTY, new)
            if tnode.is_dir != self.live[ino].is_dir:
                raise OSError(errno.EISDIR if tnode.is_dir else errno.ENOTDIR, new)
        del src_parent.entries[src_name]
        dst_parent.entries[dst_name] = ino
        src_parent.mtime = dst_parent.mtime = time.time()

    def write(self, node: Node, offset: int, data: bytes) -> int:
        _write_pages(node, offset, data, self.dirty.setdefault(node.ino, set()))
        node.mtime = time.time()
        self.last_write = (node.ino, offset, bytes(data))
        self.counts["write"] += 1
        self.counts["bytes_written"] += len(data)
        return len(data)

    def truncate(self, node: Node, length: int) -> None:
        if length > node.size:
            node.size = length
        else:
            _truncate_pages(node, length)
        self.dirty.setdefault(node.ino, set())
        node.mtime = time.time()

    # ------------------------------------------------------------------------------------- durability
    def fsync(self, node: Node) -> None:
        """The file's data and attributes become durable (not its name: that is its directory's)."""
        if node.is_dir:
            self.fsyncdir(node)
            return
        self.counts["fsync"] += 1
        durable = node.clone()
        durable.entries = {}
        self.durable[node.ino] = durable
        self.dirty.pop(node.ino, None)
        if self.last_write is not None and self.last_write[0] == node.ino:
            self.last_write = None

    def fsyncdir(self, node: Node) -> None:
        """The directory's entries become durable; an entry for an inode with no durable state yet is
        durable as an empty file (or empty directory)."""
        self.counts["fsyncdir"] += 1
        d = self.durable.get(node.ino)
        if d is None:
            d = Node(node.ino, True, node.mode, node.mtime)
            self.durable[node.ino] = d
        d.entries = dict(node.entries)
        d.mtime = node.mtime
        for ino in node.entries.values():
            if ino not in self.durable:
                child = self.live[ino]
                self.durable[ino] = Node(ino, child.is_dir, child.mode, child.mtime)

    def unsynced(self) -> dict[str, int]:
        """Files with data not yet synced, and the pages concerned."""
        return {"files": len(self.dirty), "pages": sum(len(p) for p in self.dirty.values())}

    def power_loss(self, tear: bool = False, keep: float = 0.0, seed: int | None = None) -> dict[str, Any]:
        """The state after a power loss (it becomes the live state); the mount is dead until remounted."""
        rng = random.Random(seed)
        report: dict[str, Any] = {"unsynced_files": len(self.dirty),
                                  "unsynced_pages": sum(len(p) for p in self.dirty.values()),
                                  "kept_pages": 0, "torn": None}
        survived = {ino: n.clone() for ino, n in self.durable.items()}
        if keep > 0:
            for ino, pages in self.dirty.items():
                d, live = survived.get(ino), self.live.get(ino)
                if d is None or live is None:
                    continue
                for pno in sorted(pages):
                    if rng.random() < keep and pno in live.pages:
                        d.pages[pno] = live.pages[pno]
                        d.size = max(d.size, min(live.size, (pno + 1) * PAGE))
                        report["kept_pages"] += 1
        if tear and self.last_write is not None:
            ino, offset, data = self.last_write
            d = survived.get(ino)
            if d is not None and len(data) > 1:
                cut = rng.randrange(1, len(data))
                _write_pages(d, offset, data[:cut])
                report["torn"] = {"ino": ino, "offset": offset, "length": len(data), "kept": cut}
        self.live = survived
        self.durable = {ino: n.clone() for ino, n in survived.items()}
        self.dirty = {}
        self.last_write = None
        self.dead = True
        return report

    # ------------------------------------------------------------------------------------- saving
    def save(self, backing: str, which: str = "live") -> None:
        """Write the reachable tree of ``which`` state into the (emptied) backing directory."""
        nodes = self.live if which == "live" else self.durable
        for name in os.listdir(backing):
            p = os.path.join(backing, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)

        def walk(path: str, node: Node) -> None:
            for name, ino in node.entries.items():
                child = nodes.get(ino)
                if child is None:
                    continue
                p = os.path.join(path, name)
                if child.is_dir:
                    os.mkdir(p, stat.S_IMODE(child.mode))
                    walk(p, child)
                else:
                    with open(p, "wb") as f:
                        for pno in sorted(child.pages):
                            if pno * PAGE < child.size:
                                f.seek(pno * PAGE)
                                f.write(child.pages[pno][: child.size - pno * PAGE])
                        f.truncate(child.size)
                    os.chmod(p, stat.S_IMODE(child.mode))
                os.utime(p, (child.mtime, child.mtime))

        walk(backing, nodes[ROOT_INO])


# ------------------------------------------------------------------------------------------------ FUSE


def _fuse_operations() -> Any:
    from fuse import FuseOSError, Operations  # fusepy

    class LazyOperations(Operations):  # type: ignore[misc]
        def __init__(self, backing: str, control: str) -> None:
            self.backing = backing
            self.model = Model.load(backing)
            self.mutex = threading.RLock()
            self.handles: dict[int, int] = {}
            self.next_fh = 1
            self.control = control
            self.saved = False
            # a power loss armed to happen during a later write ("arm"), and the last loss's report
            self.armed: dict[str, Any] | None = None
            self.report: dict[str, Any] | None = None

        # every operation: under the lock, EIO once the power is gone, OSError -> FuseOSError
        def __call__(self, op: str, *args: Any) -> Any:
            with self.mutex:
                if self.model.dead and op not in ("destroy", "release", "releasedir", "init"):
                    raise FuseOSError(errno.EIO)
                try:
                    if self.armed is not None and self.armed["kind"] == "ops" and op in MUTATING:
                        self._count_op(op, args)
                    return super().__call__(op, *args)
                except OSError as e:
                    if isinstance(e, FuseOSError):
                        raise
                    raise FuseOSError(e.errno or errno.EIO) from None

        def _count_op(self, op: str, args: tuple[Any, ...]) -> None:
            """An armed power loss at the n-th changing operation: before it, or during it for a write."""
            armed = self.armed
            assert armed is not None
            if armed["match"] and not any(isinstance(a, str) and armed["match"] in a for a in args):
                return
            armed["count"] -= 1
            if armed["count"] > 0:
                return
            path = args[0] if args and isinstance(args[0], str) else None
            if op == "write":  # the write reaches the page cache, then the power goes (torn when asked)
                self.model.write(self._node(args[0], args[3]), args[2], args[1])
            self._crash(armed, path, op)
            raise OSError(errno.EIO, path)

        lock = None  # no FUSE lock operation: the kernel keeps flock/fcntl locks of the mount itself

        def _node(self, path: str, fh: int | None = None) -> Node:
            if fh:
                ino = self.handles.get(fh)
                if ino is not None and ino in self.model.live:
                    return self.model.live[ino]
            return self.model.resolve(path)

        def _open_handle(self, node: Node) -> int:
            fh = self.next_fh
            self.next_fh += 1
            self.handles[fh] = node.ino
            return fh

        def init(self, path: str) -> None:
            threading.Thread(target=self._serve_control, daemon=True).start()

        def destroy(self, path: str) -> None:
            with self.mutex:
                if not self.model.dead and not self.saved:
                    self.model.save(self.backing, "live")  # a clean unmount: the page cache reaches the disk
                    self.saved = True

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            n = self._node(path, fh)
            return {"st_mode": n.mode, "st_ino": n.ino, "st_nlink": 2 if n.is_dir else 1,
                    "st_size": n.size if not n.is_dir else 4096, "st_mtime": n.mtime, "st_ctime": n.mtime,
                    "st_atime": n.mtime, "st_uid": 0, "st_gid": 0, "st_blocks": (n.size + 511) // 512}

        def access(self, path: str, amode: int) -> int:
            self.model.resolve(path)
            return 0

        def readdir(self, path: str, fh: int) -> list[str]:
            n = self._node(path, fh)
            return [".", "..", *n.entries]

        def opendir(self, path: str) -> int:
            n = self.model.resolve(path)
            if not n.is_dir:
                raise OSError(errno.ENOTDIR, path)
            return self._open_handle(n)

        def releasedir(self, path: str, fh: int) -> int:
            self.handles.pop(fh, None)
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            self.model.create(path, stat.S_IFDIR | (mode & 0o7777), is_dir=True)
            return 0

        def rmdir(self, path: str) -> int:
            self.model.unlink(path, want_dir=True)
            return 0

        def unlink(self, path: str) -> int:
            self.model.unlink(path)
            return 0

        def rename(self, old: str, new: str) -> int:
            self.model.rename(old, new)
            return 0

        def chmod(self, path: str, mode: int) -> int:
            n = self.model.resolve(path)
            n.mode = (n.mode & ~0o7777) | (mode & 0o7777)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            return 0

        def utimens(self, path: str, times: tuple[float, float] | None = None) -> int:
            n = self.model.resolve(path)
            n.mtime = times[1] if times else time.time()
            return 0

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            return self._open_handle(self.model.create(path, stat.S_IFREG | (mode & 0o7777)))

        def open(self, path: str, flags: int) -> int:
            n = self.model.resolve(path)
            if n.is_dir:
                raise OSError(errno.EISDIR, path)
            return self._open_handle(n)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return _read_pages(self._node(path, fh), offset, size)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            n = self.model.write(self._node(path, fh), offset, data)
            armed = self.armed
            if armed is not None and armed["kind"] == "writes" and armed["match"] in path:
                armed["count"] -= 1
                if armed["count"] <= 0:
                    self._crash(armed, path)
                    raise OSError(errno.EIO, path)  # the power went during this write
            return n

        def _crash(self, args: dict[str, Any], path: str | None = None, op: str = "write") -> dict[str, Any]:
            report = self.model.power_loss(tear=args["tear"], keep=args["keep"], seed=args["seed"])
            report["during_write_to"] = path if op == "write" else None
            report["at"] = f"{op} {path}" if path else None
            self.model.save(self.backing, "durable")
            self.saved = True
            self.armed = None
            self.report = report
            return report

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            self.model.truncate(self._node(path, fh), length)
            return 0

        def fallocate(self, path: str, mode: int, offset: int, length: int, fh: int) -> int:
            if mode != 0:
                raise OSError(errno.EOPNOTSUPP, path)
            n = self._node(path, fh)
            if offset + length > n.size:
                self.model.truncate(n, offset + length)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0  # close() makes nothing durable

        def release(self, path: str, fh: int) -> int:
            self.handles.pop(fh, None)
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            self.model.fsync(self._node(path, fh))
            return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            self.model.fsyncdir(self._node(path, fh))
            return 0

        def statfs(self, path: str) -> dict[str, int]:
            st = os.statvfs(self.backing)
            return {k: getattr(st, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                                 "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")}

        # ------------------------------------------------------------------------------ control socket
        def _serve_control(self) -> None:
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if os.path.exists(self.control):
                os.unlink(self.control)
            srv.bind(self.control)
            srv.listen(4)
            while True:
                conn, _ = srv.accept()
                with conn:
                    line = conn.makefile("rb").readline().decode().strip()
                    try:
                        reply = self._command(line)
                    except Exception as e:  # answered to the test, which fails on it
                        reply = {"error": repr(e)}
                    conn.sendall((json.dumps(reply) + "\n").encode())

        def _command(self, line: str) -> dict[str, Any]:
            words = line.split()
            if not words:
                return {"error": "empty command"}
            args = dict(w.split("=", 1) for w in words[1:])
            with self.mutex:
                if words[0] == "stats":
                    return {"dead": self.model.dead, "report": self.report, **self.model.unsynced(),
                            **self.model.counts}
                if words[0] == "disarm":
                    self.armed = None
                    return {"armed": None}
                if words[0] == "revive":  # the same mount serves again, from what survived
                    self.model.dead = False
                    return {"dead": False}
                if self.model.dead:
                    return {"error": "the power is already lost"}
                opts = {"tear": args.get("tear", "0") == "1", "keep": float(args.get("keep", "0")),
                        "seed": int(args["seed"]) if "seed" in args else None}
                if words[0] == "crash":
                    return self._crash(opts)
                if words[0] == "arm":  # the power goes at the n-th write (or changing operation) from now
                    kind = "ops" if "ops" in args else "writes"
                    self.armed = {**opts, "kind": kind, "count": int(args.get(kind, "1")),
                                  "match": args.get("match", "")}
                    return {"armed": self.armed}
                return {"error": f"unknown command {words[0]!r}"}

    return LazyOperations


def main(argv: list[str]) -> int:
    backing, mountpoint, control = argv
    from fuse import FUSE  # fusepy

    ops = _fuse_operations()(os.path.abspath(backing), os.path.abspath(control))
    FUSE(ops, mountpoint, foreground=True, nothreads=False, raw_fi=False, default_permissions=False,
         direct_io=True, attr_timeout=0, entry_timeout=0, negative_timeout=0, use_ino=True, big_writes=True,
         max_write=131072, fsname="lazyfs", subtype="lazyfs")
    return 0


# ------------------------------------------------------------------------------------------------ driver


def is_mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point (from the mount table: a dead mount fails ``stat``)."""
    target = os.path.realpath(path)
    with open("/proc/self/mounts", encoding="utf-8") as f:
        return any(line.split()[1].replace("\\040", " ") == target for line in f if line.strip())


@functools.lru_cache(maxsize=1)
def fuse_unavailable() -> str | None:
    """Why a lazy file system cannot be mounted here, or None (a trial mount, once per process)."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not accessible to this user"
    if os.geteuid() != 0 and shutil.which("fusermount") is None:
        return "not root and no fusermount to mount as a user"
    try:
        import fuse  # noqa: F401  (fusepy: raises EnvironmentError without libfuse.so.2)
    except (ImportError, OSError) as e:
        return f"fusepy or libfuse2 is not installed ({e}): run scripts/setup.sh --test"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="lazyfs-probe-") as tmp:
        trial = LazyFSMount(Path(tmp) / "disk", Path(tmp) / "mnt")
        try:
            trial.mount(timeout=20)
        except RuntimeError as e:  # e.g. a container without CAP_SYS_ADMIN
            return f"a FUSE mount failed here: {e}"
        finally:
            trial.unmount()
    return None


class LazyFSMount:
    """A lazy file system mounted at ``mountpoint`` over ``backing`` (a daemon process), for one test."""

    def __init__(self, backing: Path, mountpoint: Path, log_path: Path | None = None) -> None:
        self.backing = Path(backing)
        self.mountpoint = Path(mountpoint)
        self.control = self.backing.parent / f".{self.backing.name}.lazyfs.sock"
        self.log_path = log_path or self.backing.parent / f"{self.backing.name}.lazyfs.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)

    def mount(self, timeout: float = 30.0) -> LazyFSMount:
        if self.control.exists():
            self.control.unlink()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.powerloss.lazyfs", str(self.backing), str(self.mountpoint),
                 str(self.control)],
                cwd=Path(__file__).resolve().parents[2], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not (is_mounted(self.mountpoint) and self.control.exists()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"lazyfs exited with {self.proc.returncode}: {self.log_path.read_text()}")
            if time.monotonic() > deadline:
                self.unmount()
                raise RuntimeError(f"lazyfs did not mount {self.mountpoint} in {timeout} s")
            time.sleep(0.05)
        return self

    def command(self, line: str, timeout: float = 60.0) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(self.control))
            s.sendall((line + "\n").encode())
            reply: dict[str, Any] = json.loads(s.makefile("rb").readline())
        if "error" in reply:
            raise RuntimeError(f"lazyfs {line!r}: {reply['error']}")
        return reply

    def stats(self) -> dict[str, Any]:
        return self.command("stats")

    def power_loss(self, tear: bool = False, keep: float = 0.0, seed: int | None = None) -> dict[str, Any]:
        """Everything not fsynced is gone (the mount fails every operation from now on)."""
        line = f"crash tear={int(tear)} keep={keep}" + (f" seed={seed}" if seed is not None else "")
        return self.command(line)

    def arm(self, writes: int = 0, *, ops: int = 0, match: str = "", tear: bool = True, keep: float = 0.0,
            seed: int | None = None) -> None:
        """The power goes during the ``writes``-th write from now, or at the ``ops``-th changing operation
        (create, write, truncate, rename, unlink, mkdir, rmdir, fsync, ...; before it, during it for a
        write), counting only those on a path containing ``match``; a write it hits is torn when ``tear``;
        :meth:`wait_dead` waits for it."""
        count = f"ops={ops}" if ops else f"writes={writes}"
        line = f"arm {count} tear={int(tear)} keep={keep}" + (f" match={match}" if match else "")
        self.command(line + (f" seed={seed}" if seed is not None else ""))

    def wait_dead(self, timeout: float) -> dict[str, Any] | None:
        """The report of the armed power loss once it happened, None if it did not within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.stats()
            if st["dead"]:
                report: dict[str, Any] = st["report"]
                return report
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def disarm(self) -> None:
        self.command("disarm")

    def revive(self) -> None:
        """After a power loss, serve again from what survived without remounting (the kernel caches
        nothing: see the module's docstring); processes that used the mount should be gone."""
        self.command("revive")

    def unmount(self, timeout: float = 30.0) -> None:
        if self.proc is None:
            return
        if is_mounted(self.mountpoint):
            done = subprocess.run(["umount", str(self.mountpoint)], check=False, capture_output=True)
            if done.returncode != 0:  # still busy (a process being killed): detach it
                subprocess.run(["umount", "-l", str(self.mountpoint)], check=False, capture_output=True)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def remount(self) -> LazyFSMount:
        self.unmount()
        return self.mount()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(sys.argv[1:]))

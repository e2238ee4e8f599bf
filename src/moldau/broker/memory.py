"""``log.dirs=:memory:``: a broker whose logs live in RAM, for tests and notebooks (not durable).

The broker keeps the very same storage engine (``moldau.log``: segments, indexes, checkpoints, recovery), so
the log semantics are exactly those of a broker on disk; only the directory differs: a private directory on a
RAM file system (``/dev/shm`` on Linux when it is a tmpfs with room), created when the broker starts and
removed, with everything in it, when it stops. Nothing survives the broker's process, and a machine without
such a file system falls back to the temporary directory (``tempfile.gettempdir()``), still removed at stop.
``MOLDAU_MEMORY_DIR`` names another parent directory.

A broker that cannot clean up (``kill -9``, a signal before its handlers are installed) leaves its directory
behind; the next in-memory broker under the same parent removes such orphans: directories older than a
minute whose ``.lock`` no broker holds (the log manager keeps it locked while it owns the directory).
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import tempfile
import time

from .config import SOURCE_STATIC, BrokerConfig, ConfigError

__all__ = ["MEMORY", "MemoryLogDir", "is_memory", "ram_parent", "remove_orphans"]

log = logging.getLogger(__name__)

MEMORY = ":memory:"
_RAM_FS = "/dev/shm"
_MIN_FREE = 256 << 20  # below this much free room in /dev/shm (a small container's default) use the disk


def is_memory(config: BrokerConfig) -> bool:
    """True when ``log.dirs`` is ``:memory:``; a list mixing it with real directories is refused."""
    dirs = config.log_dirs
    if MEMORY not in dirs:
        return False
    if len(dirs) != 1:
        raise ConfigError("log.dirs", f"log.dirs={MEMORY} cannot be combined with other directories")
    return True


def remove_orphans(parent: str, prefix: str, min_age_s: float = 60.0) -> list[str]:
    """Remove ``parent/<prefix>*`` directories left by brokers that are gone (see the module's docstring);
    returns them. A directory younger than ``min_age_s`` is left alone: its broker may not have locked it
    yet."""
    import fcntl

    removed: list[str] = []
    now = time.time()
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(parent, name)
        try:
            if now - os.stat(path).st_mtime < min_age_s:
                continue
            fd = os.open(os.path.join(path, ".lock"), os.O_RDWR)
        except OSError:
            continue  # not a log dir of ours (no .lock), or gone meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a running broker holds it
        try:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            log.info("removed %s, left by an in-memory broker that did not stop cleanly", path)
        finally:
            os.close(fd)
    return removed


def ram_parent() -> str:
    """The directory under which in-memory log dirs are made."""
    override = os.environ.get("MOLDAU_MEMORY_DIR")
    if override:
        return override
    try:
        st = os.statvfs(_RAM_FS)
        if os.access(_RAM_FS, os.W_OK) and st.f_bavail * st.f_frsize >= _MIN_FREE:
            return _RAM_FS
    except OSError:
        pass
    return tempfile.gettempdir()


class MemoryLogDir:
    """A private log dir in RAM: ``create()`` makes it, ``remove()`` deletes it and all it holds."""

    def __init__(self, prefix: str = "moldau-memory-") -> None:
        self.prefix = prefix
        self.path: str | None = None

    def create(self) -> str:
        if self.path is None:
            parent = ram_parent()
            remove_orphans(parent, self.prefix)
            self.path = tempfile.mkdtemp(prefix=self.prefix, dir=parent)
            log.debug("in-memory log dir %s", self.path)
        return self.path

    def remove(self) -> None:
        path, self.path = self.path, None
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)

    def apply(self, config: BrokerConfig) -> BrokerConfig:
        """``config`` with ``log.dirs`` pointing at this directory (created now)."""
        path = self.create()
        new = copy.copy(config)
        new.values = {**config.values, "log.dirs": [path]}
        new.sources = {**config.sources, "log.dirs": config.sources.get("log.dirs", SOURCE_STATIC)}
        new.dynamic = dict(config.dynamic)
        return new

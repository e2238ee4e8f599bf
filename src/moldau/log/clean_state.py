"""The clean-shutdown state of a log directory (moldau's own file, ``moldau-clean-shutdown-state``): what a
clean start needs of every partition, written by ``LogManager.close`` after every partition was flushed and
closed and after the clean-shutdown marker, so that a clean start opens the partitions without reading a
file of theirs (Kafka trusts the marker the same way and opens indexes lazily).

Per partition: its topic id, its segments (base offset and size), the active segment's in-memory tail (next
offset, largest timestamp and its offset, the first batch's timestamp, bytes since the last index entry), the
leader epochs and the producer state (the entries of the snapshot written at close). A segment's
index files are read on its first use; the log file's size is checked against the recorded one then (a
difference: the segment is recovered).

A partition is left out (loaded from its files) when its log is compacted (the cleaner's swap
files may need completing), has aborted transactions (``.txnindex`` files) or Kafka 0.7 byte offsets.

The file is trusted only together with the marker it was written after: it records the marker's identity
(inode, modification and change times), so a marker of a later clean shutdown by a moldau that does not know
this file does not vouch for it; a start removes it with the marker (an unclean stop after that start leaves
neither); a missing marker, another marker or an unreadable file (CRC, version) means loading every partition
from its files. Layout: a first line ``moldau-clean-state <version> <marker identity> <crc32c of the rest>``,
then a JSON array of one array per partition.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from crc32c import crc32c

from .checkpoint import CLEAN_SHUTDOWN_FILE, fsync_dir, write_file

log = logging.getLogger(__name__)

__all__ = ["CLEAN_STATE_FILE", "write_clean_state", "read_clean_state", "remove_clean_state"]

CLEAN_STATE_FILE = "moldau-clean-shutdown-state"
_MAGIC = "moldau-clean-state"
_VERSION = 1

# fields of a partition's entry (a JSON array; ``PartitionLog.clean_state_entry`` makes it)
(NAME, TOPIC_ID, SEGMENTS, NEXT_OFFSET, MAX_TS, MAX_TS_OFFSET, ROLLING_TS, SINCE_INDEX, EPOCHS,
 PRODUCERS) = range(10)


def _marker_identity(directory: str) -> str:
    """The clean-shutdown marker's inode, modification and change times: a marker written by another
    clean shutdown (of an older moldau that leaves this file alone) has another."""
    st = os.stat(os.path.join(directory, CLEAN_SHUTDOWN_FILE))
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def write_clean_state(directory: str, entries: list[list[Any]]) -> None:
    """Written after the marker (fsynced, with its directory), made durable here."""
    body = json.dumps(entries, separators=(",", ":")).encode()
    head = f"{_MAGIC} {_VERSION} {_marker_identity(directory)} {crc32c(body)}\n".encode()
    path = os.path.join(directory, CLEAN_STATE_FILE)
    write_file(path + ".tmp", head + body)
    os.replace(path + ".tmp", path)
    fsync_dir(directory)


def read_clean_state(directory: str) -> dict[str, list[Any]] | None:
    """Partition directory name -> entry; None when the file is missing or unusable."""
    path = os.path.join(directory, CLEAN_STATE_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("cannot read %s (%s); loading the partitions from their files", path, e)
        return None
    head, _, body = data.partition(b"\n")
    try:
        magic, version, marker, crc = head.decode("ascii").split()
        if magic != _MAGIC or int(version) != _VERSION or int(crc) != crc32c(body):
            raise ValueError("bad header or CRC")
        if marker != _marker_identity(directory):
            log.info("%s belongs to another clean shutdown; loading the partitions from their files", path)
            return None
        return {e[NAME]: e for e in json.loads(body)}
    except (ValueError, IndexError, TypeError, UnicodeDecodeError, OSError) as e:
        log.warning("%s is unusable (%s); loading the partitions from their files", path, e)
        return None


def remove_clean_state(directory: str) -> None:
    try:
        os.unlink(os.path.join(directory, CLEAN_STATE_FILE))
    except FileNotFoundError:
        pass

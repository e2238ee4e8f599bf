"""``LeaderEpochCache``: leader epoch -> start offset of one partition (Kafka's LeaderEpochFileCache), kept in
the partition directory's ``leader-epoch-checkpoint`` (rewritten on every change)."""

from __future__ import annotations

import logging
import os

from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    CorruptCheckpointError,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)

log = logging.getLogger(__name__)

__all__ = ["LeaderEpochCache"]


class LeaderEpochCache:
    def __init__(self, directory: str) -> None:
        self.entries: list[tuple[int, int]] = []  # (epoch, start offset), both increasing
        self.set_dir(directory)

    def set_dir(self, directory: str) -> None:
        self.dir = directory
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)

    def _write(self, entries: list[tuple[int, int]]) -> None:
        self.entries = entries
        write_epoch_checkpoint(self.path, entries)

    def load(self, log_start_offset: int, log_end_offset: int) -> None:
        """Read the checkpoint, dropping entries at or past the log end offset (but an epoch starting at the
        end of an empty log)."""
        try:
            epochs = read_epoch_checkpoint(self.path)
        except CorruptCheckpointError as e:
            log.warning("%s: %s; leader epoch cache reset", self.dir, e)
            epochs = []
        self.load_entries(epochs, log_start_offset, log_end_offset)

    def load_entries(self, epochs: list[tuple[int, int]], log_start_offset: int, log_end_offset: int) -> None:
        """``load`` of entries read elsewhere (the clean-shutdown state): the checkpoint is rewritten only
        when entries are dropped."""
        leo = log_end_offset
        kept = [(e, o) for e, o in epochs if o < leo or o == leo == log_start_offset]
        self.entries = kept
        if kept != epochs:
            write_epoch_checkpoint(self.path, kept)

    def assign(self, epoch: int, start_offset: int) -> None:
        """A new epoch starting at ``start_offset`` (ignored unless newer than the latest one)."""
        eps = self.entries
        if epoch >= 0 and (not eps or epoch > eps[-1][0]):
            eps.append((epoch, start_offset))
            write_epoch_checkpoint(self.path, eps)

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self._write(kept)

    def truncate_from_start(self, start: int) -> None:
        """The log now starts at ``start``: the epoch in force there starts at ``start``."""
        eps = self.entries
        if len(eps) > 0 and eps[0][1] < start:
            keep = [e for e in eps if e[1] >= start]
            older = [e for e in eps if e[1] < start]
            if older and (not keep or keep[0][1] > start):
                keep.insert(0, (older[-1][0], start))
            if keep != eps:
                self._write(keep)

    def clear(self) -> None:
        if self.entries:
            self._write([])

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, end offset of that epoch), (-1, -1) when unknown (Kafka's
        LeaderEpochFileCache.endOffsetFor)."""
        eps = self.entries
        if epoch < 0 or not eps:
            return -1, -1
        if eps[-1][0] == epoch:
            return epoch, log_end_offset
        higher = next((i for i, (e, _o) in enumerate(eps) if e > epoch), None)
        if higher is None:
            return -1, -1
        if higher == 0:
            return epoch, eps[0][1]
        return eps[higher - 1][0], eps[higher][1]

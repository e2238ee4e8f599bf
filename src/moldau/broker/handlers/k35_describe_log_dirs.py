"""DescribeLogDirs (key 35), v0-5 (Kafka 4.1: 1-5; moldau keeps v0).

One result per configured log dir (absolute path) with the partitions stored there: partition_size is the
bytes of its segment files, offset_lag 0, is_future_key false. A replica moving to another log dir
(AlterReplicaLogDirs, moldau.log.dir_move) is also listed in its destination with is_future_key true, the
bytes copied so far and offset_lag = the offsets the copy is behind.  ``topics`` null = every
partition; otherwise only the named partitions (unknown ones are left out, as Kafka).
v3+: top-level error_code; v4+: total_bytes / usable_bytes of the file system (shutil.disk_usage);
v5+: is_cordoned false.  A log dir that cannot be read: KAFKA_STORAGE_ERROR for that dir.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any

from moldau.log.dir_move import future_lag, future_size
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE, allowed_cluster

log = logging.getLogger(__name__)

REQ = m.DescribeLogDirsRequest
RESP = m.DescribeLogDirsResponse

_SEGMENT_SUFFIXES = (".log",)


def partition_dir(log_dir: str, p: Any) -> str | None:
    """The directory of partition ``p`` inside ``log_dir``, when it lives there."""
    d = os.path.abspath(p.log.dir)
    return d if os.path.dirname(d) == log_dir else None


def partition_size(pdir: str) -> int:
    """The bytes of the partition's segment files in ``pdir``."""
    total = 0
    try:
        with os.scandir(pdir) as it:
            for entry in it:
                if entry.name.endswith(_SEGMENT_SUFFIXES) and entry.is_file():
                    total += entry.stat().st_size
    except OSError:
        pass
    return total


def _wanted(req: Any) -> dict[str, set[int]] | None:
    if req.topics is None:
        return None
    out: dict[str, set[int]] = {}
    for t in req.topics:
        out.setdefault(t.topic, set()).update(t.partitions or [])
    return out


def _log_dirs(ctx: RequestContext) -> list[str]:
    dirs = ctx.services.config.log_dirs or [ctx.services.data_dir]
    return list(dict.fromkeys(os.path.abspath(d) for d in dirs))


@handler(35, REQ.min_version, REQ.max_version)
async def describe_log_dirs(ctx: RequestContext, req: m.DescribeLogDirsRequest) -> m.DescribeLogDirsResponse:
    if not allowed_cluster(ctx, DESCRIBE):
        return RESP.new(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                        results=[])
    wanted = _wanted(req)
    rm = ctx.services.replica_manager
    partitions = sorted(rm.partitions.values(), key=lambda p: (p.topic, p.index))
    results = []
    for log_dir in _log_dirs(ctx):
        total = usable = -1
        error = 0
        try:
            usage = shutil.disk_usage(log_dir)
            total, usable = int(usage.total), int(usage.free)
        except OSError as exc:
            log.warning("log dir %s unavailable: %s", log_dir, exc)
            error = int(ErrorCode.KAFKA_STORAGE_ERROR)
        if log_dir in ctx.services.log_manager.offline_dirs:
            error = int(ErrorCode.KAFKA_STORAGE_ERROR)  # taken offline after a storage error
        by_topic: dict[str, list[Any]] = {}
        if not error:
            for p in partitions:
                if wanted is not None and p.index not in wanted.get(p.topic, ()):
                    continue
                pdir = partition_dir(log_dir, p)
                if pdir is None:
                    continue
                by_topic.setdefault(p.topic, []).append(RESP.DescribeLogDirsPartition(
                    partition_index=p.index, partition_size=partition_size(pdir), offset_lag=0,
                    is_future_key=False))
            for move in list(ctx.services.log_manager.moves.values()):
                plog = ctx.services.log_manager.get(move.topic, move.partition)
                if move.dest_dir != log_dir or plog is None:
                    continue
                if wanted is not None and move.partition not in wanted.get(move.topic, ()):
                    continue
                by_topic.setdefault(move.topic, []).append(RESP.DescribeLogDirsPartition(
                    partition_index=move.partition, partition_size=future_size(move),
                    offset_lag=future_lag(move, plog), is_future_key=True))
        results.append(RESP.DescribeLogDirsResult(
            error_code=error, log_dir=log_dir,
            topics=[RESP.DescribeLogDirsTopic(name=name, partitions=parts) for name,
                    parts in by_topic.items()],
            total_bytes=total, usable_bytes=usable, is_cordoned=False))
    return RESP.new(throttle_time_ms=0, error_code=0, results=results)

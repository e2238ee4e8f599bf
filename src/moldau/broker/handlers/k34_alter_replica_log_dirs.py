"""AlterReplicaLogDirs (key 34), v0-2 (Kafka 4.1: 1-2; moldau keeps v0).

Moves replicas of this broker between its log dirs (``log.dirs``), as Kafka's ReplicaManager: the answer
comes at once, the move runs in the background (moldau.log.dir_move: copied into a ``-future`` replica in
the destination, shown by DescribeLogDirs with is_future_key, while the replica keeps serving; then
swapped). Per partition, in Kafka's order of checks:

* Without ALTER on the cluster: CLUSTER_AUTHORIZATION_FAILED.
* A path that is not one of the broker's log dirs (absolute, as DescribeLogDirs names them):
  LOG_DIR_NOT_FOUND; a log dir taken offline after a storage error: KAFKA_STORAGE_ERROR.
* A replica this broker does not hold: REPLICA_NOT_AVAILABLE (Kafka records the dir for a replica created
  later; moldau does not keep such preferences); a replica in an offline dir: KAFKA_STORAGE_ERROR.
* Already in that dir, or already moving there: NONE, nothing to do. Moving elsewhere: the running move is
  abandoned for the new one.

The copy is throttled by ``replica.alter.log.dirs.io.max.bytes.per.second`` (dynamic; unlimited by default).
A stop (clean or not) mid-move abandons it: the replica stays where it was and the client asks again (Kafka
resumes a future replica it finds at start; moldau removes it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from moldau.log.dir_move import run_move
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER, allowed_cluster

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1

REQ = m.AlterReplicaLogDirsRequest
RESP = m.AlterReplicaLogDirsResponse


def _alter_one(ctx: RequestContext, path: str, topic: str, partition: int) -> int:
    lm = ctx.services.log_manager
    if path not in lm.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if path in lm.offline_dirs:
        return ErrorCode.KAFKA_STORAGE_ERROR
    held = lm.get(topic, partition) is not None
    if not held or ctx.services.replica_manager.get_partition(topic, partition) is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if lm.is_offline(topic, partition):
        return ErrorCode.KAFKA_STORAGE_ERROR
    try:
        move = lm.start_move(topic, partition, path)
    except OSError as exc:
        log.warning("cannot start moving %s-%d to %s: %s", topic, partition, path, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    if move is not None:
        config = ctx.services.config

        def rate() -> int | None:
            value = int(config.get("replica.alter.log.dirs.io.max.bytes.per.second"))
            return None if value >= LONG_MAX else value

        move.task = asyncio.get_running_loop().create_task(run_move(lm, move, rate))
    return ErrorCode.NONE


@handler(34, REQ.min_version, REQ.max_version)
async def alter_replica_log_dirs(ctx: RequestContext, req: m.AlterReplicaLogDirsRequest
                                 ) -> m.AlterReplicaLogDirsResponse:
    authorized = allowed_cluster(ctx, ALTER)
    results: dict[str, list[Any]] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = _alter_one(ctx, d.path, t.name, p) if authorized \
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                results.setdefault(t.name, []).append(
                    RESP.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=int(code)))
    return RESP.new(throttle_time_ms=0, results=[RESP.AlterReplicaLogDirTopicResult(
        topic_name=name, partitions=parts) for name, parts in results.items()])

"""Transaction markers: COMMIT / ABORT control batches written to the partitions of a transaction.

On one node the coordinator writes them in-process (Kafka's TransactionMarkerChannelManager sends
WriteTxnMarkers requests to each partition leader; here the leader is this broker). ``write_markers`` is also
what the WriteTxnMarkers handler (key 27) calls, so both paths write the same bytes:

* one control batch per partition (``build_control_batch``: producer id and epoch, transactional and control
  attributes, base sequence -1, one record with key (version 0, type 0 ABORT / 1 COMMIT) and value
  (version 0, coordinator epoch)), appended as an internal append (clients may not produce control batches);
* the log turns it into the end of the producer's transaction on that partition: the last stable offset moves
  on, and an ABORT becomes an entry of the segment's ``.txnindex``;
* a marker on a ``__consumer_offsets`` partition also ends the transactional offset commits of that producer
  for the groups of the partition (``GroupCoordinator.complete_transaction``): committed offsets become
  visible, aborted ones are dropped.

Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION (this broker has no such replica: the coordinator treats the
marker as written when the topic is gone, as Kafka does for deleted partitions, and retries it otherwise: a
broker just restarted has no replicas until its LeaderAndIsr), INVALID_PRODUCER_EPOCH (a marker older than
the producer's epoch on that partition), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), or the
log's error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from moldau._aio import wait_for
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records import build_control_batch

from ..metadata import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ..clock import Clock
    from ..groups.coordinator import GroupCoordinator
    from ..replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# how long a marker may wait for the ISR before it is REQUEST_TIMED_OUT (the coordinator retries); below
# the 30 s WriteTxnMarkers request timeout of the cluster's marker sender
MARKER_REPLICATION_TIMEOUT_S = 20.0


class MarkerDeps(Protocol):
    """The broker services writing markers uses (``services.BrokerServices`` is one)."""

    @property
    def clock(self) -> Clock: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...


def write_marker(services: MarkerDeps, topic: str, partition: int, producer_id: int, producer_epoch: int,
                 commit: bool,
                 coordinator_epoch: int, *, check_epochs: bool = False) -> tuple[int, Any]:
    """Append one COMMIT/ABORT marker to ``topic``-``partition``: (error code, 0 = appended; the future that
    completes when the marker is replicated to the ISR and flushed, or None). A marker counts as written
    only once that future completed: a marker lost in a leader failover would leave the transaction open."""
    rm = services.replica_manager
    p = rm.get_partition(topic, partition)
    if p is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION, None
    if check_epochs:
        entry = p.log.producer_state.get(producer_id)
        if entry is not None:
            if producer_epoch < entry.epoch:
                return E.INVALID_PRODUCER_EPOCH, None
            if 0 <= coordinator_epoch < entry.coordinator_epoch:
                return E.TRANSACTION_COORDINATOR_FENCED, None
    now = services.clock.time_ms()
    buf = bytearray(build_control_batch(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                        timestamp=now, coordinator_epoch=coordinator_epoch,
                                        partition_leader_epoch=p.leader_epoch))
    res = rm.append(p, buf, internal=True, now_ms=now)
    if res.error:
        log.warning("%s marker for producer %d (epoch %d) on %s-%d failed: %s (%s)",
                    "COMMIT" if commit else "ABORT", producer_id, producer_epoch, topic, partition, res.error,
                    res.error_message)
        return int(res.error), None
    entry = p.log.producer_state.get(producer_id)
    if entry is not None and coordinator_epoch > entry.coordinator_epoch:
        entry.coordinator_epoch = coordinator_epoch
    return E.NONE, res.flush


async def _replicated(flush: Any, what: str) -> int:
    """Wait for a marker's replication (acks=all); its error code."""
    from moldau.protocol.errors import error_code_of

    try:
        await wait_for(asyncio.shield(flush), MARKER_REPLICATION_TIMEOUT_S)
    except asyncio.TimeoutError:
        log.warning("%s: not replicated to the ISR within %.0f s", what, MARKER_REPLICATION_TIMEOUT_S)
        return E.REQUEST_TIMED_OUT
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - leadership moved, log dir failed...: the coordinator retries
        code = error_code_of(exc)
        log.info("%s: not replicated: %s", what, exc)
        return int(code) or E.NOT_LEADER_OR_FOLLOWER
    return E.NONE


async def write_markers(services: MarkerDeps, producer_id: int, producer_epoch: int, commit: bool,
                        partitions: Iterable[tuple[str, int]], coordinator_epoch: int, *,
                        check_epochs: bool = False) -> dict[tuple[str, int], int]:
    """Markers on every partition in ``partitions``; group offsets of ``__consumer_offsets`` partitions are
    completed after their marker. Returns the error code per partition."""
    results: dict[tuple[str, int], int] = {}
    offsets_partitions: list[int] = []
    waits: dict[tuple[str, int], Any] = {}
    for topic, partition in sorted(set(partitions)):
        code, flush = write_marker(services, topic, partition, producer_id, producer_epoch, commit,
                                   coordinator_epoch,
                                   check_epochs=check_epochs)
        results[(topic, partition)] = code
        if code == E.NONE and flush is not None:
            waits[(topic, partition)] = flush
    if waits:
        kind = "COMMIT" if commit else "ABORT"
        codes = await asyncio.gather(*(_replicated(f, f"{kind} marker for producer {producer_id} on {t}-{i}")
                                       for (t, i), f in waits.items()))
        for tp, code in zip(waits, codes, strict=True):
            results[tp] = code
    for (topic, partition), code in results.items():
        if code == E.NONE and topic == OFFSETS_TOPIC:
            offsets_partitions.append(partition)
    if offsets_partitions:
        await complete_group_offsets(services, producer_id, commit, offsets_partitions)
    return results


async def complete_group_offsets(services: MarkerDeps, producer_id: int, commit: bool,
                                 partitions: list[int]) -> None:
    gc = services.group_coordinator
    if gc is None:
        return
    wanted = set(partitions)
    groups = [g for g in list(gc.groups) if gc.partition_for(g) in wanted]
    if not groups:
        return
    # the marker just written makes the offsets durable (or drops them): nothing more to append
    await gc.offsets.complete_transaction(producer_id, commit, groups, persist=False)

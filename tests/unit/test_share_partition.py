"""The share-partition state machine (KIP-932) over synthetic record batches, the share coordinator's state
merge, the ``__share_group_state`` record formats and the group configs' values (no broker)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from moldau.broker.share.config import parse_duration_ms
from moldau.broker.share.groups import ShareMember, assign
from moldau.broker.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    SharePartition,
)
from moldau.broker.share.state import merge_batches
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.batch import BatchBuilder, build_control_batch
from moldau.protocol.share_state import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareKey,
    ShareState,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

LOCK, LIMIT, MAX_LOCKS = 1000, 3, 2000


def _batch(base: int, n: int, *, pid: int = -1, txn: bool = False) -> bytes:
    b = BatchBuilder(
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn,
    )
    for i in range(n):
        b.append(0, None, b"v%d" % (base + i), [])
    return b.build(base)


class Log:
    """Whole batches from an offset, as the replica manager's read gives them."""

    def __init__(self, batches: list[bytes], aborted: list[tuple[int, int]] | None = None) -> None:
        self.batches = batches
        self.aborted = aborted

    def read(self, offset: int) -> tuple[list[Any], Any]:
        import struct

        out = []
        for b in self.batches:
            base = struct.unpack_from(">q", b, 0)[0]
            last = base + struct.unpack_from(">i", b, 23)[0]
            if last >= offset:
                out.append(b)
        return [b"".join(out)] if out else [], self.aborted


def _sp(start: int = 0) -> SharePartition:
    sp = SharePartition("g", "t", 0, uuid.uuid4())
    sp.load(start, [], 0)
    return sp


def test_acquire_ack_release_reject_and_the_limit() -> None:
    log = Log([_batch(0, 5), _batch(5, 5)])
    sp = _sp()
    a = sp.acquire("m1", 3, 0, LOCK, MAX_LOCKS, log.read, 0)
    assert a.ranges == [(0, 2, 1)] and len(a.chunks) == 1
    b = sp.acquire("m2", 100, 0, LOCK, MAX_LOCKS, log.read, 0)
    assert b.ranges == [(3, 9, 1)] and len(b.chunks) == 2  # one partition, two members, disjoint records
    assert sp.acquire("m3", 100, 0, LOCK, MAX_LOCKS, log.read, 0).ranges == []
    # another member's records, or offsets never acquired: INVALID_RECORD_STATE, nothing applied
    assert sp.acknowledge("m1", 2, 3, [ACCEPT], 0, LOCK, LIMIT) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("m1", 0, 2, [ACCEPT, RELEASE, REJECT], 0, LOCK, LIMIT) == ErrorCode.NONE
    assert sp.spso == 1 and sp.records[2].state == ARCHIVED
    assert sp.acknowledge("m1", 0, 0, [ACCEPT], 0, LOCK, LIMIT) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("m2", 3, 4, [7], 0, LOCK, LIMIT) == ErrorCode.INVALID_REQUEST
    # the released record comes back with a higher delivery count, to any member
    assert sp.acquire("m3", 100, 10, LOCK, MAX_LOCKS, log.read, 0).ranges == [(1, 1, 2)]
    assert sp.acknowledge("m3", 1, 1, [RELEASE], 10, LOCK, LIMIT) == ErrorCode.NONE
    assert sp.acquire("m3", 100, 10, LOCK, MAX_LOCKS, log.read, 0).ranges == [(1, 1, 3)]
    assert sp.acknowledge("m3", 1, 1, [RELEASE], 10, LOCK, LIMIT) == ErrorCode.NONE
    assert sp.records.get(1) is None and sp.spso == 3  # at the limit: archived, the SPSO moves past it
    # Renew keeps the lock; expiry gives the records back
    assert sp.acknowledge("m2", 3, 9, [RENEW], 900, LOCK, LIMIT) == ErrorCode.NONE
    assert not sp.expire_locks(1500, LIMIT)
    assert sp.expire_locks(1900, LIMIT) and sp.has_available()
    assert sp.acquire("m1", 100, 2000, LOCK, MAX_LOCKS, log.read, 0).ranges == [(3, 9, 2)]
    assert sp.acknowledge("m1", 3, 9, [GAP], 2000, LOCK, LIMIT) == ErrorCode.NONE
    assert (sp.spso, sp.speo, sp.records) == (10, 10, {})


def test_state_batches_and_reload() -> None:
    log = Log([_batch(0, 6)])
    sp = _sp()
    sp.acquire("m", 6, 0, LOCK, MAX_LOCKS, log.read, 0)
    sp.acknowledge("m", 1, 1, [ACCEPT], 0, LOCK, LIMIT)
    sp.acknowledge("m", 2, 2, [REJECT], 0, LOCK, LIMIT)
    got = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in sp.state_batches()]
    assert got == [(0, 0, 0, 1), (1, 1, 2, 1), (2, 2, 4, 1), (3, 5, 0, 1)]  # acquired counts as available
    again = _sp()
    again.load(sp.spso, sp.state_batches(), 1)
    a = again.acquire("m", 10, 0, LOCK, MAX_LOCKS, log.read, 0)
    assert a.ranges == [(0, 0, 2), (3, 5, 2)]  # accepted / rejected records are not delivered again
    assert again.records[1].state == ACKNOWLEDGED


def test_state_to_redeliver_waits_for_the_log_and_is_archived_only_below_its_start() -> None:
    """A new leader loads the share state (records 3-5 to deliver again) before its high watermark
    reaches them: its log gives nothing from 3 yet. They stay available and come with the next acquire once
    readable; only records below the log start offset (retention) are archived. (Archiving them on the
    first empty read lost them: the cluster failover test saw them never come back.)"""
    log = Log([_batch(0, 6)])
    sp = _sp()
    sp.acquire("m", 6, 0, LOCK, MAX_LOCKS, log.read, 0)
    sp.acknowledge("m", 0, 2, [ACCEPT], 0, LOCK, LIMIT)
    again = _sp()
    again.load(sp.spso, sp.state_batches(), 1)
    nothing_yet = Log([])
    assert again.acquire("m", 10, 0, LOCK, MAX_LOCKS, nothing_yet.read, 0).ranges == []
    assert all(again.records[o].state != ARCHIVED for o in (3, 4, 5))
    assert again.acquire("m", 10, 0, LOCK, MAX_LOCKS, log.read, 0).ranges == [(3, 5, 2)]
    gone = _sp()
    gone.load(sp.spso, sp.state_batches(), 1)
    assert gone.acquire("m", 10, 0, LOCK, MAX_LOCKS, nothing_yet.read, 0, log_start_offset=5).ranges == []
    assert gone.spso == 5 and gone.records[5].state != ARCHIVED  # 3-4 archived and passed, 5 waits


def test_max_record_locks_and_start_offset() -> None:
    log = Log([_batch(100, 10)])
    sp = _sp(start=100)
    assert sp.acquire("m", 100, 0, LOCK, 4, log.read, 0).ranges == [(100, 109, 1)]  # whole batch, then stop
    assert sp.acquire("m", 100, 0, LOCK, 4, log.read, 0).ranges == []


def test_read_committed_archives_aborted_and_control_records() -> None:
    pid = 7
    log = Log(
        [
            _batch(0, 2),
            _batch(2, 3, pid=pid, txn=True),
            build_control_batch(producer_id=pid, producer_epoch=0, commit=False, timestamp=0, base_offset=5),
            _batch(6, 2),
        ],
        aborted=[(pid, 2)],
    )
    sp = _sp()
    a = sp.acquire("m", 100, 0, LOCK, MAX_LOCKS, log.read, 1)
    assert a.ranges == [(0, 1, 1), (6, 7, 1)]
    assert all(sp.records[o].state == ARCHIVED for o in range(2, 6))
    dirty = _sp()  # read_uncommitted: the aborted records are delivered, the marker is not
    assert dirty.acquire("m", 100, 0, LOCK, MAX_LOCKS, log.read, 0).ranges == [(0, 4, 1), (6, 7, 1)]


def test_merge_batches() -> None:
    old = [StateBatch(10, 19, 0, 1)]
    new = [StateBatch(12, 13, 2, 1), StateBatch(18, 25, 4, 2)]
    got = [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in merge_batches(old, new, 11)
    ]
    assert got == [(11, 11, 0, 1), (12, 13, 2, 1), (14, 17, 0, 1), (18, 25, 4, 2)]


def test_record_formats() -> None:
    key = ShareKey("group", uuid.UUID(int=1), 3)
    kb = encode_key(SHARE_UPDATE, key)
    assert kb[:2] == b"\x00\x01" and decode_key(kb) == (SHARE_UPDATE, key)
    assert key.coordinator_key() == "group:AAAAAAAAAAAAAAAAAAAAAQ:3"
    st = ShareState(2, 1, 0, 10, 4, 111, 222, [StateBatch(10, 12, 2, 1)])
    vb = encode_value(SHARE_SNAPSHOT, st)
    assert vb[:2] == b"\x00\x00"  # value version 0
    assert decode_value(SHARE_SNAPSHOT, vb) == st
    with pytest.raises(ValueError):
        decode_key(b"\x00\x05\x00\x00")


def test_assignor_shares_partitions() -> None:
    def mem(i: int) -> ShareMember:
        return ShareMember(f"m{i}", 0, None, "", "", ["t"], 0)

    three = assign([mem(0), mem(1), mem(2)], lambda t: 1)
    assert three == {"m0": {"t": [0]}, "m1": {"t": [0]}, "m2": {"t": [0]}}
    two = assign([mem(0), mem(1)], lambda t: 4)
    assert two == {"m0": {"t": [0, 2]}, "m1": {"t": [1, 3]}}


def test_durations() -> None:
    assert parse_duration_ms("PT1H") == 3_600_000
    assert parse_duration_ms("P1DT2M0.5S") == 86_400_000 + 120_000 + 500
    for bad in ("P", "PT", "1H", "soon"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)


def test_acquire_modes() -> None:
    log = Log([_batch(0, 5), _batch(5, 5)])
    strict = _sp()  # record-limit: MaxRecords exactly, a batch may be split
    assert strict.acquire("m", 3, 0, LOCK, MAX_LOCKS, log.read, 0).ranges == [(0, 2, 1)]
    aligned = _sp()  # batch-optimized: a new batch to its end
    assert aligned.acquire("m", 3, 0, LOCK, MAX_LOCKS, log.read, 0, whole_batches=True).ranges == [(0, 4, 1)]

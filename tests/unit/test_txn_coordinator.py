"""The transaction coordinator's state machine, over in-memory storage and a recording marker writer (no
broker): epochs and fencing, the transitions and their records, timeouts, recovery after a restart."""

from __future__ import annotations

import asyncio
import functools
import re

import pytest

from moldau.broker.coordinator.memory import MemoryCoordinatorLog
from moldau.broker.txn.coordinator import TransactionCoordinator, TxnConfig
from moldau.broker.txn.state import TxnState, decode_key, decode_value
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError

S = TxnState


def aio(fn):
    @functools.wraps(fn)
    def run(*a, **kw):
        return asyncio.run(fn(*a, **kw))

    return run


class Harness:
    def __init__(self, storage: MemoryCoordinatorLog | None = None, *, now: int = 1_000_000,
                 next_pid: int = 100, **config) -> None:
        self.storage = storage or MemoryCoordinatorLog()
        self.now = now
        self.pid = next_pid
        self.markers: list[tuple[int, int, bool, list[tuple[str, int]], int]] = []
        self.marker_error: dict[tuple[str, int], int] = {}
        self.config = TxnConfig(num_partitions=3, **config)
        self.c = TransactionCoordinator(self.config, self.storage, self._write_markers, self._next_pid,
                                        lambda: self.now)
        self.c.follow(self.storage)

    def _next_pid(self) -> int:
        self.pid += 1
        return self.pid - 1

    async def _write_markers(self, pid, epoch, commit, partitions, coordinator_epoch):
        parts = sorted(partitions)
        self.markers.append((pid, epoch, commit, parts, coordinator_epoch))
        return {tp: self.marker_error.get(tp, E.NONE) for tp in parts}

    def restart(self) -> Harness:
        h = Harness(self.storage, now=self.now, next_pid=self.pid + 1000)
        h.marker_error = {}
        return h

    def states(self, txn_id: str) -> list[tuple[str, int, list]]:
        """(state name, epoch, partitions) of every record written for ``txn_id``."""
        out = []
        for _p, k, v in self.storage.records():
            if decode_key(k) == txn_id:
                if v is None:
                    out.append(("tombstone", -1, []))
                else:
                    val = decode_value(v)
                    out.append((S(val.transaction_status).display_name, val.producer_epoch,
                                val.transaction_partitions))
        return out

    async def init(self, txn_id="tx", timeout=60000, pid=-1, epoch=-1):
        return await self.c.handle_init_producer_id(txn_id, timeout, pid, epoch)


@aio
async def test_init_creates_then_bumps_the_epoch():
    h = Harness()
    assert await h.init() == (E.NONE, 100, 0)
    assert await h.init() == (E.NONE, 100, 1)
    assert h.states("tx") == [("Empty", 0, None), ("Empty", 1, None)]
    assert h.c.describe("tx").state == S.EMPTY


@aio
async def test_init_validation():
    h = Harness(max_timeout_ms=900000)
    assert (await h.init(timeout=900001))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await h.init(timeout=0))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await h.init(txn_id=""))[0] == E.INVALID_REQUEST
    assert (await h.init(pid=5, epoch=-1))[0] == E.INVALID_REQUEST
    assert h.storage.records() == []


@aio
async def test_commit_writes_each_transition_and_markers():
    h = Harness()
    _, pid, epoch = await h.init()
    parts = [("t", 0), ("t", 1)]
    assert await h.c.handle_add_partitions("tx", pid, epoch, parts) == E.NONE
    assert await h.c.handle_add_partitions("tx", pid, epoch, [("t", 1)]) == E.NONE  # already in: no record
    assert await h.c.handle_add_partitions("tx", pid, epoch, [("u", 0)]) == E.NONE
    assert await h.c.handle_end_txn("tx", pid, epoch, True) == (E.NONE, pid, epoch)
    assert h.markers == [(pid, epoch, True, [("t", 0), ("t", 1), ("u", 0)], 0)]
    assert h.states("tx") == [
        ("Empty", 0, None),
        ("Ongoing", 0, [("t", [0, 1])]),
        ("Ongoing", 0, [("t", [0, 1]), ("u", [0])]),
        ("PrepareCommit", 0, [("t", [0, 1]), ("u", [0])]),
        ("CompleteCommit", 0, []),
    ]
    md = h.c.describe("tx")
    assert md.state == S.COMPLETE_COMMIT and md.partitions == set() and md.txn_start_ms == h.now
    # a retried commit is fine, an abort of a committed transaction is not
    assert (await h.c.handle_end_txn("tx", pid, epoch, True))[0] == E.NONE
    assert (await h.c.handle_end_txn("tx", pid, epoch, False))[0] == E.INVALID_TXN_STATE
    # the next transaction starts from CompleteCommit
    assert await h.c.handle_add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    assert (await h.c.handle_end_txn("tx", pid, epoch, False))[0] == E.NONE
    assert h.markers[-1] == (pid, epoch, False, [("t", 0)], 0)
    assert h.c.describe("tx").state == S.COMPLETE_ABORT


@aio
async def test_end_txn_errors():
    h = Harness()
    assert (await h.c.handle_end_txn("nope", 1, 0, True))[0] == E.INVALID_PRODUCER_ID_MAPPING
    _, pid, epoch = await h.init()
    assert (await h.c.handle_end_txn("tx", pid, epoch, True))[0] == E.INVALID_TXN_STATE  # Empty
    assert (await h.c.handle_end_txn("tx", pid + 1, epoch, True))[0] == E.INVALID_PRODUCER_ID_MAPPING
    assert (await h.c.handle_end_txn("tx", pid, epoch + 1, True))[0] == E.PRODUCER_FENCED
    assert await h.c.handle_add_partitions("tx", pid, epoch + 1, [("t", 0)]) == E.PRODUCER_FENCED
    assert await h.c.handle_add_partitions("tx", pid + 1, epoch, [("t", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await h.c.handle_add_partitions("nope", pid, epoch, [("t", 0)]) == E.INVALID_PRODUCER_ID_MAPPING


@aio
async def test_second_producer_fences_the_first_and_aborts_its_transaction():
    h = Harness()
    _, pid, e0 = await h.init()
    assert await h.c.handle_add_partitions("tx", pid, e0, [("t", 0)]) == E.NONE
    # a new producer with the same transactional id: the ongoing transaction is aborted with a bumped epoch
    err, pid2, e2 = await h.init()
    assert (err, pid2) == (E.NONE, pid) and e2 == e0 + 2
    assert h.markers == [(pid, e0 + 1, False, [("t", 0)], 0)]
    assert [s[:2] for s in h.states("tx")] == [
        ("Empty", 0), ("Ongoing", 0), ("PrepareAbort", 1), ("CompleteAbort", 1), ("Empty", 2)]
    # the zombie is fenced everywhere
    assert (await h.c.handle_end_txn("tx", pid, e0, True))[0] == E.PRODUCER_FENCED
    assert await h.c.handle_add_partitions("tx", pid, e0, [("t", 0)]) == E.PRODUCER_FENCED
    assert h.c.check_txn_offset_commit("tx", pid, e0, ("__consumer_offsets", 1)) == E.PRODUCER_FENCED
    assert h.c.verify_produce("tx", "t", 0, pid, e0) == E.INVALID_PRODUCER_EPOCH
    # the new producer works
    assert await h.c.handle_add_partitions("tx", pid, e2, [("t", 0)]) == E.NONE
    assert (await h.c.handle_end_txn("tx", pid, e2, True))[0] == E.NONE


@aio
async def test_kip360_epoch_bump_with_the_current_producer():
    h = Harness()
    _, pid, e0 = await h.init()
    assert await h.init(pid=pid, epoch=e0) == (E.NONE, pid, e0 + 1)
    # a retry of that bump (the response was lost) gets the same epoch
    assert await h.init(pid=pid, epoch=e0) == (E.NONE, pid, e0 + 1)
    # an unknown producer id, or an epoch that is neither current nor previous: fenced
    assert (await h.init(pid=pid + 50, epoch=0))[0] == E.PRODUCER_FENCED
    assert (await h.init(pid=pid, epoch=e0 + 7))[0] == E.PRODUCER_FENCED


@aio
async def test_epoch_exhaustion_rotates_the_producer_id():
    h = Harness()
    _, pid, _ = await h.init()
    md = h.c.describe("tx")
    md.producer_epoch = 32766
    err, pid2, epoch = await h.init()
    assert err == E.NONE and pid2 != pid and epoch == 0
    assert h.c.describe("tx").last_producer_id == pid


@aio
async def test_timed_out_transaction_is_aborted_and_the_producer_fenced():
    h = Harness()
    _, pid, e0 = await h.init(timeout=1000)
    await h.c.handle_add_partitions("tx", pid, e0, [("t", 0), ("t", 2)])
    h.now += 999
    assert await h.c.abort_timed_out_transactions() == 0
    h.now += 2
    assert await h.c.abort_timed_out_transactions() == 1
    assert h.markers == [(pid, e0 + 1, False, [("t", 0), ("t", 2)], 0)]
    md = h.c.describe("tx")
    assert md.state == S.COMPLETE_ABORT and md.producer_epoch == e0 + 1
    assert (await h.c.handle_end_txn("tx", pid, e0, True))[0] == E.PRODUCER_FENCED
    assert await h.init() == (E.NONE, pid, e0 + 2)


@aio
async def test_prepared_transaction_completes_after_a_restart():
    h = Harness()
    _, pid, e0 = await h.init()
    await h.c.handle_add_partitions("tx", pid, e0, [("t", 0), ("t", 1)])
    h.marker_error = {("t", 1): E.NOT_ENOUGH_REPLICAS}  # the broker "dies" before all markers are written
    assert (await h.c.handle_end_txn("tx", pid, e0, True))[0] == E.NONE  # the decision is durable
    assert h.c.describe("tx").state == S.PREPARE_COMMIT
    assert h.c.describe("tx").markers_left == {("t", 1)}
    # another operation meanwhile: retriable
    assert await h.c.handle_add_partitions("tx", pid, e0, [("t", 0)]) == E.CONCURRENT_TRANSACTIONS
    await h.c.stop()
    h2 = h.restart()
    md = h2.c.describe("tx")
    assert md.state == S.PREPARE_COMMIT and md.partitions == {("t", 0), ("t", 1)}
    h2.c.start()
    for _ in range(50):
        if h2.c.describe("tx").state == S.COMPLETE_COMMIT:
            break
        await asyncio.sleep(0.01)
    await h2.c.stop()
    assert h2.c.describe("tx").state == S.COMPLETE_COMMIT
    assert h2.markers == [(pid, e0, True, [("t", 0), ("t", 1)], 0)]
    assert h2.states("tx")[-1] == ("CompleteCommit", e0, [])


@aio
async def test_ongoing_transaction_survives_a_restart_and_times_out():
    h = Harness()
    _, pid, e0 = await h.init(timeout=5000)
    await h.c.handle_add_partitions("tx", pid, e0, [("t", 0)])
    h2 = h.restart()
    md = h2.c.describe("tx")
    assert md.state == S.ONGOING and md.txn_timeout_ms == 5000 and md.producer_epoch == e0
    h2.now += 6000
    assert await h2.c.abort_timed_out_transactions() == 1
    assert h2.markers == [(pid, e0 + 1, False, [("t", 0)], 0)]


@aio
async def test_failed_write_leaves_the_state_alone():
    h = Harness()
    _, pid, e0 = await h.init()
    h.storage.fail_next = KafkaError.for_code(E.NOT_ENOUGH_REPLICAS)
    assert await h.c.handle_add_partitions("tx", pid, e0, [("t", 0)]) == E.COORDINATOR_NOT_AVAILABLE
    assert h.c.describe("tx").state == S.EMPTY
    h.storage.fail_next = KafkaError.for_code(E.NOT_LEADER_OR_FOLLOWER)
    assert (await h.init())[0] == E.NOT_COORDINATOR
    assert h.c.describe("tx").producer_epoch == e0


@aio
async def test_failed_fence_keeps_the_zombie_fenced():
    h = Harness()
    _, pid, e0 = await h.init()
    await h.c.handle_add_partitions("tx", pid, e0, [("t", 0)])
    h.storage.fail_next = KafkaError.for_code(E.NOT_ENOUGH_REPLICAS)
    assert (await h.init())[0] == E.COORDINATOR_NOT_AVAILABLE
    assert (await h.c.handle_end_txn("tx", pid, e0, True))[0] == E.PRODUCER_FENCED
    # the retry does not bump a second time for the fence
    assert await h.init() == (E.NONE, pid, e0 + 2)
    assert h.markers == [(pid, e0 + 1, False, [("t", 0)], 0)]


@aio
async def test_transactions_v2_bump_the_epoch_on_every_end():
    h = Harness()
    _, pid, e0 = await h.init()
    await h.c.handle_add_partitions("tx", pid, e0, [("t", 0)])
    assert await h.c.handle_end_txn("tx", pid, e0, True, tv2=True) == (E.NONE, pid, e0 + 1)
    assert h.markers == [(pid, e0 + 1, True, [("t", 0)], 0)]
    # the retry with the old epoch is recognised
    assert await h.c.handle_end_txn("tx", pid, e0, True, tv2=True) == (E.NONE, pid, e0 + 1)
    # an abort with nothing open still bumps (V2 lets clients fence themselves cheaply)
    assert await h.c.handle_end_txn("tx", pid, e0 + 1, False, tv2=True) == (E.NONE, pid, e0 + 2)
    assert h.storage.records() and decode_value(h.storage.records()[-1][2]).version == 1
    # epoch overflow: a new producer id
    h.c.describe("tx").producer_epoch = 32766
    await h.c.handle_add_partitions("tx", pid, 32766, [("t", 0)])
    err, pid2, epoch = await h.c.handle_end_txn("tx", pid, 32766, True, tv2=True)
    assert err == E.NONE and pid2 != pid and epoch == 0
    assert h.markers[-1][:2] == (pid, 32767)


@aio
async def test_verification_of_produce_and_offsets():
    h = Harness()
    _, pid, e0 = await h.init()
    assert h.c.verify_produce("tx", "t", 0, pid, e0) == E.INVALID_TXN_STATE
    assert h.c.verify_produce("other", "t", 0, pid, e0) == E.INVALID_PRODUCER_ID_MAPPING
    await h.c.handle_add_partitions("tx", pid, e0, [("t", 0), ("__consumer_offsets", 2)])
    assert h.c.verify_produce("tx", "t", 0, pid, e0) == E.NONE
    assert h.c.verify_produce("tx", "t", 1, pid, e0) == E.INVALID_TXN_STATE
    assert h.c.check_txn_offset_commit("tx", pid, e0, ("__consumer_offsets", 2)) == E.NONE
    assert h.c.check_txn_offset_commit("tx", pid, e0, ("__consumer_offsets", 1)) == E.INVALID_TXN_STATE
    top, per = h.c.verify_partitions("tx", pid, e0, [("t", 0), ("t", 1)])
    assert top == E.NONE and per == {("t", 0): E.NONE, ("t", 1): E.TRANSACTION_ABORTABLE}
    assert h.c.verify_partitions("tx", pid, e0 + 1, [("t", 0)])[0] == E.PRODUCER_FENCED
    # while another AddPartitionsToTxn is being written, partitions already in the transaction stay usable
    md = h.c.describe("tx")
    md.pending_state = S.ONGOING
    assert h.c.verify_produce("tx", "t", 0, pid, e0) == E.NONE
    md.pending_state = S.PREPARE_COMMIT  # the commit decision is being written: retriable
    assert h.c.verify_produce("tx", "t", 0, pid, e0) == E.NOT_ENOUGH_REPLICAS
    assert h.c.check_txn_offset_commit("tx", pid, e0, ("__consumer_offsets", 2)) == E.CONCURRENT_TRANSACTIONS
    md.pending_state = None
    h.c.config.verification = False
    assert h.c.verify_produce("tx", "t", 1, pid, e0) == E.NONE


@aio
async def test_expired_transactional_ids_are_removed():
    h = Harness(expiration_ms=10_000)
    await h.init("a")
    _, pid, e = await h.init("b")
    await h.c.handle_add_partitions("b", pid, e, [("t", 0)])
    h.now += 10_001
    assert await h.c.remove_expired_transactional_ids() == 1  # "b" is Ongoing: kept
    assert h.c.describe("a") is None and h.states("a")[-1][0] == "tombstone"
    h2 = h.restart()
    assert h2.c.describe("a") is None and h2.c.describe("b").state == S.ONGOING


@aio
async def test_list_and_describe():
    h = Harness()
    await h.init("idle")
    _, pid, e = await h.init("busy")
    await h.c.handle_add_partitions("busy", pid, e, [("t", 0)])
    found, unknown = h.c.list_transactions()
    assert [m.transactional_id for m in found] == ["busy", "idle"] and unknown == []
    found, unknown = h.c.list_transactions(states=["Ongoing", "Bogus"])
    assert [m.transactional_id for m in found] == ["busy"] and unknown == ["Bogus"]
    assert [m.transactional_id for m in h.c.list_transactions(producer_ids=[pid])[0]] == ["busy"]
    assert h.c.list_transactions(duration_ms=1000)[0] == []
    h.now += 5000
    assert [m.transactional_id for m in h.c.list_transactions(duration_ms=1000)[0]] == ["busy"]
    assert [m.transactional_id for m in h.c.list_transactions(pattern="i.*")[0]] == ["idle"]
    assert h.c.list_transactions(pattern="dle")[0] == []  # the whole id must match
    with pytest.raises(re.error):
        h.c.list_transactions(pattern="(")

import random

import pytest

from moldau.broker.replica_manager import CachedPartition, FetchSessionCache, FetchSessionError
from moldau.protocol.errors import ErrorCode


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def cps(n, topic="t"):
    return [CachedPartition(topic, None, i, 0, 1024) for i in range(n)]


def test_create_get_epochs():
    c = FetchSessionCache(10, rng=random.Random(1))
    s = c.create(False, cps(2))
    assert s is not None and s.session_id > 0 and s.epoch == 1
    assert list(s.partitions) == [("t", 0), ("t", 1)]
    assert c.get(s.session_id, 1) is s
    c.next_epoch(s)
    with pytest.raises(FetchSessionError) as e:
        c.get(s.session_id, 1)
    assert e.value.code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert c.get(s.session_id, 2) is s
    with pytest.raises(FetchSessionError) as e:
        c.get(12345, 1)
    assert e.value.code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    c.remove(s.session_id)
    with pytest.raises(FetchSessionError):
        c.get(s.session_id, 2)


def test_unique_ids():
    c = FetchSessionCache(100, rng=random.Random(2))
    ids = {c.create(False, cps(1)).session_id for _ in range(100)}
    assert len(ids) == 100 and 0 not in ids


def test_bounded_with_eviction():
    clock = Clock()
    c = FetchSessionCache(2, eviction_s=120, clock=clock)
    a = c.create(False, cps(3))
    b = c.create(False, cps(3))
    # full; nothing stale, nothing smaller than 3 partitions -> refused
    assert c.create(False, cps(3)) is None
    assert len(c) == 2
    # a larger session may evict a smaller one (the least recently used first)
    c.get(a.session_id, 1)  # a becomes most recently used
    big = c.create(False, cps(5))
    assert big is not None and b.session_id not in c.sessions and a.session_id in c.sessions
    # stale sessions are evicted for anyone
    clock.t += 121
    c.get(big.session_id, 1)
    d = c.create(False, cps(1))
    assert d is not None and a.session_id not in c.sessions and len(c) == 2


def test_must_respond():
    cp = CachedPartition("t", None, 0, 0, 100)
    assert cp.must_respond(0, False, 10, 10, 0)        # first answer: values unknown
    assert not cp.must_respond(0, False, 10, 10, 0)    # nothing changed
    assert cp.must_respond(0, True, 10, 10, 0)         # records
    assert cp.must_respond(3, False, 10, 10, 0)        # error
    assert cp.must_respond(0, False, 11, 10, 0)        # high watermark
    assert cp.must_respond(0, False, 11, 11, 0)        # last stable offset
    assert cp.must_respond(0, False, 11, 11, 5)        # log start offset
    assert not cp.must_respond(0, False, 11, 11, 5)


def test_zero_slots_never_creates():
    c = FetchSessionCache(0)
    assert c.create(False, cps(1)) is None

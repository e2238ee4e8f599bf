"""Incremental fetch sessions (KIP-227): the client-side handler alone, then its requests against a broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from moldau.client.conn import Connection
from moldau.client.fetch_session import INITIAL_EPOCH, FetchSessionHandler
from moldau.protocol import messages as m


def test_full_then_incremental_then_reset():
    h = FetchSessionHandler()
    wanted = {("t", 0): (0, 0, 1000), ("t", 1): (5, 0, 1000)}
    p = h.build(wanted)
    assert (p.session_id, p.epoch, p.full, sorted(p.send), p.forgotten) == (0, INITIAL_EPOCH, True,
                                                                             [("t", 0), ("t", 1)], [])
    h.handle_response(p, 0, 77)
    assert h.active and (h.session_id, h.epoch) == (77, 1)
    # nothing changed: an incremental fetch naming no partition
    p = h.build(dict(wanted))
    assert (p.session_id, p.epoch, p.full, p.send, p.forgotten) == (77, 1, False, [], [])
    h.handle_response(p, 0, 77)
    # t-0 moved on, t-1 is paused (not wanted), t-2 is new
    p = h.build({("t", 0): (9, 0, 1000), ("t", 2): (0, 0, 1000)})
    assert (p.epoch, sorted(p.send), p.forgotten) == (2, [("t", 0), ("t", 2)], [("t", 1)])
    h.handle_response(p, 0, 77)
    assert h.partitions == {("t", 0): (9, 0, 1000), ("t", 2): (0, 0, 1000)}
    # the session is gone on the broker: full fetch again, closing the stale one
    p = h.build(dict(h.partitions))
    h.handle_response(p, 70, 0)  # FETCH_SESSION_ID_NOT_FOUND
    assert not h.active
    p = h.build({("t", 0): (9, 0, 1000)})
    assert (p.session_id, p.epoch, p.full, p.send) == (77, INITIAL_EPOCH, True, [("t", 0)])
    h.handle_response(p, 0, 0)  # the broker keeps no session: stay with full fetches
    p = h.build({("t", 0): (9, 0, 1000)})
    assert (p.session_id, p.epoch, p.full) == (0, INITIAL_EPOCH, True)


def test_epoch_wraps_to_one_and_errors_reset():
    h = FetchSessionHandler()
    h.handle_response(h.build({"a": (0, 0, 1)}), 0, 5)
    h.epoch = 2**31 - 1
    h.handle_response(h.build({"a": (0, 0, 1)}), 0, 5)
    assert h.epoch == 1
    h.build({"a": (1, 0, 1)})
    h.handle_error()  # e.g. the connection was lost with the request in flight
    assert (h.session_id, h.epoch, h.partitions) == (0, 0, {})
    assert FetchSessionHandler.is_session_error(71) and not FetchSessionHandler.is_session_error(1)


@pytest.mark.moldau_only(
    reason="checks which partitions an incremental answer carries (moldau's session cache)"
)
def test_sessions_against_the_broker(broker, make_topic):
    """Requests built from the handler's plans: the broker opens a session, answers an incremental fetch
    only for partitions with news, honours forgotten partitions, and a wrong epoch resets the session."""
    topic = make_topic(3)
    host, port = broker.bootstrap.split(":")
    R = m.FetchRequest

    def request(plan: Any, offsets: dict[Any, Any]) -> Any:
        by_topic: dict[str, list[Any]] = {}
        for t, p in plan.send:
            off, epoch, max_bytes = offsets[(t, p)]
            by_topic.setdefault(t, []).append(R.FetchPartition(
                partition=p, current_leader_epoch=epoch, fetch_offset=off, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=max_bytes))
        forgotten: dict[str, list[int]] = {}
        for t, p in plan.forgotten:
            forgotten.setdefault(t, []).append(p)
        return R.new(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[R.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()],
            rack_id="",
        )

    async def main() -> None:
        from moldau.client import AsyncProducer

        conn = await Connection.open(host, int(port))
        assert conn.api_version(1) >= 7
        h = FetchSessionHandler()

        async def fetch(wanted: dict[Any, Any]) -> dict[tuple[str, int], Any]:
            plan = h.build(wanted)
            resp = await conn.send(1, request(plan, wanted))
            h.handle_response(plan, resp.error_code, resp.session_id)
            return {(t.topic, pd.partition_index): pd for t in resp.responses for pd in t.partitions}

        wanted = {(topic, p): (0, -1, 1 << 20) for p in range(3)}
        got = await fetch(wanted)
        assert set(got) == set(wanted) and h.active  # full: every partition
        got = await fetch(wanted)
        assert got == {}  # incremental, nothing new anywhere
        async with AsyncProducer(bootstrap_servers=broker.bootstrap) as p:
            await p.send_and_wait(topic, b"x", partition=1)
            await p.send_and_wait(topic, b"y", partition=2)
        # partition 2 is forgotten (e.g. paused): only partition 1 answers, with its record
        got = await fetch({k: v for k, v in wanted.items() if k[1] != 2})
        assert list(got) == [(topic, 1)] and got[(topic, 1)].high_watermark == 1
        assert bytes(got[(topic, 1)].records)
        wanted[(topic, 1)] = (1, -1, 1 << 20)
        del wanted[(topic, 2)]
        assert await fetch(wanted) == {}  # moved past the record: quiet again
        # a wrong epoch: the broker refuses, the handler falls back to a full fetch that works
        h.epoch += 3
        plan = h.build(wanted)
        resp = await conn.send(1, request(plan, wanted))
        assert resp.error_code == 71  # INVALID_FETCH_SESSION_EPOCH
        h.handle_response(plan, resp.error_code, resp.session_id)
        assert not h.active
        got = await fetch(wanted)
        assert set(got) == set(wanted) and h.active
        conn.close()

    asyncio.run(main())


def test_consumer_uses_incremental_fetches(broker, make_topic, kind):
    """The consumer's fetcher keeps a session per broker: after the first full fetch, fetches are incremental;
    a paused partition is forgotten (nothing of it is returned) and comes back on resume; every record is
    delivered once."""
    from moldau.client import AsyncConsumer, AsyncProducer, TopicPartition

    topic = make_topic(8)
    tps = [TopicPartition(topic, p) for p in range(8)]

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p, \
                AsyncConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=50) as c:
            c.assign(tps)
            c.seek_to_beginning()
            got: list = []

            async def drain(n: int) -> None:
                for _ in range(100):
                    if len(got) >= n:
                        return
                    got.extend(await c.poll(0.1))

            for i in range(20):
                await p.send_and_wait(topic, b"a%d" % i, partition=i % 2)
            await drain(20)
            c.pause(tps[1])
            await p.send_and_wait(topic, b"paused", partition=1)
            await p.send_and_wait(topic, b"b", partition=5)
            await drain(21)
            assert sorted(r.value for r in got) == sorted([b"a%d" % i for i in range(20)] + [b"b"])
            c.resume(tps[1])
            await drain(22)
            values = [r.value for r in got]
            assert len(values) == 22 and b"paused" in values and len(set(values)) == 22
            sessions = list(c._fetcher.sessions.values())
            if kind == "moldau":  # tansu keeps no sessions (answers session id 0): every fetch stays full
                assert len(sessions) == 1 and sessions[0].active
                assert sessions[0].full_fetches == 1 and sessions[0].incremental_fetches >= 2

    asyncio.run(main())

"""Two registry processes (``moldau registry``) against one broker: writes sent to the follower reach the
leader, ids never collide, the leader killed with SIGKILL is replaced by the other, and a third instance
started afterwards reads the same state back from the topic (a restart). About 16 s: behind the
``registry_full`` marker (MOLDAU_REGISTRY_FULL=1)."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from harness.registryutil import RegistryProcess, avro_record


@pytest.fixture
def pair(broker: Any) -> Iterator[tuple[RegistryProcess, RegistryProcess, str]]:
    topic = f"_schemas-pair-{uuid.uuid4().hex[:6]}"
    a = RegistryProcess(broker.bootstrap, topic)
    b = RegistryProcess(broker.bootstrap, topic)
    try:
        yield a.wait_ready(), b.wait_ready(), topic
    finally:
        a.stop()
        b.stop()


def _until(fn: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _leader(a: RegistryProcess, b: RegistryProcess) -> tuple[RegistryProcess, RegistryProcess]:
    """(leader, follower): the leader is the instance whose URL is the client.id of the election group's
    member that holds the topic's partition (what a follower looks up too), found with moldau's admin."""
    from moldau.client import Admin

    admin = Admin({"bootstrap.servers": a.bootstrap})
    try:

        def find() -> str | None:
            desc = admin.describe_consumer_groups([a.group])[a.group]
            for m in desc.members:
                if m.assignment:
                    return str(m.client_id)
            return None

        url = _until(find)
    finally:
        admin.close()
    assert url in (a.url, b.url), url
    return (a, b) if url == a.url else (b, a)


@pytest.mark.registry_full
def test_two_instances_and_failover(pair: tuple[RegistryProcess, RegistryProcess, str], broker: Any) -> None:
    a, b, topic = pair
    ids: dict[str, int] = {}
    # writes alternate between the instances: half of them go to the follower and are forwarded
    for i in range(10):
        target = (a, b)[i % 2]
        st, body = target.call(
            "POST", f"/subjects/s{i}/versions", {"schema": avro_record(f"R{i}", ("f", "int"))}
        )
        assert st == 200, body
        ids[f"s{i}"] = body["id"]
    assert len(set(ids.values())) == 10  # no id given twice
    for r in (a, b):  # both see every subject (the follower through its reader of the topic)
        assert _until(lambda r=r: r.call("GET", "/subjects")[1] == sorted(ids)), r.call("GET", "/subjects")
        assert all(r.call("GET", f"/subjects/{s}/versions/1")[1]["id"] == i for s, i in ids.items())
    leader, follower = _leader(a, b)
    # config written through the follower lands on the leader
    assert follower.call("PUT", "/config/s1", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert _until(lambda: leader.call("GET", "/config/s1")[0] == 200)
    leader.stop(signal.SIGKILL)
    t0 = time.monotonic()
    # the survivor takes over once the dead leader's session expires (6 s here: the broker's
    # group.min.session.timeout.ms)
    st, body = _until(
        lambda: (lambda r: r if r[0] == 200 else None)(
            follower.call("POST", "/subjects/after/versions", {"schema": avro_record("After", ("g", "long"))})
        ),
        30,
    )
    assert st == 200 and body["id"] not in ids.values(), body
    took = time.monotonic() - t0
    assert took < 25, took
    # a new instance (a restart) replays the same state from the topic
    c = RegistryProcess(broker.bootstrap, topic).wait_ready()
    try:
        assert _until(lambda: c.call("GET", "/subjects")[1] == sorted([*ids, "after"]))
        assert c.call("GET", "/config/s1") == (200, {"compatibilityLevel": "NONE"})
        assert c.call("GET", "/schemas/ids/%d" % body["id"])[0] == 200
        # a write to it is forwarded to the surviving leader
        st, body2 = c.call(
            "POST", "/subjects/later/versions", {"schema": avro_record("Later", ("h", "string"))}
        )
        assert st == 200 and body2["id"] > body["id"]
    finally:
        c.stop()

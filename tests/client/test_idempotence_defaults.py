"""The producer's idempotence defaults follow the Java producer (KIP-679).

Idempotence is on by default; a conflicting acks / retries / max.in.flight.requests.per.connection turns it
off silently when enable.idempotence was not given, and is a ConfigError when enable.idempotence=true was
given explicitly.  Real broker: the idempotent producer obtains a producer id (InitProducerId), the
non-idempotent one never does, and both deliver.
"""

from __future__ import annotations

import time

import pytest

import moldau
from moldau.client import ConfigError, Consumer, TopicPartition
from moldau.client.config import resolve_config


def _values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    out: list[bytes] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 20
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(r.value for r in c.poll(0.5))
    return out


def test_default_producer_is_idempotent(broker, make_topic):
    topic = make_topic(1)
    with moldau.Producer(bootstrap_servers=broker.bootstrap) as p:
        assert p.config["enable.idempotence"] is True
        futs = [p.send(topic, b"d%d" % i, partition=0) for i in range(20)]
        p.flush()
        assert [f.result(10).offset for f in futs] == list(range(20))
        pid, epoch = p.producer_id
    assert pid >= 0 and epoch >= 0, "the default producer did not initialise a producer id"
    assert _values(broker.bootstrap, topic, 20) == [b"d%d" % i for i in range(20)]


def test_acks_1_produces_without_idempotence(broker, make_topic):
    topic = make_topic(1)
    with moldau.Producer(bootstrap_servers=broker.bootstrap, acks=1) as p:
        assert p.config["enable.idempotence"] is False
        futs = [p.send(topic, b"a%d" % i, partition=0) for i in range(20)]
        p.flush()
        assert [f.result(10).offset for f in futs] == list(range(20))
        assert p.producer_id == (-1, -1), "a non-idempotent producer asked for a producer id"
    assert _values(broker.bootstrap, topic, 20) == [b"a%d" % i for i in range(20)]


def test_acks_1_with_explicit_idempotence_is_refused(broker):
    with pytest.raises(ConfigError, match=r"enable\.idempotence=true needs acks=all"):
        moldau.Producer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=True)


@pytest.mark.parametrize("setting, needs", [
    ({"acks": 0}, "acks=all"),
    ({"acks": "1"}, "acks=all"),
    ({"retries": 0}, "retries > 0"),
    ({"max.in.flight.requests.per.connection": 6}, "max.in.flight.requests.per.connection <= 5"),
])
def test_conflicts_switch_idempotence_off_unless_explicit(setting, needs):
    base = {"bootstrap.servers": "127.0.0.1:9092"}
    assert resolve_config("producer", {**base, **setting}, {})["enable.idempotence"] is False
    for explicit in (True, "true"):
        with pytest.raises(ConfigError, match=f"enable.idempotence=true needs {needs}"):
            resolve_config("producer", {**base, **setting, "enable.idempotence": explicit}, {})
    assert resolve_config("producer", {**base, **setting, "enable.idempotence": False}, {})[
        "enable.idempotence"] is False


def test_without_conflicts_idempotence_stays_on():
    base = {"bootstrap.servers": "127.0.0.1:9092"}
    settings = ({}, {"acks": "all"}, {"acks": -1, "retries": 3, "max.in.flight.requests.per.connection": 5})
    for setting in settings:
        assert resolve_config("producer", {**base, **setting}, {})["enable.idempotence"] is True


def test_transactional_id_still_needs_idempotence():
    """As in Java: a transactional producer whose settings turn idempotence off is refused."""
    with pytest.raises(ConfigError, match="transactional.id needs enable.idempotence=true"):
        resolve_config("producer", {"bootstrap.servers": "127.0.0.1:9092", "acks": 1},
                       {"transactional_id": "t"})

"""Client quota store, Kafka's precedence and the throttle computation, on an injected clock."""

from __future__ import annotations

import json

import pytest

from moldau.broker.quotas import (
    FileQuotaStore,
    MemoryQuotaStore,
    QuotaError,
    QuotaManager,
    Rate,
    make_entity,
    user_of,
    validate_quota,
)
from moldau.protocol.errors import KafkaError


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def manager(clock: Clock | None = None, **quotas: dict[str, float]) -> QuotaManager:
    qm = QuotaManager(MemoryQuotaStore(), window_num=11, window_s=1.0, clock=clock or Clock())
    return qm


def E(**parts: str | None) -> tuple:
    return make_entity((k.replace("_", "-"), v) for k, v in parts.items())


def test_precedence_most_specific_first_per_key() -> None:
    qm = manager()
    levels = [
        (E(user="u", client_id="c"), 1.0),
        (E(user="u", client_id=None), 2.0),
        (E(user="u"), 3.0),
        (E(user=None, client_id="c"), 4.0),
        (E(user=None, client_id=None), 5.0),
        (E(user=None), 6.0),
        (E(client_id="c"), 7.0),
        (E(client_id=None), 8.0),
    ]
    qm.alter([(e, {"producer_byte_rate": v}) for e, v in levels])
    # remove the most specific level one at a time: the next one takes over
    for entity, value in levels:
        got = qm.quota_for("producer_byte_rate", "u", "c")
        assert got is not None and got[0] == value
        qm.alter([(entity, {"producer_byte_rate": None})])
    assert qm.quota_for("producer_byte_rate", "u", "c") is None
    # keys resolve independently: a user-level consumer quota does not hide a client-level producer quota
    qm.alter([(E(user="u"), {"consumer_byte_rate": 10.0}), (E(client_id="c"), {"producer_byte_rate": 20.0})])
    assert qm.quota_for("consumer_byte_rate", "u", "c") == (10.0, ("u", ""))
    assert qm.quota_for("producer_byte_rate", "u", "c") == (20.0, ("", "c"))
    assert qm.quota_for("producer_byte_rate", "other", "c2") is None


def test_sharing_group_of_a_user_quota() -> None:
    clock = Clock()
    qm = manager(clock)
    qm.alter([(E(user="u"), {"producer_byte_rate": 1000.0})])
    # two clients of the same user share one budget; another user is not affected
    assert qm.record("producer_byte_rate", "u", "a", 600, clock.t) == 0
    assert qm.record("producer_byte_rate", "u", "b", 600, clock.t) > 0
    assert qm.record("producer_byte_rate", "v", "a", 5000, clock.t) == 0


def test_throttle_time_from_the_token_bucket() -> None:
    clock = Clock()
    qm = manager(clock)
    qm.alter([(E(client_id="c"), {"producer_byte_rate": 1000.0})])
    # a new client starts with one window's worth (1 s at 1000 B/s)
    assert qm.record("producer_byte_rate", "ANONYMOUS", "c", 1000, clock.t) == 0
    clock.t += 0.5  # +500 credit; 2000 more: 1500 in debt = 1.5 s at the quota
    assert qm.record("producer_byte_rate", "ANONYMOUS", "c", 2000, clock.t) == 1500
    clock.t += 4.5  # 3000 credit back
    assert qm.record("producer_byte_rate", "ANONYMOUS", "c", 1, clock.t) == 0
    # capped at the full window (num * size)
    assert qm.record("producer_byte_rate", "ANONYMOUS", "c", 10**9, clock.t) == 11_000


def test_idle_client_bursts_at_most_the_full_window() -> None:
    clock = Clock()
    qm = manager(clock)
    qm.alter([(E(client_id="c"), {"producer_byte_rate": 1000.0})])
    assert qm.record("producer_byte_rate", "ANONYMOUS", "c", 1, clock.t) == 0
    clock.t += 1000  # idle: the credit stops at 11 windows' worth
    assert qm.record("producer_byte_rate", "ANONYMOUS", "c", 11_000, clock.t) == 0
    assert qm.record("producer_byte_rate", "ANONYMOUS", "c", 500, clock.t) == 500


@pytest.mark.parametrize("greedy_request", [10_000, 100_000, 1_000_000])
def test_greedy_client_is_held_at_the_quota_over_any_10s(greedy_request: int) -> None:
    """A client that sends whenever it is not throttled gets the quota in every 10 s window, within 5 % and
    one request."""
    clock = Clock()
    qm = manager(clock)
    qm.alter([(E(client_id="c"), {"producer_byte_rate": 1e6})])
    start = clock.t
    sent: list[tuple[float, int]] = []
    while clock.t < start + 40:
        ms = qm.record("producer_byte_rate", "ANONYMOUS", "c", greedy_request, clock.t)
        sent.append((clock.t - start, greedy_request))
        clock.t += 0.005 + ms / 1000
    for a in range(2, 30, 3):  # after the first window's worth sent at once
        total = sum(n for t, n in sent if a <= t < a + 10)
        slack = greedy_request / 10  # one request more or less in the window
        assert 0.95e6 - slack <= total / 10 <= 1.05e6 + slack, (a, total)


def test_rate_purges_old_samples() -> None:
    r = Rate(num=3, window_s=1.0)
    r.record(300, 0.0)
    assert r.measure(0.5) == 300
    r.record(300, 1.2)
    assert r.measure(2.0) == pytest.approx(600 / 2.0)
    assert r.measure(3.5) == pytest.approx(300 / 2.5)  # the first sample is out of the 3 windows
    assert r.measure(10.0) == 0


def test_request_throttle_picks_the_key_by_api() -> None:
    clock = Clock()
    qm = manager(clock)
    qm.alter(
        [
            (
                E(user="alice"),
                {"producer_byte_rate": 100.0, "consumer_byte_rate": 100.0, "request_percentage": 10.0},
            )
        ]
    )
    assert qm.request_throttle("User:alice", "x", 0, 50, 10_000, 0.0) == 0  # produce: request bytes
    assert qm.request_throttle("User:alice", "x", 1, 10_000, 50, 0.0) == 0  # fetch: response bytes
    assert qm.request_throttle("User:alice", "x", 1, 10, 1000, 0.0) > 0
    assert qm.request_throttle("User:alice", "x", 3, 10, 10, 0.5) > 0  # 50 % of a thread
    assert qm.request_throttle("User:alice", "x", 18, 10, 10, 5.0) == 0  # ApiVersions is exempt
    assert qm.request_throttle("User:bob", "x", 0, 10**6, 10, 0.0) == 0
    assert user_of("User:alice") == "alice" and user_of(None) == "ANONYMOUS"


def test_entity_and_key_validation() -> None:
    with pytest.raises(QuotaError):
        make_entity([("user", "a"), ("user", "b")])
    with pytest.raises(QuotaError):
        make_entity([("ip", "1.2.3.4"), ("user", "a")])
    with pytest.raises(QuotaError):
        make_entity([("group", "a")])
    with pytest.raises(QuotaError):
        make_entity([("user", "")])
    with pytest.raises(QuotaError):
        validate_quota(make_entity([("ip", None)]), "producer_byte_rate", 1.0)
    with pytest.raises(QuotaError):
        validate_quota(make_entity([("user", None)]), "connection_creation_rate", 1.0)
    with pytest.raises(QuotaError):
        validate_quota(make_entity([("user", None)]), "producer_byte_rate", -1.0)
    validate_quota(make_entity([("ip", "::1")]), "connection_creation_rate", 3.0)


def test_describe_filters() -> None:
    qm = manager()
    qm.alter(
        [
            (E(user="a", client_id="c"), {"producer_byte_rate": 1.0}),
            (E(user="a"), {"producer_byte_rate": 2.0}),
            (E(user=None), {"producer_byte_rate": 3.0}),
            (E(client_id="c"), {"producer_byte_rate": 4.0}),
        ]
    )
    assert set(qm.describe([("user", 0, "a")], strict=False)) == {E(user="a", client_id="c"), E(user="a")}
    assert set(qm.describe([("user", 0, "a")], strict=True)) == {E(user="a")}
    assert set(qm.describe([("user", 1, None)], strict=False)) == {E(user=None)}
    assert set(qm.describe([("client-id", 2, None)], strict=True)) == {E(client_id="c")}
    # "any specified" includes the type's default, as Kafka's ClientQuotasImage
    assert set(qm.describe([("user", 2, None)], strict=True)) == {E(user="a"), E(user=None)}
    assert len(qm.describe([], strict=False)) == 4
    with pytest.raises(QuotaError):
        qm.describe([("user", 0, "a"), ("user", 0, "b")], strict=False)


def test_file_store_persists_and_skips_bad_entries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = FileQuotaStore(str(tmp_path))
    store.alter([(E(user="a"), {"producer_byte_rate": 5.0}), (E(ip=None), {"connection_creation_rate": 3.0})])
    again = FileQuotaStore(str(tmp_path))
    assert again.all() == {
        E(user="a"): {"producer_byte_rate": 5.0},
        E(ip=None): {"connection_creation_rate": 3.0},
    }
    again.alter([(E(user="a"), {"producer_byte_rate": None})])
    assert FileQuotaStore(str(tmp_path)).all() == {E(ip=None): {"connection_creation_rate": 3.0}}
    doc = json.loads((tmp_path / "__moldau_quotas.json").read_text())
    doc["quotas"].append({"entity": [["nosuch", "x"]], "values": {"producer_byte_rate": 1}})
    (tmp_path / "__moldau_quotas.json").write_text(json.dumps(doc))
    assert FileQuotaStore(str(tmp_path)).all() == {E(ip=None): {"connection_creation_rate": 3.0}}


def test_per_client_state_is_bounded_and_expires() -> None:
    """Client ids are the clients' choice: distinct ones must not grow the broker's quota state without bound.
    A group unused for an hour goes (Kafka's quota sensor expiry), the least recently used go first beyond
    the count or the characters of names held, and a client in use keeps its bucket (a throttled client does
    not get a fresh burst because others came and went)."""
    from moldau.broker.quotas import CONTROLLER_MUTATION_RATE, SENSOR_EXPIRY_S

    MAX_SENSORS, MAX_SENSOR_NAME_CHARS = 2000, 1 << 20  # the broker's: 100,000 and 16 Mi (same code, slower)
    clock = Clock()
    qm = QuotaManager(MemoryQuotaStore(), window_num=11, window_s=1.0, clock=clock, max_groups=MAX_SENSORS,
                      max_name_chars=MAX_SENSOR_NAME_CHARS)
    qm.alter([(E(client_id=None), {"producer_byte_rate": 1000.0, CONTROLLER_MUTATION_RATE: 10.0})])
    assert qm.record("producer_byte_rate", "u", "greedy", 50_000) > 0  # deep in debt: throttled
    qm.mutation_quota(None, "greedy", 19, 6).record(500)
    for i in range(MAX_SENSORS + 5000):
        qm.record("producer_byte_rate", "u", f"c{i}", 1)
        qm.mutation_quota(None, f"c{i}", 19, 6).record(1)
        if i % 100 == 0:  # the greedy client keeps using its quota meanwhile
            clock.t += 0.001
            assert qm.record("producer_byte_rate", "u", "greedy", 1) > 0
            q = qm.mutation_quota(None, "greedy", 19, 6)
            with pytest.raises(KafkaError):
                q.record(1)
    assert len(qm._sensors) <= MAX_SENSORS and len(qm._mutation_buckets) <= MAX_SENSORS
    assert len(qm._resolved) <= MAX_SENSORS
    # long client ids: the characters held are bounded too
    long_id = "x" * 32000
    for i in range(2 * MAX_SENSOR_NAME_CHARS // len(long_id)):
        qm.record("producer_byte_rate", "u", f"{i}{long_id}", 1)
    for table in (qm._sensors, qm._resolved, qm._mutation_buckets):
        assert table.chars <= MAX_SENSOR_NAME_CHARS
    # an hour without use: gone, with the next request of anyone
    clock.t += SENSOR_EXPIRY_S + 1
    qm.record("producer_byte_rate", "u", "late", 1)
    assert len(qm._sensors) == 1 and len(qm._resolved) == 1
    qm.mutation_quota(None, "late", 19, 6).record(1)
    assert len(qm._mutation_buckets) == 1

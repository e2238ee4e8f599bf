"""KIP-599's controller mutation quota (``controller_mutation_rate``) and the request bounds of
moldau.broker.limits, on an injected clock: the figures of Kafka's StrictControllerMutationQuotaTest /
PermissiveControllerMutationQuotaTest (quota 10/s, 10 samples of 1 s: a burst of 100)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from moldau.broker.limits import (
    MAX_PARTITIONS_PER_BATCH,
    PartitionCeilings,
    check_partitions_per_request,
    check_records_per_request,
    requested_partitions,
)
from moldau.broker.quotas import (
    CONTROLLER_MUTATION_RATE,
    MemoryQuotaStore,
    QuotaManager,
    make_entity,
)
from moldau.protocol.errors import ErrorCode, KafkaError


class Clock:
    def __init__(self) -> None:
        self.t = 5000.0

    def __call__(self) -> float:
        return self.t


def manager(clock: Clock, rate: float = 10.0) -> QuotaManager:
    qm = QuotaManager(MemoryQuotaStore(), window_num=10, window_s=1.0, clock=clock)
    qm.alter([(make_entity([("user", "alice")]), {CONTROLLER_MUTATION_RATE: rate})])
    return qm


def test_strict_accepts_while_tokens_remain_then_refuses_with_the_time_to_refill() -> None:
    clock = Clock()
    qm = manager(clock)
    q = qm.mutation_quota("User:alice", "c1", 19, 6)  # CreateTopics v6: strict
    assert q.strict
    q.record(90)  # a full bucket of 100: 10 left
    assert q.throttle_time_ms == 0
    q.record(90)  # accepted whole although it goes to -80: the bucket was not negative
    assert q.throttle_time_ms == 0
    with pytest.raises(KafkaError) as e:
        q.record(1)  # refused, nothing charged
    assert e.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert q.throttle_time_ms == 8000  # -(-80) / 10 per second
    clock.t += 1.0
    assert q.throttle_time_ms == 7000  # the recorded throttle, less the time since
    clock.t += 7.0
    q2 = qm.mutation_quota("User:alice", "c1", 19, 6)
    q2.record(5)  # back to 0 tokens: accepted
    assert q2.throttle_time_ms == 0


def test_permissive_accepts_everything_and_throttles_the_deficit() -> None:
    clock = Clock()
    qm = manager(clock)
    q = qm.mutation_quota("User:alice", "c1", 19, 5)  # CreateTopics v5: permissive
    assert not q.strict
    q.record(90)
    assert q.throttle_time_ms == 0
    q.record(90)
    assert q.throttle_time_ms == 8000
    q.record(20)
    assert q.throttle_time_ms == 10000


@pytest.mark.parametrize(("api_key", "strict_from"), [(19, 6), (20, 5), (37, 3)])
def test_strict_from_kafkas_versions(api_key: int, strict_from: int) -> None:
    qm = manager(Clock())
    assert not qm.mutation_quota("User:alice", "c", api_key, strict_from - 1).strict
    assert qm.mutation_quota("User:alice", "c", api_key, strict_from).strict


def test_no_quota_is_unbounded_and_users_share_their_bucket() -> None:
    clock = Clock()
    qm = manager(clock)
    free = qm.mutation_quota("User:bob", "c", 19, 7)
    assert free.unbounded
    for _ in range(100):
        free.record(10_000)
    assert free.throttle_time_ms == 0
    a = qm.mutation_quota("User:alice", "one", 19, 7)
    a.record(150)
    b = qm.mutation_quota("User:alice", "other", 19, 7)  # a user quota: one budget for all its clients
    with pytest.raises(KafkaError):
        b.record(1)


def test_bucket_refills_to_the_burst_only() -> None:
    clock = Clock()
    qm = manager(clock)
    q = qm.mutation_quota("User:alice", "c", 37, 3)
    q.record(100)
    clock.t += 3600  # an hour idle: back to 100, not more
    q.record(101)
    with pytest.raises(KafkaError):
        qm.mutation_quota("User:alice", "c", 37, 3).record(1)


def _topic(num_partitions: int = -1, assignments: int = 0) -> SimpleNamespace:
    return SimpleNamespace(num_partitions=num_partitions, assignments=[object()] * assignments)


def test_partitions_per_request_counted_as_kafka() -> None:
    # assignments count, -1 is the broker default, other non-positive values count nothing
    topics = [_topic(5000), _topic(-1), _topic(0), _topic(-7), _topic(-1, assignments=3)]
    assert requested_partitions(topics, 4) == 5007
    check_partitions_per_request(MAX_PARTITIONS_PER_BATCH)
    for total in (MAX_PARTITIONS_PER_BATCH + 1, 9_568_257):
        with pytest.raises(KafkaError) as e:
            check_partitions_per_request(total)
        assert e.value.code == ErrorCode.POLICY_VIOLATION
        assert e.value.args[0] == "Excessively large number of partitions per request."
    check_records_per_request(10_000)
    with pytest.raises(KafkaError) as e:
        check_records_per_request(10_001)
    assert e.value.code == ErrorCode.POLICY_VIOLATION


def test_partition_ceilings() -> None:
    config = {"max.topic.partitions": 100, "max.broker.partitions": 300}
    existing = [SimpleNamespace(num_partitions=50, replication_factor=3) for _ in range(4)]  # 600 replicas
    c = PartitionCeilings(config, existing, brokers=3)  # 200 per broker
    with pytest.raises(KafkaError) as e:
        c.check("t", 101, 101)
    assert e.value.code == ErrorCode.POLICY_VIOLATION and "max.topic.partitions" in e.value.args[0]
    c.check("t", 100, 300)  # 900 replicas over 3 brokers: 300 each
    c.add(300)
    with pytest.raises(KafkaError) as e:
        c.check("u", 1, 1)
    assert "max.broker.partitions" in e.value.args[0]

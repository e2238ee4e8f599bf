"""The error-code table and exceptions."""

from __future__ import annotations

import pytest

from moldau.protocol import errors
from moldau.protocol.errors import ErrorCode, KafkaError, RetriableError


def test_table_is_complete_and_contiguous() -> None:
    codes = [int(c) for c in ErrorCode]
    assert codes == list(range(-1, 134))
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
    assert ErrorCode.REBOOTSTRAP_REQUIRED == 129


@pytest.mark.parametrize("code,name,retriable", [
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True), (6, "NOT_LEADER_OR_FOLLOWER", True),
    (7, "REQUEST_TIMED_OUT", True), (14, "COORDINATOR_LOAD_IN_PROGRESS", True),
    (22, "ILLEGAL_GENERATION", False), (25, "UNKNOWN_MEMBER_ID", False), (35, "UNSUPPORTED_VERSION", False),
    (36, "TOPIC_ALREADY_EXISTS", False), (51, "CONCURRENT_TRANSACTIONS", True),
    (50, "INVALID_TRANSACTION_TIMEOUT", False), (87, "INVALID_RECORD", False),
    (100, "UNKNOWN_TOPIC_ID", True),
    (120, "TRANSACTION_ABORTABLE", False),
])
def test_known_codes(code: int, name: str, retriable: bool) -> None:
    e = ErrorCode(code)
    assert e.name == name and e.code == code and e.retriable is retriable and e.message


def test_matches_kafka_python_where_it_knows_the_code() -> None:
    kerr = pytest.importorskip("kafka.errors")
    import inspect

    # kafka-python keeps some older or shortened names
    renamed = {
        -1: "UNKNOWN",
        6: "NOT_LEADER_FOR_PARTITION",
        10: "MESSAGE_SIZE_TOO_LARGE",
        17: "INVALID_TOPIC",
        39: "INVALID_REPLICATION_ASSIGNMENT",
    }
    checked = 0
    for _, c in inspect.getmembers(kerr, inspect.isclass):
        if issubclass(c, kerr.BrokerResponseError) and c.errno:
            ours = ErrorCode(c.errno)
            assert c.message in (ours.name, renamed.get(c.errno)), c
            if c.errno != 2:  # CORRUPT_MESSAGE is a RetriableException in Kafka; kafka-python says not
                assert ours.retriable == c.retriable, ours
            checked += 1
    assert checked > 120


def test_exceptions() -> None:
    with pytest.raises(errors.UnknownTopicOrPartitionError) as info:
        KafkaError.raise_for(3, "no such topic")
    e = info.value
    assert isinstance(e, RetriableError) and e.retriable and e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "no such topic" in str(e) and "UNKNOWN_TOPIC_OR_PARTITION" in str(e)
    KafkaError.raise_for(0)  # no-op
    err = KafkaError.for_code(36)
    assert type(err).__name__ == "TopicAlreadyExistsError" and not err.retriable
    odd = KafkaError.for_code(31000)
    assert odd.code == ErrorCode.UNKNOWN_SERVER_ERROR and odd.raw_code == 31000
    assert ErrorCode.of(31000) is ErrorCode.UNKNOWN_SERVER_ERROR

"""__transaction_state record formats, byte for byte against Kafka's JSON schemas.

The independent implementation is kafka-python's generic JSON-schema codec (``ApiData``: an int16 version
followed by the struct, exactly how Kafka's coordinators prefix their records), fed with Kafka's own
TransactionLogKey.json / TransactionLogValue.json (apache/kafka,
transaction-coordinator/src/main/resources/common/message/, license header stripped). Kafka's generator
defaults a field's ``versions`` to its ``taggedVersions``; kafka-python wants it spelled out, so the loader
adds it, and it reads "coordinator-*" types as plain data structs.
"""

from __future__ import annotations

import importlib
import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.broker.txn.state import (
    STATE_NAMES,
    RecordFormatError,
    TransactionLogValue,
    TxnMetadata,
    TxnState,
    TxnTransit,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    group_partitions,
    partition_for,
)

KEY_JSON = {
    "type": "data",
    "name": "TransactionLogKey",
    "validVersions": "0",
    "flexibleVersions": "none",
    "fields": [{"name": "TransactionalId", "type": "string", "versions": "0"}],
}

VALUE_JSON = {
    "apiKey": 0,
    "type": "coordinator-value",
    "name": "TransactionLogValue",
    "validVersions": "0-1",
    "flexibleVersions": "1+",
    "fields": [
        {"name": "ProducerId", "type": "int64", "versions": "0+"},
        {"name": "PreviousProducerId", "type": "int64", "taggedVersions": "1+", "tag": 0, "default": -1},
        {"name": "NextProducerId", "type": "int64", "taggedVersions": "1+", "tag": 1, "default": -1},
        {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
        {"name": "TransactionTimeoutMs", "type": "int32", "versions": "0+"},
        {"name": "TransactionStatus", "type": "int8", "versions": "0+"},
        {"name": "TransactionPartitions", "type": "[]PartitionsSchema", "versions": "0+",
         "nullableVersions": "0+", "fields": [
             {"name": "Topic", "type": "string", "versions": "0+"},
             {"name": "PartitionIds", "type": "[]int32", "versions": "0+"}]},
        {"name": "TransactionLastUpdateTimestampMs", "type": "int64", "versions": "0+"},
        {"name": "TransactionStartTimestampMs", "type": "int64", "versions": "0+"},
        {"name": "ClientTransactionVersion", "type": "int16", "default": 0, "taggedVersions": "1+", "tag": 2},
    ],
}


@pytest.fixture(scope="module")
def kafka_schemas(tmp_path_factory: pytest.TempPathFactory):
    """kafka-python ApiData classes built from Kafka's JSON definitions."""
    base = tmp_path_factory.mktemp("txnschemas")
    pkg = base / "moldau_txn_json_schemas"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "TransactionLogKey.json").write_text(json.dumps(KEY_JSON))
    (pkg / "TransactionLogValue.json").write_text(json.dumps(VALUE_JSON))
    sys.path.insert(0, str(base))
    importlib.invalidate_caches()
    try:
        from kafka.protocol.api_data import ApiData

        def patch(_cls, j):
            j["type"] = "data"
            for f in j["fields"]:
                f.setdefault("versions", f.get("taggedVersions"))
            return j

        class TransactionLogKey(ApiData, load_json="moldau_txn_json_schemas"):
            json_patch = classmethod(patch)

        class TransactionLogValue(ApiData, load_json="moldau_txn_json_schemas"):
            json_patch = classmethod(patch)

        yield TransactionLogKey, TransactionLogValue
    finally:
        sys.path.remove(str(base))


def _kafka_value(cls, v: TransactionLogValue):
    parts = None
    if v.transaction_partitions is not None:
        parts = [
            cls.PartitionsSchema(topic=t, partition_ids=list(ids)) for t, ids in v.transaction_partitions
        ]
    kw = {"producer_id": v.producer_id, "producer_epoch": v.producer_epoch,
          "transaction_timeout_ms": v.transaction_timeout_ms, "transaction_status": v.transaction_status,
          "transaction_partitions": parts,
          "transaction_last_update_timestamp_ms": v.transaction_last_update_timestamp_ms,
          "transaction_start_timestamp_ms": v.transaction_start_timestamp_ms}
    if v.version >= 1:
        kw.update(previous_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
                  client_transaction_version=v.client_transaction_version)
    return cls(version=v.version, **kw)


def test_key_is_kafkas_bytes(kafka_schemas):
    key_cls, _ = kafka_schemas
    for txn_id in ("tx-1", "", "ünïcode-id", "x" * 300):
        ours = encode_key(txn_id)
        assert ours == bytes(key_cls(version=0, transactional_id=txn_id).encode(version=0))
        assert ours[:2] == b"\x00\x00"  # the key's version prefix
        assert decode_key(ours) == txn_id


def test_value_v0_known_bytes():
    v = TransactionLogValue(5, 2, 60000, 0, None, 10, -1)
    assert encode_value(v).hex() == (
        "0000" "0000000000000005" "0002" "0000ea60" "00" "ffffffff" "000000000000000a" "ffffffffffffffff")


samples = [
    TransactionLogValue(5, 2, 60000, TxnState.EMPTY, None, 10, -1),
    TransactionLogValue(7, 0, 1000, TxnState.ONGOING, [("a", [0, 3]), ("b-topic", [1])], 20, 19),
    TransactionLogValue(7, 0, 1000, TxnState.PREPARE_COMMIT, [("__consumer_offsets", [17])], 21, 19),
    TransactionLogValue(7, 1, 1000, TxnState.COMPLETE_ABORT, [], 22, 19),
    TransactionLogValue(9, 4, 900000, TxnState.ONGOING, [("t", [0])], 5, 4, version=1),
    TransactionLogValue(9, 5, 900000, TxnState.PREPARE_ABORT, [("t", [0, 1, 2])], 5, 4,
    previous_producer_id=8,
                        next_producer_id=12, client_transaction_version=2, version=1),
    TransactionLogValue(9, 0, 900000, TxnState.EMPTY, None, 5, -1, client_transaction_version=2, version=1),
]


@pytest.mark.parametrize(
    "v", samples, ids=lambda v: f"v{v.version}-{STATE_NAMES[TxnState(v.transaction_status)]}"
)
def test_value_is_kafkas_bytes(kafka_schemas, v):
    _, value_cls = kafka_schemas
    ours = encode_value(v)
    theirs = bytes(_kafka_value(value_cls, v).encode(version=v.version))
    assert ours == theirs
    back = decode_value(theirs)
    assert back == v
    k = value_cls.decode(ours)
    assert k.producer_id == v.producer_id and k.transaction_status == v.transaction_status


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
values = st.builds(
    TransactionLogValue,
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 32767),
    transaction_timeout_ms=st.integers(1, 2**31 - 1),
    transaction_status=st.sampled_from([s.value for s in TxnState]),
    transaction_partitions=st.none() | st.lists(st.tuples(names, st.lists(st.integers(0, 2**31 - 1),
                                                                           max_size=5)), max_size=4),
    transaction_last_update_timestamp_ms=st.integers(-1, 2**62),
    transaction_start_timestamp_ms=st.integers(-1, 2**62),
    previous_producer_id=st.integers(-1, 2**63 - 1),
    next_producer_id=st.integers(-1, 2**63 - 1),
    client_transaction_version=st.integers(0, 2),
    version=st.just(1),
)


@given(values)
def test_value_v1_property_round_trip(v):
    assert decode_value(encode_value(v)) == v


@given(v=values)
def test_value_v1_property_matches_kafka(kafka_schemas, v):
    _, value_cls = kafka_schemas
    assert encode_value(v) == bytes(_kafka_value(value_cls, v).encode(version=1))


def test_unknown_tags_are_kept():
    v = TransactionLogValue(1, 0, 100, 1, [("t", [0])], 1, 1, version=1, unknown_tags={9: b"\x01\x02"})
    back = decode_value(encode_value(v))
    assert back.unknown_tags == {9: b"\x01\x02"}


def test_bad_records_raise():
    with pytest.raises(RecordFormatError):
        decode_value(b"\x00\x05" + b"\x00" * 30)  # unknown version
    with pytest.raises(RecordFormatError):
        decode_value(b"\x00\x00\x00")  # truncated
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x01\x00\x00")


def test_transit_records_follow_kafka():
    """Empty writes null partitions, Complete* an empty list; V1 clients get value v0, V2 clients v1."""
    md = TxnMetadata("tx", 42, 60000, 1000, producer_epoch=3)
    empty = TxnTransit(42, -1, -1, 4, -1, 60000, TxnState.EMPTY, frozenset(), -1, 1000).to_value()
    assert empty.transaction_partitions is None and empty.version == 0
    t = md.prepare_add_partitions([("b", 1), ("a", 0), ("a", 2)], 2000)
    v = t.to_value()
    assert (
        v.transaction_partitions == [("a", [0, 2]), ("b", [1])] and v.transaction_start_timestamp_ms == 2000
    )
    md.complete_transition(t)
    t = md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 3000)
    md.complete_transition(t)
    done = md.prepare_complete(4000).to_value()
    assert done.transaction_status == TxnState.COMPLETE_COMMIT and done.transaction_partitions == []
    tv2 = md.prepare_complete(4000)
    tv2.client_transaction_version = 2
    assert tv2.to_value().version == 1


def test_partition_for_matches_java_hash():
    # abs(String.hashCode()) % 50, values computed with Java's hash
    assert partition_for("my-txn", 50) == abs(_java_hash("my-txn")) % 50
    assert partition_for("", 50) == 0
    assert group_partitions([("t", 2), ("t", 1)]) == [("t", [1, 2])]


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def test_load_from_value_round_trip():
    v = TransactionLogValue(7, 3, 1000, TxnState.ONGOING, [("a", [0, 3])], 20, 19)
    md = TxnMetadata.from_value("tx", v)
    assert md.state == TxnState.ONGOING and md.partitions == {("a", 0), ("a", 3)}
    assert md.producer_id == 7 and md.producer_epoch == 3 and md.txn_start_ms == 19
    with pytest.raises(RecordFormatError):
        TxnMetadata.from_value("tx", TransactionLogValue(7, 3, 1000, 42, None, 1, 1))


def test_state_names_are_kafkas():
    assert [STATE_NAMES[s] for s in TxnState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    assert TxnState.from_name("PrepareCommit") == TxnState.PREPARE_COMMIT
    assert TxnState.from_name("Nope") is None

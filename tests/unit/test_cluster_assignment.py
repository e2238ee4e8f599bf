"""Replica assignment (moldau.broker.cluster.assignment) against Kafka's AdminUtils rules and its documented
example, and the ZooKeeper JSON codecs (moldau.broker.cluster.zkdata) against Kafka's znode formats."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from moldau.broker.cluster import zkdata as zd
from moldau.broker.cluster.assignment import assign_replicas
from moldau.protocol.errors import ErrorCode, KafkaError


def test_kafka_documented_example_five_brokers_ten_partitions():
    # AdminUtils' example (start index 0, shift 0): first replicas round-robin, followers shifted, the shift
    # growing once the partitions wrap around the brokers
    got = assign_replicas([(b, None) for b in range(5)], 10, 3, start_index=0)
    assert got == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                   5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_random_start_spreads_leaders_and_replicas_evenly():
    for seed in range(20):
        got = assign_replicas([(1, None), (2, None), (3, None)], 6, 3, rng=random.Random(seed))
        leaders = [r[0] for r in got.values()]
        assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]
        assert all(sorted(r) == [1, 2, 3] for r in got.values())


def test_rack_aware_puts_replicas_on_different_racks():
    brokers = [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]
    rack = dict(brokers)
    for seed in range(10):
        got = assign_replicas(brokers, 12, 3, rng=random.Random(seed))
        for replicas in got.values():
            assert len(set(replicas)) == 3
            assert len({rack[b] for b in replicas}) == 3


def test_create_partitions_continues_numbering():
    got = assign_replicas([(1, None), (2, None), (3, None)], 2, 2, start_partition=4)
    assert sorted(got) == [4, 5]


def test_errors_have_kafka_codes():
    with pytest.raises(KafkaError) as e:
        assign_replicas([(1, None), (2, None)], 1, 3)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaError) as e:
        assign_replicas([(1, None)], 0, 1)
    assert e.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaError) as e:  # racks on some brokers only
        assign_replicas([(1, "a"), (2, None)], 1, 2)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_znode_json_round_trips_in_kafka_formats():
    info = zd.BrokerInfo(3, [zd.EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT")], "r1", 1700000000000)
    doc = json.loads(info.encode())
    assert doc["version"] == 5 and doc["endpoints"] == ["PLAINTEXT://h:9092"] and doc["rack"] == "r1"
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    back = zd.BrokerInfo.decode(3, info.encode())
    assert back.endpoints == info.endpoints and back.rack == "r1"
    tid = uuid.UUID("c3ff63e3-d924-4933-81e9-3e081c701be0")
    a = zd.TopicAssignment(tid, {0: [1, 2, 3], 1: [2, 3, 1]})
    doc = json.loads(a.encode())
    assert doc["version"] == 3 and doc["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
    assert doc["topic_id"] == "w_9j49kkSTOB6T4IHHAb4A"  # Kafka's url-safe base64 without padding
    assert zd.TopicAssignment.decode(a.encode()) == a
    st = zd.LeaderAndIsr(2, 7, [2, 3], 4, zk_version=9)
    doc = json.loads(st.encode())
    assert doc == {"controller_epoch": 4, "leader": 2, "version": 1, "leader_epoch": 7, "isr": [2, 3]}
    assert zd.LeaderAndIsr.decode(st.encode(), 9) == st
    assert zd.decode_controller(zd.encode_controller(5)) == 5
    assert zd.decode_isr_change(zd.encode_isr_change([("t", 1)])) == [("t", 1)]

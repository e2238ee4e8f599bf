"""Admin APIs from confluent-kafka's AdminClient and kafka-python's KafkaAdminClient.

Topics (create / delete / describe), partitions (create, then produce to and read from the new one),
configs (describe with sources and defaults, incremental SET/DELETE/APPEND/SUBTRACT, legacy full
replacement), error codes, and DeleteRecords.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from harness.kafkautil import (
    admin,
    consume_confluent,
    create_topic,
    produce_confluent,
    replication_factor,
    unique_topic,
    wait_for_topic,
    watermarks,
)

T = 15  # seconds for every admin future

CREATE_PARTITIONS_GAP = pytest.mark.tansu_gap("tansu does not implement CreatePartitions")
VALIDATION_GAP = pytest.mark.tansu_gap("tansu does not validate topic names, partition counts, config keys")
DESCRIBE_GAP = pytest.mark.tansu_gap(
    "tansu's DescribeConfigs lists only explicitly set entries, reported as DEFAULT_CONFIG"
)
LEGACY_ALTER_GAP = pytest.mark.tansu_gap("tansu does not implement (legacy) AlterConfigs")
DELETE_RECORDS_GAP = pytest.mark.tansu_gap("tansu does not implement DeleteRecords")


def _err(fut) -> KafkaError:
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=T)
    return ei.value.args[0]


def _topic_configs(bootstrap: str, topic: str) -> dict:
    res = ConfigResource(ResourceType.TOPIC, topic)
    a = admin(bootstrap)  # keep a reference: a collected client cancels its futures (_DESTROY)
    return a.describe_configs([res], request_timeout=T)[res].result(timeout=T)


# ------------------------------------------------------------------------------------------------
# confluent-kafka AdminClient


def test_create_describe_delete_topic(broker):
    a = admin(broker.bootstrap)
    name = unique_topic("admin-cdd")
    rf = replication_factor()  # one replica on each broker of the test cluster
    assert a.create_topics([NewTopic(name, 3, rf)], request_timeout=T)[name].result(timeout=T) is None
    wait_for_topic(broker.bootstrap, name, 3)

    desc = a.describe_topics(TopicCollection([name]), request_timeout=T)[name].result(timeout=T)
    assert desc.name == name
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    for p in desc.partitions:
        assert p.leader is not None and p.leader.id >= 0
        assert len(p.replicas) == rf and p.replicas[0].id == p.leader.id  # the preferred replica leads
        assert sorted(r.id for r in p.isr) == sorted(r.id for r in p.replicas)

    err = _err(a.create_topics([NewTopic(name, 3, 1)], request_timeout=T)[name])
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS

    assert a.delete_topics([name], request_timeout=T)[name].result(timeout=T) is None
    # gone from Metadata: at once on moldau; a Kafka broker's metadata cache follows its controller a
    # moment after DeleteTopics returned
    deadline = time.monotonic() + 10
    while name in a.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{name} still in Metadata 10 s after DeleteTopics"
        time.sleep(0.2)
    err = _err(a.delete_topics([name], request_timeout=T)[name])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_deleted_topic_can_be_recreated_empty(broker):
    name = create_topic(broker.bootstrap, unique_topic("admin-recreate"), 1)
    produce_confluent(broker.bootstrap, name, [dict(value=b"old-%d" % i, partition=0) for i in range(5)])
    a = admin(broker.bootstrap)
    a.delete_topics([name], request_timeout=T)[name].result(timeout=T)
    create_topic(broker.bootstrap, name, 2)
    produce_confluent(broker.bootstrap, name, [dict(value=b"new", partition=1)])
    recs = consume_confluent(broker.bootstrap, name, 2, 1)
    assert [(r.partition, r.offset, r.value) for r in recs] == [(1, 0, b"new")]


@VALIDATION_GAP
@pytest.mark.parametrize("bad", ["bad name!", "sl/ash", ".", "..", "x" * 250, "t\u00e9"])
def test_invalid_topic_name(broker, bad):
    a = admin(broker.bootstrap)
    err = _err(a.create_topics([NewTopic(bad, 1, 1)], request_timeout=T)[bad])
    assert err.code() == KafkaError.TOPIC_EXCEPTION, err  # INVALID_TOPIC_EXCEPTION (17)
    assert bad not in a.list_topics(timeout=10).topics


@VALIDATION_GAP
def test_invalid_partitions_and_replication(broker, kind):
    a = admin(broker.bootstrap)
    name = unique_topic("admin-badparts")
    err = _err(a.create_topics([NewTopic(name, 0, 1)], request_timeout=T)[name])
    assert err.code() == KafkaError.INVALID_PARTITIONS
    brokers = len(a.list_topics(timeout=10).brokers)
    assert brokers == (3 if kind == "cluster" else 1)
    err = _err(a.create_topics([NewTopic(name, 1, brokers + 1)], request_timeout=T)[name])
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR  # more replicas than brokers
    assert name not in a.list_topics(timeout=10).topics
    if kind == "cluster":  # as many replicas as brokers: one on each
        assert a.create_topics([NewTopic(name, 2, 3)], request_timeout=T)[name].result(timeout=T) is None
        wait_for_topic(broker.bootstrap, name, 2)
        parts = a.list_topics(name, timeout=10).topics[name].partitions
        assert all(sorted(p.replicas) == [1, 2, 3] for p in parts.values())


@CREATE_PARTITIONS_GAP
def test_create_partitions_then_use_them(broker):
    a = admin(broker.bootstrap)
    name = create_topic(broker.bootstrap, unique_topic("admin-parts"), 2)
    produce_confluent(broker.bootstrap, name, [dict(value=b"p0", partition=0)])

    assert a.create_partitions([NewPartitions(name, 5)], request_timeout=T)[name].result(timeout=T) is None
    wait_for_topic(broker.bootstrap, name, 5)
    delivered = produce_confluent(
        broker.bootstrap, name, [dict(value=b"new-%d" % p, key=b"k", partition=p) for p in (2, 3, 4, 4)]
    )
    assert sorted((m.partition(), m.offset()) for m in delivered) == [(2, 0), (3, 0), (4, 0), (4, 1)]
    recs = consume_confluent(broker.bootstrap, name, 5, 5)
    got = sorted((r.partition, r.offset, r.value) for r in recs)
    assert got == [(0, 0, b"p0"), (2, 0, b"new-2"), (3, 0, b"new-3"), (4, 0, b"new-4"), (4, 1, b"new-4")]

    # fewer or equal partitions than now: INVALID_PARTITIONS
    for n in (3, 5):
        err = _err(a.create_partitions([NewPartitions(name, n)], request_timeout=T)[name])
        assert err.code() == KafkaError.INVALID_PARTITIONS, (n, err)
    # unknown topic
    ghost = unique_topic("ghost")
    err = _err(a.create_partitions([NewPartitions(ghost, 3)], request_timeout=T)[ghost])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


@DESCRIBE_GAP
def test_describe_topic_configs_sources(broker):
    name = create_topic(broker.bootstrap, unique_topic("admin-desc"), 1, config={"retention.ms": "123456"})
    cfg = _topic_configs(broker.bootstrap, name)
    assert len(cfg) >= 10, f"DescribeConfigs returned only {sorted(cfg)}"
    for key in ("cleanup.policy", "segment.bytes", "max.message.bytes", "min.insync.replicas"):
        assert key in cfg, key
    r = cfg["retention.ms"]
    assert (r.value, r.source, r.is_default) == ("123456", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False)
    c = cfg["cleanup.policy"]
    assert c.value == "delete" and c.is_default
    assert c.source in (ConfigSource.DEFAULT_CONFIG.value, ConfigSource.STATIC_BROKER_CONFIG.value)
    assert not c.is_read_only and not c.is_sensitive


@DESCRIBE_GAP
def test_describe_broker_configs(broker):
    a = admin(broker.bootstrap)
    md = a.list_topics(timeout=10)
    broker_id = str(next(iter(md.brokers)))
    res = ConfigResource(ResourceType.BROKER, broker_id)
    cfg = a.describe_configs([res], request_timeout=T)[res].result(timeout=T)
    assert len(cfg) >= 10, f"broker DescribeConfigs returned only {sorted(cfg)}"
    assert "num.partitions" in cfg
    assert cfg["num.partitions"].value == "1"


def test_incremental_alter_configs(broker):
    a = admin(broker.bootstrap)
    name = create_topic(broker.bootstrap, unique_topic("admin-incr"), 1)

    def alter(*entries):
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
        return a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)

    S, D = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    A, SUB = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    alter(ConfigEntry("retention.ms", "86400000", incremental_operation=S),
          ConfigEntry("cleanup.policy", "delete", incremental_operation=S))
    cfg = _topic_configs(broker.bootstrap, name)
    assert cfg["retention.ms"].value == "86400000"
    assert cfg["cleanup.policy"].value == "delete"

    alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=A))
    assert _topic_configs(broker.bootstrap, name)["cleanup.policy"].value == "delete,compact"
    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=SUB))
    assert _topic_configs(broker.bootstrap, name)["cleanup.policy"].value == "compact"

    alter(ConfigEntry("retention.ms", None, incremental_operation=D))
    cfg = _topic_configs(broker.bootstrap, name)
    assert cfg.get("retention.ms") is None or cfg["retention.ms"].value != "86400000"


@DESCRIBE_GAP
def test_incremental_delete_restores_default(broker):
    a = admin(broker.bootstrap)
    name = create_topic(
        broker.bootstrap, unique_topic("admin-incr-del"), 1, config={"retention.ms": "5000000"}
    )
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)
    r = _topic_configs(broker.bootstrap, name)["retention.ms"]
    assert r.value == "604800000" and r.is_default, r


@VALIDATION_GAP
def test_incremental_alter_unknown_key_is_refused(broker):
    a = admin(broker.bootstrap)
    name = create_topic(broker.bootstrap, unique_topic("admin-badkey"), 1)
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    err = _err(a.incremental_alter_configs([res], request_timeout=T)[res])
    assert err.code() == KafkaError.INVALID_CONFIG, err


@LEGACY_ALTER_GAP
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_legacy_alter_configs_replaces_all(broker):
    """AlterConfigs (non-incremental) sets exactly the given dynamic configs; others return to default."""
    a = admin(broker.bootstrap)
    name = create_topic(broker.bootstrap, unique_topic("admin-legacy"), 1,
                        config={"retention.ms": "123456", "segment.ms": "7200000"})
    res = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.ms": "3600000"})
    a.alter_configs([res], request_timeout=T)[res].result(timeout=T)
    cfg = _topic_configs(broker.bootstrap, name)
    assert cfg["segment.ms"].value == "3600000"
    assert cfg["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["retention.ms"].value == "604800000" and cfg["retention.ms"].is_default


@DELETE_RECORDS_GAP
def test_delete_records(broker):
    a = admin(broker.bootstrap)
    name = create_topic(broker.bootstrap, unique_topic("admin-delrec"), 2)
    produce_confluent(broker.bootstrap, name, [dict(value=b"v%d" % i, partition=i % 2) for i in range(20)])
    tp = TopicPartition(name, 1, 4)
    res = a.delete_records([tp], request_timeout=T)
    (fut,) = res.values()
    out = fut.result(timeout=T)
    assert out.low_watermark == 4
    assert watermarks(broker.bootstrap, name, 1) == (4, 10)
    assert watermarks(broker.bootstrap, name, 0) == (0, 10)
    recs = consume_confluent(broker.bootstrap, name, [1], 6)
    assert [(r.offset, r.value) for r in recs] == [(o, b"v%d" % (2 * o + 1)) for o in range(4, 10)]
    # beyond the high watermark: OFFSET_OUT_OF_RANGE
    bad = TopicPartition(name, 0, 11)
    (fut,) = a.delete_records([bad], request_timeout=T).values()
    assert _err(fut).code() == KafkaError.OFFSET_OUT_OF_RANGE


# ------------------------------------------------------------------------------------------------
# kafka-python KafkaAdminClient


@pytest.fixture
def kp_admin(broker):
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    yield a
    a.close()


def test_kafka_python_topics(broker, kp_admin):
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

    name = unique_topic("kpadmin")
    kp_admin.create_topics([KNewTopic(name, 4, 1, topic_configs={"retention.ms": "3600000"})])
    wait_for_topic(broker.bootstrap, name, 4)
    (desc,) = kp_admin.describe_topics([name])
    assert desc["name"] == name and desc["error_code"] == 0
    assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2, 3]
    assert name in kp_admin.list_topics()
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([KNewTopic(name, 4, 1)])
    kp_admin.delete_topics([name])
    assert name not in kp_admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics([name])


@VALIDATION_GAP
def test_kafka_python_errors(broker, kp_admin):
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import InvalidPartitionsError, InvalidTopicError

    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics([KNewTopic("no spaces allowed", 1, 1)])
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_topics([KNewTopic(unique_topic("kp-zero"), 0, 1)])


@CREATE_PARTITIONS_GAP
def test_kafka_python_create_partitions(broker, kp_admin):
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.errors import InvalidPartitionsError

    name = create_topic(broker.bootstrap, unique_topic("kp-parts"), 1)
    kp_admin.create_partitions({name: KNewPartitions(3)})
    wait_for_topic(broker.bootstrap, name, 3)
    produce_confluent(broker.bootstrap, name, [dict(value=b"x", partition=2)])
    assert [(r.partition, r.offset) for r in consume_confluent(broker.bootstrap, name, 3, 1)] == [(2, 0)]
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({name: KNewPartitions(2)})


@DESCRIBE_GAP
def test_kafka_python_configs(broker, kp_admin):
    from kafka.admin import AlterConfigOp, ConfigResourceType
    from kafka.admin import ConfigResource as KRes

    name = create_topic(broker.bootstrap, unique_topic("kp-cfg"), 1, config={"retention.ms": "3600000"})

    def describe(filt="all"):
        out = kp_admin.describe_configs([KRes(ConfigResourceType.TOPIC, name)], config_filter=filt)
        return out["topic"][name]

    everything = describe("all")
    assert len(everything) >= 10 and "cleanup.policy" in everything
    modified = describe("modified")
    assert set(modified) == {"retention.ms"}, sorted(modified)
    assert modified["retention.ms"]["value"] == "3600000"
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    # incremental
    kp_admin.alter_configs([KRes(ConfigResourceType.TOPIC, name, configs={
        "segment.ms": (AlterConfigOp.SET, "7200000"),
    })], incremental=True)
    assert {k: v["value"] for k, v in describe("modified").items()} == {
        "retention.ms": "3600000", "segment.ms": "7200000"}


@LEGACY_ALTER_GAP
def test_kafka_python_legacy_alter_configs(broker, kp_admin):
    from kafka.admin import ConfigResource as KRes
    from kafka.admin import ConfigResourceType

    name = create_topic(broker.bootstrap, unique_topic("kp-legacy"), 1, config={"retention.ms": "3600000"})
    # the raw legacy request replaces every dynamic config; kafka-python fills the other modified keys in
    kp_admin.alter_configs([KRes(ConfigResourceType.TOPIC, name, configs={"segment.ms": "7200000"})],
                           incremental=False)
    out = kp_admin.describe_configs([KRes(ConfigResourceType.TOPIC, name)])["topic"][name]
    assert {k: v["value"] for k, v in out.items()} == {"retention.ms": "3600000", "segment.ms": "7200000"}


@DELETE_RECORDS_GAP
def test_kafka_python_delete_records(broker, kp_admin):
    from kafka import TopicPartition as KTP

    name = create_topic(broker.bootstrap, unique_topic("kp-delrec"), 1)
    produce_confluent(broker.bootstrap, name, [dict(value=b"%d" % i, partition=0) for i in range(8)])
    kp_admin.delete_records({KTP(name, 0): 5})
    assert watermarks(broker.bootstrap, name, 0) == (5, 8)
    # produce continues at the high watermark
    (m,) = produce_confluent(broker.bootstrap, name, [dict(value=b"8", partition=0)])
    assert m.offset() == 8
    recs = consume_confluent(broker.bootstrap, name, [0], 4)
    assert [(r.offset, r.value) for r in recs] == [(o, b"%d" % o) for o in range(5, 9)]

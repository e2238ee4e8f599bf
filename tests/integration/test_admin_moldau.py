"""Admin APIs against a real broker process: confluent-kafka AdminClient, kafka-python KafkaAdminClient, and
raw requests (moldau.protocol) for the versions and fields the clients do not expose.

The common client round trips are in test_admin.py (integration engineer); this file adds the moldau-specific
checks: CreateTopics (validate_only, errors, v5+ response fields, replica assignments), DeleteTopics (by name,
by id, files removed), DescribeConfigs (sources, synonyms, defaults, broker resource, v0), AlterConfigs
(raw v0-2: replaces the set), IncrementalAlterConfigs (APPEND from the inherited value, refusals, broker-level
dynamic configs and their persistence, BROKER_LOGGER, effect on the running log), CreatePartitions
(validate_only, assignments), DeleteRecords (ListOffsets earliest, -1 = high watermark), internal topics,
OffsetForLeaderEpoch, DescribeCluster, DescribeLogDirs, aiokafka's old versions, every declared version.
"""

from __future__ import annotations

import gc
import os
import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from moldau.protocol import frame
from moldau.protocol import messages as m

from harness.kafkautil import admin as _new_admin
from harness.kafkautil import produce_confluent, replication_factor, unique_topic, wait_for_topic, watermarks

pytestmark = pytest.mark.moldau_only(reason="moldau admin semantics (sources, raw versions, on-disk layout)")

TIMEOUT = 20.0
ZERO_UUID = uuid.UUID(int=0)


# ------------------------------------------------------------------------------------------------ helpers

_ADMINS: dict = {}


def admin(bootstrap: str):
    """One confluent AdminClient per broker address for the test, kept alive while it runs (a collected client
    fails its futures)."""
    a = _ADMINS.get(bootstrap)
    if a is None:
        a = _ADMINS[bootstrap] = _new_admin(bootstrap)
    return a


def _drop_admin(bootstrap: str) -> None:
    _ADMINS.pop(bootstrap, None)
    gc.collect()


@pytest.fixture(autouse=True)
def _drop_admins(broker_factory):
    """The test's AdminClients go before its brokers stop (broker_factory is torn down after this fixture):
    a client left alive keeps reconnecting to a stopped broker and logging the failures."""
    yield
    _ADMINS.clear()
    gc.collect()



class Raw:
    """A blocking raw-protocol client (one request at a time)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)  # a cluster: its first broker
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.corr = 0

    def call(self, api_key: int, version: int, req):
        self.corr += 1
        self.sock.sendall(frame.encode_request(api_key, version, self.corr, "admin-test", req))
        size = struct.unpack(">i", self._read(4))[0]
        body = self._read(size)
        hdr, off = frame.decode_response_header(body, api_key, version)
        assert hdr.correlation_id == self.corr
        resp, _ = m.RESPONSES[api_key].decode(body, version, off)
        return resp

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed by the broker"
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def raw(broker):
    c = Raw(broker.bootstrap)
    yield c
    c.close()


@pytest.fixture
def kp_admin(broker):
    from kafka import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    yield a
    a.close()


def create(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None, **kw):
    fut = admin(bootstrap).create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor(),
                  config=config or {})],
        request_timeout=TIMEOUT, **kw)[name]
    return fut.result(timeout=TIMEOUT)


def create_error(bootstrap: str, topic: NewTopic, **kw) -> CKError:
    fut = admin(bootstrap).create_topics([topic], request_timeout=TIMEOUT, **kw)[topic.topic]
    with pytest.raises(KafkaException) as info:
        fut.result(timeout=TIMEOUT)
    return info.value.args[0]


def topic_exists(bootstrap: str, name: str) -> bool:
    md = admin(bootstrap).list_topics(timeout=10)
    return name in md.topics


def describe_topic_configs(bootstrap: str, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    return admin(bootstrap).describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)


def node_id(bootstrap: str) -> int:
    return admin(bootstrap).describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT).nodes[0].id


def partition_dir(broker, topic: str, partition: int) -> str:
    return os.path.join(str(broker.data_dir), f"{topic}-{partition}")


def partition_dirs(broker, topic: str, partition: int) -> list[str]:
    """The partition's folder in every broker's data dir (three replicas in the test cluster)."""
    return [os.path.join(str(d), f"{topic}-{partition}")
            for d in getattr(broker, "data_dirs", [broker.data_dir])]


# ------------------------------------------------------------------------------------------------
# CreateTopics


def test_create_topic_validate_only_creates_nothing(broker, topic):
    create(broker.bootstrap, topic, 3, {"retention.ms": "1000"}, validate_only=True)
    assert not topic_exists(broker.bootstrap, topic)
    assert not os.path.exists(partition_dir(broker, topic, 0))
    create(broker.bootstrap, topic, 3)
    wait_for_topic(broker.bootstrap, topic, 3)


def test_create_topic_errors(broker, make_topic, kind):
    existing = make_topic(1)
    err = create_error(broker.bootstrap, NewTopic(existing, 1, 1))
    assert err.code() == CKError.TOPIC_ALREADY_EXISTS

    name = unique_topic("bad-config")
    err = create_error(broker.bootstrap, NewTopic(name, 1, 1, config={"retention.ms": "-7"}))
    assert err.code() == CKError.INVALID_CONFIG and "retention.ms" in err.str()
    err = create_error(broker.bootstrap, NewTopic(name, 1, 1, config={"no.such.config": "1"}))
    assert err.code() == CKError.INVALID_CONFIG and "no.such.config" in err.str()
    err = create_error(broker.bootstrap, NewTopic(name, 1, 1, config={"cleanup.policy": "compact,shred"}))
    assert err.code() == CKError.INVALID_CONFIG and "cleanup.policy" in err.str()
    err = create_error(broker.bootstrap, NewTopic(name, 1, 4 if kind == "cluster" else 3))
    assert err.code() == CKError.INVALID_REPLICATION_FACTOR  # more replicas than brokers
    err = create_error(broker.bootstrap, NewTopic("bad name!", 1, 1))
    assert err.code() == CKError.TOPIC_EXCEPTION
    # validate_only reports the same errors
    err = create_error(
        broker.bootstrap, NewTopic(name, 1, 1, config={"segment.bytes": "10"}), validate_only=True
    )
    assert err.code() == CKError.INVALID_CONFIG and "segment.bytes" in err.str()
    assert not topic_exists(broker.bootstrap, name)


@pytest.mark.kafka_differs("sends CreateTopics v0, which Kafka 4.0 removed (KIP-896); Kafka's controller "
                           "also answers a config value as given ('compact, delete'), moldau as "
                           "DescribeConfigs writes it on both ('compact,delete', ConfigDef.convertToString)")
def test_create_topics_v5_response_and_defaults(raw, broker, topic, kind):
    M = m.CreateTopicsRequest
    req = M.new(timeout_ms=10000, validate_only=False, topics=[
        M.CreatableTopic(name=topic, num_partitions=-1, replication_factor=-1, assignments=[],
                         configs=[M.CreatableTopicConfig(name="retention.ms", value="123456"),
                                  M.CreatableTopicConfig(name="cleanup.policy", value="compact, delete")]),
        M.CreatableTopic(name=topic + "-bad", num_partitions=0, replication_factor=1,
                         assignments=[], configs=[]),
        M.CreatableTopic(name=topic + "-dup", num_partitions=1, replication_factor=1,
                         assignments=[], configs=[]),
        M.CreatableTopic(name=topic + "-dup", num_partitions=1, replication_factor=1,
                         assignments=[], configs=[]),
    ])
    resp = raw.call(19, 7, req)
    by = {t.name: t for t in resp.topics}
    ok = by[topic]
    assert ok.error_code == 0 and ok.topic_id != ZERO_UUID
    # broker defaults for -1 (the test cluster's default.replication.factor is 3)
    assert ok.num_partitions == 1 and ok.replication_factor == (3 if kind == "cluster" else 1)
    cfg = {c.name: c for c in ok.configs}
    assert cfg["retention.ms"].value == "123456" and cfg["retention.ms"].config_source == 1
    assert cfg["cleanup.policy"].value == "compact,delete"
    assert cfg["segment.bytes"].config_source == 5 and not cfg["segment.bytes"].read_only
    assert by[topic + "-bad"].error_code == 37 and by[topic + "-bad"].error_message
    assert by[topic + "-dup"].error_code == 42
    assert not topic_exists(broker.bootstrap, topic + "-dup")
    # the id is the one Metadata reports
    md = raw.call(3, 12, m.MetadataRequest.new(topics=[m.MetadataRequest.MetadataRequestTopic(
        name=topic, topic_id=ZERO_UUID)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    assert md.topics[0].topic_id == ok.topic_id
    # v0 (no validate_only, no error message) still works
    old = raw.call(19, 0, M.new(timeout_ms=10000, topics=[
        M.CreatableTopic(name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    assert old.topics[0].error_code == 36


def test_create_topic_with_replica_assignment(kp_admin, broker, topic):
    from kafka.errors import InvalidReplicationAssignmentError

    me = node_id(broker.bootstrap)
    kp_admin.create_topics({topic: {"assignments": {0: [me], 1: [me]}}})
    wait_for_topic(broker.bootstrap, topic, 2)
    with pytest.raises(InvalidReplicationAssignmentError):
        kp_admin.create_topics({topic + "-x": {"assignments": {0: [me + 100]}}})
    with pytest.raises(InvalidReplicationAssignmentError):
        kp_admin.create_topics({topic + "-y": {"assignments": {0: [me], 2: [me]}}})


# ------------------------------------------------------------------------------------------------
# DeleteTopics


def test_delete_topic_by_name_removes_files(broker, make_topic):
    name = make_topic(2)
    produce_confluent(broker.bootstrap, name, [{"value": b"x", "partition": 1}])
    dirs = partition_dirs(broker, name, 0) + partition_dirs(broker, name, 1)
    deadline = time.monotonic() + 10  # on a cluster: the replicas on every broker (followers follow)
    while time.monotonic() < deadline and not all(os.path.isdir(d) for d in dirs):
        time.sleep(0.05)
    assert all(os.path.isdir(d) for d in dirs)
    admin(broker.bootstrap).delete_topics([name], request_timeout=TIMEOUT)[name].result(timeout=TIMEOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(d) for d in dirs):
        time.sleep(0.05)
    assert [d for d in dirs if os.path.exists(d)] == []
    assert not topic_exists(broker.bootstrap, name)
    fut = admin(broker.bootstrap).delete_topics([name], request_timeout=TIMEOUT)[name]
    with pytest.raises(KafkaException) as info:
        fut.result(timeout=TIMEOUT)
    assert info.value.args[0].code() == CKError.UNKNOWN_TOPIC_OR_PART
    # the name can be used again, starting from offset 0
    create(broker.bootstrap, name, 1)
    wait_for_topic(broker.bootstrap, name, 1)
    assert watermarks(broker.bootstrap, name, 0) == (0, 0)


def test_delete_topic_by_id(kp_admin, raw, broker, make_topic):
    name = make_topic(1)
    tid = next(t for t in kp_admin.describe_topics([name]) if t["name"] == name)["topic_id"]
    tid = tid if isinstance(tid, uuid.UUID) else uuid.UUID(str(tid))
    result = kp_admin.delete_topics([tid])
    assert [(str(t["topic_id"]), t["error_code"]) for t in result["topics"]] == [(str(tid), 0)]
    assert result["topics"][0]["name"] == name
    assert not topic_exists(broker.bootstrap, name)
    # the raw connection's broker may be another than the one that deleted it: it knows once the deletion
    # reached it (as in Kafka, a broker that still has the topic would accept deleting it again)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and topic_exists(broker.bootstrap.split(",")[0], name):
        time.sleep(0.05)
    M = m.DeleteTopicsRequest
    resp = raw.call(20, 6, M.new(timeout_ms=5000, topics=[
        M.DeleteTopicState(name=None, topic_id=tid),
        M.DeleteTopicState(name="x", topic_id=uuid.uuid4()),
        M.DeleteTopicState(name=None, topic_id=ZERO_UUID)]))
    codes = sorted(r.error_code for r in resp.responses)
    assert codes == [42, 42, 100]                  # both given / neither given / unknown id


# ------------------------------------------------------------------------------------------------
# DescribeConfigs


# Kafka's ConfigHelper.configSynonyms keeps a topic config's broker synonyms only from its first broker name
# on (``allSynonyms.dropWhile(s => s.name != name)``, name being e.g. log.retention.ms): with
# log.retention.hours set or defaulted and log.retention.ms unset, Kafka lists no broker synonym for
# retention.ms and reports its source as DEFAULT_CONFIG. moldau lists every synonym KIP-226 names
# (log.retention.hours included) with its source.
KAFKA_SYNONYMS = ("Kafka lists a topic config's broker synonyms only from its first broker name on "
                  "(ConfigHelper.configSynonyms' dropWhile): no log.retention.hours synonym, source "
                  "DEFAULT_CONFIG; moldau lists every KIP-226 synonym with its source")


@pytest.mark.kafka_differs(KAFKA_SYNONYMS)
def test_describe_topic_configs_sources_and_synonyms(broker, make_topic):
    name = make_topic(1, config={"retention.ms": "3600000", "cleanup.policy": "compact"})
    cfg = describe_topic_configs(broker.bootstrap, name)
    assert len(cfg) >= 25
    r = cfg["retention.ms"]
    assert r.value == "3600000" and r.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and not r.is_default
    assert [s.name for s in r.synonyms.values()][0] == "retention.ms"
    assert "log.retention.hours" in r.synonyms
    seg = cfg["segment.bytes"]
    assert seg.source == ConfigSource.DEFAULT_CONFIG.value and seg.is_default
    assert not seg.is_read_only and not seg.is_sensitive
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["max.message.bytes"].value == "1048588"
    assert cfg["min.cleanable.dirty.ratio"].value == "0.5"


@pytest.mark.kafka_differs("sends versions Kafka 4.0 removed (DescribeConfigs v0, KIP-896): Kafka closes the "
                           "connection; moldau keeps serving them to old clients")
def test_describe_configs_raw_versions(raw, make_topic):
    name = make_topic(1, config={"segment.ms": "100000"})
    M = m.DescribeConfigsRequest
    for version in range(0, 5):
        req = M.new(
            resources=[
                M.DescribeConfigsResource(
                    resource_type=2,
                    resource_name=name,
                    configuration_keys=["segment.ms", "retention.ms", "nope"],
                )
            ],
            include_synonyms=True,
            include_documentation=True,
        )
        resp = raw.call(32, version, req)
        res = resp.results[0]
        assert res.error_code == 0
        by = {c.name: c for c in res.configs}
        assert set(by) == {"segment.ms", "retention.ms"}
        assert by["segment.ms"].value == "100000"
        if version == 0:
            assert by["segment.ms"].is_default is False and by["retention.ms"].is_default is True
        else:
            assert by["segment.ms"].config_source == 1 and by["retention.ms"].config_source == 5
            assert by["retention.ms"].synonyms and by["retention.ms"].synonyms[-1].source == 5
        if version >= 3:
            assert by["segment.ms"].config_type == 5 and by["segment.ms"].documentation
    missing = raw.call(32, 4, M.new(resources=[M.DescribeConfigsResource(
        resource_type=2, resource_name="no-such-topic-" + uuid.uuid4().hex[:6], configuration_keys=None)],
        include_synonyms=False, include_documentation=False))
    assert missing.results[0].error_code == 3


def test_describe_broker_configs(broker, kind):
    me = node_id(broker.bootstrap)
    res = ConfigResource(ConfigResource.Type.BROKER, str(me))
    cfg = (
        admin(broker.bootstrap).describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    )
    assert cfg["log.retention.hours"].value == "168"
    assert cfg["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["log.retention.hours"].is_read_only
    assert not cfg["log.retention.ms"].is_read_only              # dynamic in Kafka and moldau
    assert cfg["num.partitions"].is_read_only
    # whatever the test harness set on the command line (--set) is a static broker config
    for key, value in broker.settings.items():
        if key in cfg:
            assert cfg[key].source == ConfigSource.STATIC_BROKER_CONFIG.value, key
            assert not cfg[key].is_default
    for entry in cfg.values():
        if entry.is_sensitive:
            assert entry.value is None
    M = m.DescribeConfigsRequest
    with Raw(broker.bootstrap) as raw:
        for name, code in ((str(me + 17), 42), ("abc", 42), ("", 0)):
            r = raw.call(32, 4, M.new(resources=[M.DescribeConfigsResource(
                resource_type=4, resource_name=name, configuration_keys=None)],
                include_synonyms=True, include_documentation=True)).results[0]
            assert r.error_code == code, name
    # "" (the cluster-wide dynamic defaults) is empty until one is set; Kafka 4.4 has min.insync.replicas
    # there from its start (the cluster-wide value its eligible leader replicas, KIP-966, need)
    assert [c.name for c in r.configs] == (["min.insync.replicas"] if kind == "kafka" else [])


@pytest.mark.kafka_differs(KAFKA_SYNONYMS)
def test_static_broker_config_is_a_topic_default(broker_factory):
    b = broker_factory(settings={"log.retention.hours": "48", "log.segment.bytes": "2097152"})
    name = unique_topic("static")
    create(b.bootstrap, name, 1)
    cfg = describe_topic_configs(b.bootstrap, name)
    assert cfg["retention.ms"].value == str(48 * 3600 * 1000)
    assert cfg["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert cfg["segment.bytes"].value == "2097152"
    assert cfg["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value


# ------------------------------------------------------------------------------------------------ Alter
# configs


def test_incremental_alter_topic_configs(broker, make_topic):
    """APPEND starts from the inherited value; refusals name the key; validate_only changes nothing."""
    name = make_topic(1)
    a = admin(broker.bootstrap)
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    cfg = describe_topic_configs(broker.bootstrap, name)
    assert cfg["retention.ms"].value == "7200000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["cleanup.policy"].value == "delete,compact"

    # (SUBTRACT / DELETE round trips are in test_admin.py)

    # APPEND on a non-list config and bad values are refused; nothing changes
    for entry in (ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND),
                  ConfigEntry("min.insync.replicas", "0", incremental_operation=AlterConfigOpType.SET)):
        res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
        with pytest.raises(KafkaException) as info:
            a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
        assert info.value.args[0].code() == CKError.INVALID_CONFIG
        assert entry.name in info.value.args[0].str()
    # validate_only changes nothing
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res], request_timeout=TIMEOUT, validate_only=True)[res].result(
        timeout=TIMEOUT
    )
    assert describe_topic_configs(broker.bootstrap, name)["segment.ms"].is_default


def test_alter_config_applies_to_running_log(broker, make_topic):
    """max.message.bytes lowered at runtime: the next larger batch is refused, without a restart."""
    name = make_topic(1)
    produce_confluent(broker.bootstrap, name, [{"value": b"v" * 2000}])
    a = admin(broker.bootstrap)
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    with pytest.raises(AssertionError, match="MSG_SIZE_TOO_LARGE|too large|delivery errors"):
        produce_confluent(broker.bootstrap, name, [{"value": b"v" * 2000}],
                          conf={"message.send.max.retries": 0, "compression.type": "none"}, timeout=10)
    produce_confluent(broker.bootstrap, name, [{"value": b"small"}])


def test_legacy_alter_configs_replaces_whole_set(raw, broker, make_topic):
    """AlterConfigs v0-2 raw (the clients' paths are in test_admin.py)."""
    name = make_topic(1, config={"retention.ms": "1000000", "segment.ms": "500000"})
    M = m.AlterConfigsRequest
    for version in (0, 1, 2):
        r = raw.call(33, version, M.new(validate_only=False, resources=[M.AlterConfigsResource(
            resource_type=2, resource_name=name, configs=[M.AlterableConfig(name="retention.bytes",
                                                                            value=str(1048576 + version))])]))
        assert r.responses[0].error_code == 0
    cfg = describe_topic_configs(broker.bootstrap, name)
    assert cfg["retention.bytes"].value == "1048578"
    assert cfg["retention.ms"].is_default and cfg["segment.ms"].is_default
    r = raw.call(33, 2, M.new(validate_only=False, resources=[M.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[M.AlterableConfig(name="retention.ms", value="x")])]))
    assert r.responses[0].error_code == 40 and "retention.ms" in r.responses[0].error_message


def topic_configs_at(address: str, name: str) -> dict[str, tuple[str | None, int]]:
    """{key: (value, config source)} of a topic as the broker at ``address`` answers DescribeConfigs (its own
    broker-level configs are the topic's defaults)."""
    M = m.DescribeConfigsRequest
    with Raw(address) as raw:
        r = raw.call(32, 4, M.new(resources=[M.DescribeConfigsResource(
            resource_type=2, resource_name=name, configuration_keys=None)], include_synonyms=False,
            include_documentation=False))
    assert r.results[0].error_code == 0, r.results[0]
    return {c.name: (c.value, c.config_source) for c in r.results[0].configs}


def _eventually(check, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.2)


def test_broker_dynamic_config_defaults_topics_and_persists(broker_factory, kind):
    """A per-broker dynamic config and the cluster-wide default reach the topics' configs and survive a
    restart. Against a cluster: set through its first broker (whose level is changed), the cluster default
    reaches the other brokers too (ZooKeeper's notifications), the per-broker value does not."""
    b = broker_factory()
    addr = b.bootstrap.split(",")[0]  # requests and DescribeConfigs to this one broker
    me = b.cluster.brokers[0].node_id if kind == "cluster" else node_id(addr)
    others = [x.address for x in b.cluster.brokers[1:]] if kind == "cluster" else []
    name = unique_topic("dyn")
    create(addr, name, 1)
    create(addr, name + "-own", 1, {"retention.ms": "5000"})
    a = admin(addr)
    res = ConfigResource(ConfigResource.Type.BROKER, str(me), incremental_configs=[
        ConfigEntry("log.retention.ms", "3333000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)

    def applied(check, what: str) -> None:
        """Kafka's broker applies a broker config when its metadata log brings it, a moment after the
        answer; moldau's before it answers."""
        if kind == "kafka":
            _eventually(check, what)

    applied(lambda: topic_configs_at(addr, name)["retention.ms"][0] == "3333000", "the broker's own level")
    cfg = topic_configs_at(addr, name)
    assert cfg["retention.ms"] == ("3333000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert cfg["cleanup.policy"][0] == "delete,compact"
    assert topic_configs_at(addr, name + "-own")["retention.ms"][0] == "5000"
    bres = ConfigResource(ConfigResource.Type.BROKER, str(me))
    bcfg = a.describe_configs([bres], request_timeout=TIMEOUT)[bres].result(timeout=TIMEOUT)
    assert bcfg["log.retention.ms"].value == "3333000"
    assert bcfg["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    # a key moldau cannot change at runtime is refused, naming it
    res = ConfigResource(ConfigResource.Type.BROKER, str(me), incremental_configs=[
        ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    assert info.value.args[0].code() in (CKError.INVALID_REQUEST, CKError.INVALID_CONFIG)
    assert "num.partitions" in info.value.args[0].str()

    # cluster-wide default (resource name ""), below the per-broker value
    IAC = m.IncrementalAlterConfigsRequest
    with Raw(addr) as raw:
        r = raw.call(44, 1, IAC.new(validate_only=False, resources=[IAC.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[
                IAC.AlterableConfig(name="log.segment.bytes", config_operation=0, value="3145728")])]))
        assert r.responses[0].error_code == 0
    default = ("3145728", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    applied(lambda: topic_configs_at(addr, name)["segment.bytes"] == default, "the cluster default")
    assert topic_configs_at(addr, name)["segment.bytes"] == default
    for other in others:  # the cluster default everywhere, broker ``me``'s own level on ``me`` only
        _eventually(lambda: topic_configs_at(other, name)["segment.bytes"] == default,
                    f"the cluster default on {other}")
        cfg = topic_configs_at(other, name)
        assert cfg["retention.ms"][1] != ConfigSource.DYNAMIC_BROKER_CONFIG.value, cfg["retention.ms"]
        assert cfg["cleanup.policy"][0] == "delete"

    # survives a restart (the admin client goes first: it would log its reconnect attempts meanwhile)
    del a
    _drop_admin(addr)
    b.restart()
    cfg = topic_configs_at(addr, name)
    assert cfg["retention.ms"] == ("3333000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert cfg["segment.bytes"] == default
    assert topic_configs_at(addr, name + "-own")["retention.ms"][0] == "5000"
    for other in others:
        assert topic_configs_at(other, name)["segment.bytes"] == default


def test_broker_logger_configs(raw, broker):
    me = node_id(broker.bootstrap)
    M = m.DescribeConfigsRequest
    resp = raw.call(32, 4, M.new(resources=[M.DescribeConfigsResource(
        resource_type=8, resource_name=str(me), configuration_keys=None)], include_synonyms=False,
        include_documentation=False))
    levels = {c.name: c.value for c in resp.results[0].configs}
    assert "root" in levels and levels["root"] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
    IAC = m.IncrementalAlterConfigsRequest
    bad = raw.call(44, 1, IAC.new(validate_only=False, resources=[IAC.AlterConfigsResource(
        resource_type=8, resource_name=str(me), configs=[IAC.AlterableConfig(name="root", config_operation=2,
                                                                           value="INFO")])]))
    assert bad.responses[0].error_code == 42


# ------------------------------------------------------------------------------------------------ partitions


def test_create_partitions_validate_only(broker, make_topic):
    """(Growing then using partitions, and the count errors, are in test_admin.py.)"""
    name = make_topic(1)
    a = admin(broker.bootstrap)
    a.create_partitions([NewPartitions(name, 3)], request_timeout=TIMEOUT, validate_only=True)[name].result(
        timeout=TIMEOUT)
    assert len(a.list_topics(name, timeout=10).topics[name].partitions) == 1
    assert not os.path.exists(partition_dir(broker, name, 1))
    fut = a.create_partitions([NewPartitions(name, 1)], request_timeout=TIMEOUT, validate_only=True)[name]
    with pytest.raises(KafkaException) as info:
        fut.result(timeout=TIMEOUT)
    assert info.value.args[0].code() == CKError.INVALID_PARTITIONS


def test_create_partitions_kafka_python_assignments(kp_admin, broker, make_topic):
    from kafka.errors import InvalidReplicationAssignmentError, UnknownTopicOrPartitionError

    name = make_topic(1)
    me = node_id(broker.bootstrap)
    # as many replicas as the topic has (three on the test cluster: the other two after ``me``)
    a = admin(broker.bootstrap)  # kept until the result is in
    nodes = a.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT).nodes
    others = sorted(b.id for b in nodes if b.id != me)[:replication_factor() - 1]
    kp_admin.create_partitions({name: {"count": 2, "assignments": [[me, *others]]}})
    wait_for_topic(broker.bootstrap, name, 2)
    with pytest.raises(InvalidReplicationAssignmentError):
        kp_admin.create_partitions({name: {"count": 3, "assignments": [[me + 5]]}})
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.create_partitions({name + "-missing": 2})


# ------------------------------------------------------------------------------------------------
# DeleteRecords


def test_delete_records_moves_earliest_offset(broker, make_topic):
    """ListOffsets(earliest) follows DeleteRecords (watermarks / consume / errors are in test_admin.py)."""
    name = make_topic(1)
    produce_confluent(broker.bootstrap, name, [{"value": b"r%d" % i} for i in range(10)])
    a = admin(broker.bootstrap)
    tp = TopicPartition(name, 0, 4)
    res = a.delete_records([tp], request_timeout=TIMEOUT)[tp].result(timeout=TIMEOUT)
    assert res.low_watermark == 4
    lo = a.list_offsets({TopicPartition(name, 0): OffsetSpec.earliest()}, request_timeout=TIMEOUT)
    assert next(iter(lo.values())).result(timeout=TIMEOUT).offset == 4
    # an offset below the log start offset changes nothing
    tp = TopicPartition(name, 0, 2)
    assert a.delete_records([tp], request_timeout=TIMEOUT)[tp].result(timeout=TIMEOUT).low_watermark == 4


def test_delete_records_raw_high_watermark_and_unknown(broker, make_topic):
    from harness.rawkafka import leader_address

    name = make_topic(2)
    produce_confluent(broker.bootstrap, name, [{"value": b"x", "partition": 1} for _ in range(3)])
    M = m.DeleteRecordsRequest
    with Raw(leader_address(broker.bootstrap, name, 1)) as raw:  # the leader deletes (a cluster: one of 3)
        resp = raw.call(21, 2, M.new(timeout_ms=5000, topics=[
            M.DeleteRecordsTopic(name=name, partitions=[
                M.DeleteRecordsPartition(partition_index=1, offset=-1),
                M.DeleteRecordsPartition(partition_index=7, offset=0)])]))
    parts = {p.partition_index: p for p in resp.topics[0].partitions}
    assert (parts[1].error_code, parts[1].low_watermark) == (0, 3)
    assert parts[7].error_code == 3
    assert watermarks(broker.bootstrap, name, 1) == (3, 3)


# ------------------------------------------------------------------------------------------------
# OffsetForLeaderEpoch


@pytest.mark.kafka_differs("sends versions Kafka 4.0 removed (OffsetForLeaderEpoch v0-1, KIP-896): Kafka "
                           "closes the connection; moldau keeps serving them to old clients")
def test_offset_for_leader_epoch_all_versions(raw, broker, make_topic):
    name = make_topic(1)
    produce_confluent(broker.bootstrap, name, [{"value": b"e"} for _ in range(4)])
    M = m.OffsetForLeaderEpochRequest
    for version in range(0, 5):
        req = M.new(replica_id=-1, topics=[M.OffsetForLeaderTopic(topic=name, partitions=[
            M.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0),
            M.OffsetForLeaderPartition(partition=5, current_leader_epoch=-1, leader_epoch=0)])])
        resp = raw.call(23, version, req)
        parts = {p.partition: p for p in resp.topics[0].partitions}
        assert (parts[0].error_code, parts[0].end_offset) == (0, 4)
        if version >= 1:
            assert parts[0].leader_epoch == 0
        assert parts[5].error_code == 3
    # unknown (future) epoch, fenced / unknown current epoch (v2+)
    req = M.new(replica_id=-1, topics=[M.OffsetForLeaderTopic(topic=name, partitions=[
        M.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=9)])])
    p = raw.call(23, 4, req).topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, -1, -1)
    req = M.new(replica_id=-1, topics=[M.OffsetForLeaderTopic(topic=name, partitions=[
        M.OffsetForLeaderPartition(partition=0, current_leader_epoch=3, leader_epoch=0)])])
    assert raw.call(23, 4, req).topics[0].partitions[0].error_code == 75      # UNKNOWN_LEADER_EPOCH


# ------------------------------------------------------------------------------------------------ cluster /
# log dirs


@pytest.mark.single_broker("asserts the one node of a single-broker cluster (the cluster's three: "
                           "tests/cluster/test_cluster_metadata.py)")
def test_describe_cluster(raw, kp_admin, broker):
    desc = admin(broker.bootstrap).describe_cluster(include_authorized_operations=True,
                                                    request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert desc.cluster_id
    assert len(desc.nodes) == 1 and desc.controller.id == desc.nodes[0].id
    assert desc.nodes[0].port == broker.port
    assert desc.authorized_operations                        # no authorizer: every cluster operation
    kp = kp_admin.describe_cluster()
    assert kp["cluster_id"] == desc.cluster_id
    assert kp["controller_id"] == desc.controller.id
    M = m.DescribeClusterRequest
    for version in (0, 1, 2):
        r = raw.call(60, version, M.new(include_cluster_authorized_operations=False, endpoint_type=1,
                                        include_fenced_brokers=False))
        assert r.error_code == 0 and r.cluster_id == desc.cluster_id
        assert r.cluster_authorized_operations == -2147483648
        assert [(b.broker_id, b.port) for b in r.brokers] == [(desc.nodes[0].id, broker.port)]
    r = raw.call(60, 1, M.new(include_cluster_authorized_operations=False, endpoint_type=2))
    assert r.error_code == 114                                # MISMATCHED_ENDPOINT_TYPE


@pytest.mark.single_broker("DescribeLogDirs of one broker's one data dir (other brokers' log dirs are not "
                           "built, docs/cluster.md)")
@pytest.mark.kafka_differs("sends versions Kafka 4.0 removed (DescribeLogDirs v0, KIP-896): Kafka closes the "
                           "connection; moldau keeps serving them to old clients")
def test_describe_log_dirs(kp_admin, raw, broker, make_topic):
    name = make_topic(2)
    produce_confluent(broker.bootstrap, name, [{"value": b"d" * 100, "partition": 0} for _ in range(5)])
    result = kp_admin.describe_log_dirs({name: [0, 1]})
    dirs = result[0]["log_dirs"]
    assert len(dirs) == 1 and dirs[0]["error_code"] == 0
    assert os.path.samefile(dirs[0]["log_dir"], str(broker.data_dir))
    topics = {t["name"]: t for t in dirs[0]["topics"]}
    parts = {p["partition_index"]: p for p in topics[name]["partitions"]}
    assert set(parts) == {0, 1}
    assert parts[0]["partition_size"] > 500 and parts[1]["partition_size"] == 0
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in parts.values())
    assert dirs[0]["total_bytes"] > 0 and 0 <= dirs[0]["usable_bytes"] <= dirs[0]["total_bytes"]
    M = m.DescribeLogDirsRequest
    for version in range(0, 6):
        r = raw.call(35, version, M.new(topics=[M.DescribableLogDirTopic(topic=name, partitions=[1])]))
        res = r.results[0]
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == [(name, [1])]
    everything = raw.call(35, 4, M.new(topics=None)).results[0]
    assert name in {t.name for t in everything.topics}


# ------------------------------------------------------------------------------------------------ every
# version


@pytest.mark.single_broker("old-version requests to one address that leads every partition (a cluster's "
                           "DeleteRecords goes to each partition's leader)")
@pytest.mark.kafka_differs("sends versions Kafka 4.0 removed (CreateTopics v0-1 and the others of KIP-896): "
                           "Kafka closes the connection; moldau keeps serving them to old clients")
def test_every_declared_version_answers(raw, broker):
    """CreateTopics / CreatePartitions / DeleteRecords / IncrementalAlterConfigs / DeleteTopics at every
    version moldau declares, old ones included (what old clients send)."""
    CT, CP, DR, IA, DT = (m.CreateTopicsRequest, m.CreatePartitionsRequest, m.DeleteRecordsRequest,
                          m.IncrementalAlterConfigsRequest, m.DeleteTopicsRequest)
    base = unique_topic("versions")
    names = []
    for v in range(CT.min_version, CT.max_version + 1):
        name = f"{base}-{v}"
        r = raw.call(19, v, CT.new(timeout_ms=5000, validate_only=False, topics=[CT.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=[],
            configs=[CT.CreatableTopicConfig(name="segment.ms", value=str(100000 + v))])]))
        assert r.topics[0].error_code == 0, (v, r)
        names.append(name)
    for i, v in enumerate(range(CP.min_version, CP.max_version + 1)):
        r = raw.call(37, v, CP.new(timeout_ms=5000, validate_only=False, topics=[
            CP.CreatePartitionsTopic(name=names[i], count=2, assignments=None)]))
        assert r.results[0].error_code == 0, (v, r)
    for i, v in enumerate(range(IA.min_version, IA.max_version + 1)):
        r = raw.call(44, v, IA.new(validate_only=False, resources=[IA.AlterConfigsResource(
            resource_type=2, resource_name=names[i], configs=[
                IA.AlterableConfig(name="cleanup.policy", config_operation=2, value="compact")])]))
        assert r.responses[0].error_code == 0, (v, r)
        assert describe_topic_configs(broker.bootstrap, names[i])["cleanup.policy"].value == "delete,compact"
    for v in range(DR.min_version, DR.max_version + 1):
        r = raw.call(21, v, DR.new(timeout_ms=5000, topics=[DR.DeleteRecordsTopic(
            name=names[0], partitions=[DR.DeleteRecordsPartition(partition_index=0, offset=-1)])]))
        assert (r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].low_watermark) == (0, 0), (
            v,
            r,
        )
    for i, v in enumerate(range(DT.min_version, DT.max_version + 1)):
        if v >= 6:
            req = DT.new(timeout_ms=5000, topics=[DT.DeleteTopicState(name=names[i], topic_id=ZERO_UUID)])
        else:
            req = DT.new(timeout_ms=5000, topic_names=[names[i]])
        r = raw.call(20, v, req)
        assert [(x.name, x.error_code) for x in r.responses] == [(names[i], 0)], (v, r)
        assert not topic_exists(broker.bootstrap, names[i])


@pytest.mark.kafka_differs(KAFKA_SYNONYMS)
def test_kafka_python_configs(kp_admin, broker, make_topic):
    from kafka.admin import AlterConfigOp, ConfigResourceType
    from kafka.admin import ConfigResource as KPConfigResource

    name = make_topic(1, config={"retention.ms": "86400000"})
    res = KPConfigResource(ConfigResourceType.TOPIC, name)
    got = kp_admin.describe_configs([res], include_synonyms=True)["topic"][name]
    assert [s["name"] for s in got["retention.ms"]["synonyms"]][:2] == ["retention.ms", "log.retention.hours"]
    assert [s["source"] for s in got["retention.ms"]["synonyms"]][-1] == "DEFAULT_CONFIG"
    kp_admin.alter_configs([KPConfigResource(ConfigResourceType.TOPIC, name, {
        "cleanup.policy": (AlterConfigOp.APPEND, "compact"),
        "retention.ms": (AlterConfigOp.DELETE, None),
        "min.compaction.lag.ms": "1000"})])
    got = kp_admin.describe_configs([res])["topic"][name]
    assert {k: v["value"] for k, v in got.items()} == {"cleanup.policy": "delete,compact",
                                                        "min.compaction.lag.ms": "1000"}
    everything = kp_admin.describe_configs([res], config_filter="all")["topic"][name]
    assert everything["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    me = node_id(broker.bootstrap)
    bres = KPConfigResource(ConfigResourceType.BROKER, str(me))
    bcfg = kp_admin.describe_configs([bres], config_filter="all")["broker"][str(me)]
    assert bcfg["log.segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert bcfg["log.segment.bytes"]["read_only"] is False


@pytest.mark.single_broker("asserts the one broker of a single-broker cluster in the old Metadata versions")
def test_aiokafka_admin_old_versions(broker, topic):
    """aiokafka's admin speaks old versions (CreateTopics v3, DescribeConfigs v2, AlterConfigs v1, ...)."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions
    from aiokafka.admin import NewTopic as AIONewTopic
    from aiokafka.admin.config_resource import ConfigResource as AIOConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AIOType
    from aiokafka.admin.records_to_delete import RecordsToDelete
    from aiokafka.structs import TopicPartition as AIOTopicPartition

    async def run() -> None:
        a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await a.start()
        try:
            r = await a.create_topics([AIONewTopic(topic, 2, 1, topic_configs={"retention.ms": "1000"})])
            assert [e[1] for e in r.topic_errors] == [0]
            r = await a.create_topics([AIONewTopic(topic, 2, 1)])
            assert [e[1] for e in r.topic_errors] == [36]
            [d] = await a.describe_configs([AIOConfigResource(AIOType.TOPIC, topic)])
            entries = {e[0]: e for e in d.resources[0][4]}
            assert entries["retention.ms"][1] == "1000" and entries["retention.ms"][3] == 1
            [r] = await a.alter_configs([AIOConfigResource(AIOType.TOPIC, topic, {"segment.ms": "100000"})])
            assert r.resources[0][0] == 0
            r = await a.create_partitions({topic: NewPartitions(4)})
            assert [e[1] for e in r.topic_errors] == [0]
            # Kafka's broker leads the new partitions once its metadata log says so, a moment after the
            # answer (NOT_LEADER_OR_FOLLOWER meanwhile, which aiokafka's delete_records does not retry)
            wait_for_topic(broker.bootstrap, topic, 4)
            c = await a.describe_cluster()
            assert c["brokers"][0]["port"] == broker.port and c["controller_id"] == c["brokers"][0]["node_id"]
            r = await a.delete_records({AIOTopicPartition(topic, 3): RecordsToDelete(0)})
            assert r == {AIOTopicPartition(topic, 3): 0}
            r = await a.delete_topics([topic])
            assert [e[1] for e in r.topic_error_codes] == [0]
        finally:
            await a.close()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT))
    assert not topic_exists(broker.bootstrap, topic)


@pytest.mark.kafka_differs("Kafka 4.4 deletes __consumer_offsets when asked (DeleteTopics answers no "
                           "error); moldau protects its internal topics (INVALID_REQUEST, "
                           "docs/architecture.md)")
def test_internal_topic_cannot_be_deleted(broker_factory):
    b = broker_factory()
    with Raw(b.bootstrap) as raw:
        CT, DT = m.CreateTopicsRequest, m.DeleteTopicsRequest
        if not topic_exists(b.bootstrap, "__consumer_offsets"):
            r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[CT.CreatableTopic(
                name="__consumer_offsets", num_partitions=1, replication_factor=1, assignments=[], configs=[
                    CT.CreatableTopicConfig(name="cleanup.policy", value="compact")])]))
            assert r.topics[0].error_code == 0
        r = raw.call(20, 5, DT.new(timeout_ms=5000, topic_names=["__consumer_offsets"]))
        assert r.responses[0].error_code == 42 and "internal" in r.responses[0].error_message
        assert topic_exists(b.bootstrap, "__consumer_offsets")
        # DeleteRecords on it is refused too (INVALID_TOPIC_EXCEPTION, as Kafka)
        DR = m.DeleteRecordsRequest
        r = raw.call(21, 2, DR.new(timeout_ms=5000, topics=[DR.DeleteRecordsTopic(
            name="__consumer_offsets", partitions=[DR.DeleteRecordsPartition(partition_index=0,
            offset=-1)])]))
        assert r.topics[0].partitions[0].error_code == 17


@pytest.mark.single_broker("reassignment on one node; the cluster's reassignments are "
                           "tests/cluster/test_cluster_reassign.py")
def test_partition_reassignment_on_one_node(broker, make_topic):
    """AlterPartitionReassignments / ListPartitionReassignments on a single broker: its own id is the only
    valid target (nothing moves), another id INVALID_REPLICA_ASSIGNMENT, a cancel NO_REASSIGNMENT_IN_PROGRESS,
    an unknown partition UNKNOWN_TOPIC_OR_PARTITION; nothing is ever ongoing."""
    from moldau.client import Admin
    from moldau.client import TopicPartition as TP
    from moldau.protocol.errors import ErrorCode

    name = make_topic(1)
    tp = TP(name, 0)
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        node = a.describe_cluster().controller_id
        assert a.alter_partition_reassignments({tp: [node]}) == {tp: None}
        res = a.alter_partition_reassignments(
            {tp: [node + 1], TP(name, 5): [node]}, raise_errors=False)
        assert getattr(res[tp], "code", None) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert getattr(res[TP(name, 5)], "code", None) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        res = a.alter_partition_reassignments({tp: None}, raise_errors=False)
        assert getattr(res[tp], "code", None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        assert a.list_partition_reassignments() == {}

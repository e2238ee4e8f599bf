"""Every Kafka broker and topic config name is accepted, stored and described; other names stay refused.

librdkafka's own test suite sets configs moldau does not implement: 0092 sets the topic config
``message.format.version`` (Kafka 3.x accepts and ignores it, KIP-724), 0081 sets the broker config
``sasl.kerberos.min.time.before.relogin``. Driven with confluent-kafka (librdkafka) here.
"""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from moldau.broker.kafka_config_names import KAFKA_BROKER_CONFIG_NAMES, KAFKA_TOPIC_CONFIG_NAMES
from moldau.broker.topic_config import STORED_ONLY_DOC, TOPIC_CONFIGS
from moldau.protocol import frame
from moldau.protocol import messages as m

from harness.kafkautil import admin, create_topic, unique_topic
from harness.rawkafka import read_exact

pytestmark = pytest.mark.moldau_only("moldau's config tables")
T = 15
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


def _err(fut) -> KafkaError:
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=T)
    return ei.value.args[0]


def _describe(a, res: ConfigResource) -> dict:
    return a.describe_configs([res], request_timeout=T)[res].result(timeout=T)


def test_every_kafka_topic_config_name_is_in_moldaus_table():
    assert KAFKA_TOPIC_CONFIG_NAMES <= set(TOPIC_CONFIGS)
    assert len(KAFKA_BROKER_CONFIG_NAMES) > 300


@pytest.mark.kafka_differs(
    "Kafka 4.0 removed the topic config message.format.version (KIP-724) and refuses it as an unknown name; "
    "moldau accepts and ignores it as Kafka 3.x did, for clients that still set it (librdkafka 2.0.2's "
    "test 0092)")
def test_topic_message_format_version_is_accepted_and_ignored(broker):
    a = admin(broker.bootstrap)
    name = create_topic(broker.bootstrap, unique_topic("mfv"), 1)
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("message.format.version", "0.10.0.0", incremental_operation=SET)])
    a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)
    e = _describe(a, ConfigResource(ResourceType.TOPIC, name))["message.format.version"]
    assert e.value == "0.10.0.0" and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # legacy AlterConfigs too (what 0092 falls back to), and CreateTopics
    legacy = ConfigResource(ResourceType.TOPIC, name, set_config={"message.format.version": "0.11.0"})
    with pytest.warns(DeprecationWarning):
        fut = a.alter_configs([legacy], request_timeout=T)[legacy]
    fut.result(timeout=T)
    other = create_topic(broker.bootstrap, unique_topic("mfv2"), 1,
                         config={"message.format.version": "2.8-IV1"})
    assert _describe(a, ConfigResource(ResourceType.TOPIC, other))[
        "message.format.version"].value == "2.8-IV1"
    # still a checked value, and names that are not Kafka's stay refused
    bad = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("message.format.version", "not-a-version", incremental_operation=SET)])
    err = _err(a.incremental_alter_configs([bad], request_timeout=T)[bad])
    assert err.code() == KafkaError.INVALID_CONFIG
    bogus = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("message.format.versions", "3.0", incremental_operation=SET)])
    err = _err(a.incremental_alter_configs([bogus], request_timeout=T)[bogus])
    assert err.code() == KafkaError.INVALID_CONFIG


def _call(bootstrap: str, api_key: int, version: int, req):
    host, port = bootstrap.split(",")[0].rsplit(":", 1)  # a cluster: its first broker
    with socket.create_connection((host, int(port)), timeout=T) as sock:
        sock.sendall(frame.encode_request(api_key, version, 1, "config-names-test", req))
        body = read_exact(sock, struct.unpack(">i", read_exact(sock, 4))[0])
    _hdr, off = frame.decode_response_header(body, api_key, version)
    return m.RESPONSES[api_key].decode(body, version, off)[0]


@pytest.mark.kafka_differs(
    "Kafka 3.2 and later refuse a name given twice in legacy AlterConfigs too (INVALID_REQUEST 'Error due "
    "to duplicate config keys', KAFKA-13552); moldau takes the last value as Kafka before 3.2 did, which "
    "librdkafka 2.0.2's test helper needs")
def test_legacy_alter_configs_takes_the_last_of_a_name_given_twice(broker):
    """What librdkafka's test helper sends (every described config, then the changed ones): Kafka before 3.2
    built a map from the list, the last value won. IncrementalAlterConfigs still refuses a name given
    twice."""
    name = create_topic(broker.bootstrap, unique_topic("dup"), 1)
    A = m.AlterConfigsRequest
    r = _call(broker.bootstrap, 33, 1, A.new(validate_only=False, resources=[A.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[
            A.AlterableConfig(name="retention.ms", value="1000000"),
            A.AlterableConfig(name="retention.ms", value="2000000")])]))
    assert r.responses[0].error_code == 0, r.responses[0]
    a = admin(broker.bootstrap)
    assert _describe(a, ConfigResource(ResourceType.TOPIC, name))["retention.ms"].value == "2000000"
    inc = m.IncrementalAlterConfigsRequest
    r = _call(broker.bootstrap, 44, 1, inc.new(validate_only=False, resources=[inc.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[
            inc.AlterableConfig(name="retention.ms", config_operation=0, value="1"),
            inc.AlterableConfig(name="retention.ms", config_operation=0, value="2")])]))
    assert r.responses[0].error_code == KafkaError.INVALID_REQUEST


@pytest.mark.kafka_differs("Kafka 4.0 removed message.timestamp.difference.max.ms (KIP-937: "
                           "message.timestamp.before.max.ms / after.max.ms replace it) and refuses it as an "
                           "unknown name; moldau still applies it, as Kafka 3.x did")
def test_topic_timestamp_difference_override_takes_effect(broker):
    from confluent_kafka import Producer

    a = admin(broker.bootstrap)
    name = create_topic(broker.bootstrap, unique_topic("tsdiff"), 1,
                        config={"message.timestamp.difference.max.ms": "60000"})
    assert _describe(a, ConfigResource(ResourceType.TOPIC, name))[
        "message.timestamp.difference.max.ms"].value == "60000"
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    p.produce(name, b"old", timestamp=1_000_000_000_000, on_delivery=lambda err, _m: errors.append(err))
    p.flush(T)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_TIMESTAMP, errors


@pytest.mark.kafka_differs(
    "sasl.kerberos.min.time.before.relogin is a static broker config in Kafka: Kafka 4.4 answers the "
    "IncrementalAlterConfigs with no error and goes on describing its static value; moldau stores and "
    "describes every Kafka broker config name as dynamic (what librdkafka 2.0.2's test 0081 sets), "
    "documented as having no effect")
def test_kafka_broker_config_names_are_stored_and_described(broker):
    a = admin(broker.bootstrap)
    me = str(next(iter(a.list_topics(timeout=10).brokers)))
    res = ConfigResource(ResourceType.BROKER, me, incremental_configs=[
        ConfigEntry("sasl.kerberos.min.time.before.relogin", "58000", incremental_operation=SET),
        ConfigEntry("listener.name.sasl_ssl.ssl.keystore.password", "s3cret", incremental_operation=SET)])
    a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)
    cfg = _describe(a, ConfigResource(ResourceType.BROKER, me))
    e = cfg["sasl.kerberos.min.time.before.relogin"]
    assert e.value == "58000" and e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value and not e.is_read_only
    pw = cfg["listener.name.sasl_ssl.ssl.keystore.password"]
    assert pw.is_sensitive and pw.value is None
    # the documentation field says it has no effect (DescribeConfigs v4 with documentation, a raw request)
    D = m.DescribeConfigsRequest
    req = D.new(resources=[D.DescribeConfigsResource(
        resource_type=4, resource_name=me, configuration_keys=["sasl.kerberos.min.time.before.relogin",
                                                              "sasl.kerberos.service.name"])],
        include_synonyms=False, include_documentation=True)
    r = _call(broker.bootstrap, 32, 4, req)
    entries = {c.name: c for c in r.results[0].configs}
    assert entries["sasl.kerberos.min.time.before.relogin"].documentation == STORED_ONLY_DOC
    assert "no effect in moldau" in STORED_ONLY_DOC
    assert entries["sasl.kerberos.service.name"].value is None  # a Kafka name asked for, never set
    # legacy AlterConfigs (what 0081 sends) replaces the level; DELETE removes a stored key
    legacy = ConfigResource(ResourceType.BROKER, me,
                            set_config={"sasl.kerberos.min.time.before.relogin": "60000"})
    with pytest.warns(DeprecationWarning):
        fut = a.alter_configs([legacy], request_timeout=T)[legacy]
    fut.result(timeout=T)
    assert _describe(a, ConfigResource(ResourceType.BROKER, me))[
        "sasl.kerberos.min.time.before.relogin"].value == "60000"
    rm = ConfigResource(ResourceType.BROKER, me, incremental_configs=[
        ConfigEntry("sasl.kerberos.min.time.before.relogin", None, incremental_operation=DELETE)])
    a.incremental_alter_configs([rm], request_timeout=T)[rm].result(timeout=T)
    assert "sasl.kerberos.min.time.before.relogin" not in _describe(
        a, ConfigResource(ResourceType.BROKER, me))
    # not a Kafka name: INVALID_CONFIG, naming it
    bogus = ConfigResource(ResourceType.BROKER, me, incremental_configs=[
        ConfigEntry("sasl.kerberos.min.time.before.relogins", "1", incremental_operation=SET)])
    err = _err(a.incremental_alter_configs([bogus], request_timeout=T)[bogus])
    assert err.code() == KafkaError.INVALID_CONFIG and "relogins" in err.str()

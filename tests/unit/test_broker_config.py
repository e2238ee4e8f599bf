import pytest

from moldau.broker.config import (
    BROKER_CONFIGS,
    SOURCE_DEFAULT,
    SOURCE_STATIC,
    BrokerConfig,
    ConfigError,
    parse_properties,
    parse_set_option,
)


def test_defaults():
    c = BrokerConfig.load(env={})
    assert c.node_id == 1
    assert c.get("num.partitions") == 1
    assert c.get("auto.create.topics.enable") is True
    assert c.get("message.max.bytes") == 1048588
    assert c.get("log.retention.bytes") == -1
    assert c.retention_ms == 168 * 3600 * 1000
    assert c.get("offsets.topic.num.partitions") == 50
    assert c.get("socket.request.max.bytes") == 104857600
    assert c.get("connections.max.idle.ms") == 600000
    assert c.listeners[0].host == "127.0.0.1" and c.listeners[0].port == 9092
    assert c.source("num.partitions") == SOURCE_DEFAULT


def test_properties_syntax():
    text = (
        "# comment\n"
        "! another comment\n"
        "num.partitions=3\n"
        "log.dirs : /tmp/a\\\n"
        "   ,/tmp/b\n"
        "  broker.rack   rack\\u0031\n"
        "advertised.listeners=PLAINTEXT://h\\:9093\n"
        "empty=\n"
        "key\\ with\\ space=v\n"
    )
    pairs = dict(parse_properties(text))
    assert pairs["num.partitions"] == "3"
    assert pairs["log.dirs"] == "/tmp/a,/tmp/b"
    assert pairs["broker.rack"] == "rack1"
    assert pairs["advertised.listeners"] == "PLAINTEXT://h:9093"
    assert pairs["empty"] == ""
    assert pairs["key with space"] == "v"


def test_load_file_env_overrides(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("num.partitions=3\nlog.retention.hours=1\nbroker.id=7\n")
    c = BrokerConfig.load(str(f), {"num.partitions": "5"}, env={"MOLDAU_LOG_RETENTION_MS": "1234",
                                                                 "MOLDAU_TEST_BROKER": "x"})
    assert c.get("num.partitions") == 5
    assert c.retention_ms == 1234
    assert c.node_id == 7
    assert c.source("num.partitions") == SOURCE_STATIC


def test_retention_precedence():
    assert BrokerConfig.from_dict({"log.retention.minutes": 2}).retention_ms == 120000
    assert BrokerConfig.from_dict({"log.retention.ms": -1, "log.retention.minutes": 2}).retention_ms == -1


def test_unknown_key_named(tmp_path):
    f = tmp_path / "s.properties"
    f.write_text("no.such.key=1\n")
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(str(f), env={})
    assert "no.such.key" in str(e.value)
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(None, {"bogus": "1"}, env={})
    assert e.value.key == "bogus"
    with pytest.raises(ConfigError):
        parse_set_option("bogus.key=1")
    with pytest.raises(ConfigError):
        parse_set_option("novalue")
    assert parse_set_option("num.partitions=4") == ("num.partitions", "4")


@pytest.mark.parametrize("key,value", [
    ("num.partitions", "abc"), ("num.partitions", "0"), ("auto.create.topics.enable", "yes"),
    ("log.message.timestamp.type", "Wrong"), ("message.max.bytes", "99999999999"), ("listeners", "nonsense"),
    ("log.cleanup.policy", "delete,bogus"),
])
def test_type_validation_names_key(key, value):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(None, {key: value}, env={})
    assert key in str(e.value)


def test_listeners_and_advertised():
    c = BrokerConfig.load(
        None,
        {
            "listeners": "PLAINTEXT://0.0.0.0:9092,INTERNAL://:9093",
            "advertised.listeners": "PLAINTEXT://example.com:19092",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        },
        env={},
    )
    assert [(lst.name, lst.host, lst.port) for lst in c.listeners] == [("PLAINTEXT", "0.0.0.0", 9092),
                                                                        ("INTERNAL", "", 9093)]
    assert c.advertised_listeners[0].host == "example.com"


def test_entries_and_raw():
    c = BrokerConfig.load(None, {"log.cleanup.policy": "compact,delete"}, env={})
    assert c.raw("log.cleanup.policy") == "compact,delete"
    names = {e.name for e in c.entries()}
    assert "log.segment.bytes" in names and len(names) == len(BROKER_CONFIGS)
    pw = [e for e in c.entries() if e.name == "ssl.key.password"][0]
    assert pw.sensitive


def test_dynamic():
    c = BrokerConfig.load(None, {}, env={})
    c.set_dynamic("log.retention.ms", "5000")
    assert c.retention_ms == 5000
    with pytest.raises(ConfigError):
        c.set_dynamic("node.id", "3")


def test_typed_views_of_the_central_keys():
    selector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    cfg = BrokerConfig.from_dict({"log.dirs": "/tmp/x", "replica.fetch.max.bytes": "2097152",
                                  "socket.listen.backlog.size": "7", "broker.rack": "r1",
                                  "replica.selector.class": selector})
    assert cfg.replication.fetch_max_bytes == 2097152
    assert cfg.replication.fetch_wait_max_ms == cfg.get("replica.fetch.wait.max.ms")
    assert cfg.replication.rack == "r1" and cfg.replication.selector_class == selector
    assert cfg.socket.listen_backlog_size == 7
    assert cfg.log.retention_check_interval_ms == cfg.get("log.retention.check.interval.ms")
    assert cfg.quota.window_num == cfg.get("quota.window.num")
    assert cfg.socket.queued_max_request_bytes == cfg.get("queued.max.request.bytes") == -1

import json
import uuid

import pytest

from moldau.broker.config import BrokerConfig
from moldau.broker.metadata import METADATA_FILE, MetadataStore, is_valid_topic_name, validate_topic_name
from moldau.protocol.errors import KafkaError


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "x" * 249, "__consumer_offsets", "..."])
def test_valid_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "ä", "a\n", None])
def test_invalid_names(name):
    with pytest.raises(KafkaError) as e:
        validate_topic_name(name)
    assert int(e.value.code) == 17
    assert not is_valid_topic_name(name)


class Rec:
    def __init__(self):
        self.events = []

    def on_topic_created(self, t):
        self.events.append(("created", t.name))

    def on_topic_deleted(self, t):
        self.events.append(("deleted", t.name))

    def on_partitions_created(self, t, old):
        self.events.append(("partitions", t.name, old, t.num_partitions))

    def on_topic_configs_changed(self, t):
        self.events.append(("configs", t.name))


def test_create_persist_reload(tmp_path):
    cfg = BrokerConfig.load(None, {"num.partitions": "3"}, env={})
    s = MetadataStore(str(tmp_path), broker_config=cfg)
    rec = Rec()
    s.listeners.append(rec)
    t = s.create_topic("orders")
    assert t.num_partitions == 3 and isinstance(t.topic_id, uuid.UUID)
    s.create_topic("__consumer_offsets", 2, 1, {"cleanup.policy": "compact"})
    assert s.get("__consumer_offsets").is_internal
    s.create_partitions("orders", 5)
    s.alter_topic_configs("orders", {"retention.ms": "1000"})
    assert rec.events == [("created", "orders"), ("created", "__consumer_offsets"),
                          ("partitions", "orders", 3, 5), ("configs", "orders")]
    doc = json.loads((tmp_path / METADATA_FILE).read_text())
    assert {t["name"] for t in doc["topics"]} == {"orders", "__consumer_offsets"}
    s2 = MetadataStore(str(tmp_path), broker_config=cfg)
    s2.load()
    assert s2.get("orders").num_partitions == 5
    assert s2.get("orders").configs == {"retention.ms": "1000"}
    assert s2.get_by_id(t.topic_id).name == "orders"
    s2.delete_topic("orders")
    s3 = MetadataStore(str(tmp_path))
    s3.load()
    assert "orders" not in s3.topics and not list((tmp_path).glob("*.tmp"))


def _code(fn):
    with pytest.raises(KafkaError) as e:
        fn()
    return int(e.value.code)


def test_errors(tmp_path):
    s = MetadataStore(str(tmp_path))
    s.create_topic("a.b", 1, 1)
    assert _code(lambda: s.create_topic("a.b", 1, 1)) == 36
    assert _code(lambda: s.create_topic("a_b", 1, 1)) == 17  # '.'/'_' collision
    assert _code(lambda: s.create_topic("bad name", 1, 1)) == 17
    assert _code(lambda: s.create_topic("z", 0, 1)) == 37
    assert _code(lambda: s.create_topic("z", 1, 3)) == 38
    assert _code(lambda: s.create_partitions("a.b", 1)) == 37
    assert _code(lambda: s.create_partitions("nope", 3)) == 3
    assert _code(lambda: s.delete_topic("nope")) == 3
    t = s.create_topic("v", 1, 1, validate_only=True)
    assert t.name == "v" and "v" not in s.topics
    s.delete_topic("a.b")
    s.create_topic("a_b", 1, 1)  # no collision once the other is gone


def test_delete_disabled(tmp_path):
    cfg = BrokerConfig.load(None, {"delete.topic.enable": "false"}, env={})
    s = MetadataStore(str(tmp_path), broker_config=cfg)
    s.create_topic("t", 1, 1)
    assert _code(lambda: s.delete_topic("t")) == 73

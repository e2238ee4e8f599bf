"""moldau.broker.topic_config: validation, synonyms and sources, describe, incremental ops, LogConfig."""
from __future__ import annotations

import pytest

from moldau.broker import topic_config as tc
from moldau.broker.topic_config import AlterConfigOp as Op
from moldau.broker.topic_config import ConfigSource as Src


def _code(exc: BaseException) -> int:
    return tc.error_code_of(exc)


# ---------------------------------------------------------------------------------------------- the table


def test_table_has_kafka_defaults_and_synonyms() -> None:
    t = tc.TOPIC_CONFIGS
    assert t["retention.ms"].default == 604_800_000
    assert [s.name for s in t["retention.ms"].broker_synonyms] == [
        "log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert t["segment.bytes"].broker_synonym == "log.segment.bytes"
    assert t["max.message.bytes"].broker_synonym == "message.max.bytes"
    assert t["max.message.bytes"].default == 1_048_588
    assert t["cleanup.policy"].broker_synonym == "log.cleanup.policy"
    assert t["flush.messages"].broker_synonym == "log.flush.interval.messages"
    assert t["message.timestamp.type"].broker_synonym == "log.message.timestamp.type"
    assert t["compression.type"].broker_synonym == "compression.type"
    assert t["segment.index.bytes"].broker_synonym == "log.index.size.max.bytes"
    assert t["min.cleanable.dirty.ratio"].broker_synonym == "log.cleaner.min.cleanable.ratio"
    assert t["cleanup.policy"].type == tc.ConfigType.LIST
    assert t["min.cleanable.dirty.ratio"].type == tc.ConfigType.DOUBLE
    for name in ("cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
                 "flush.messages", "flush.ms", "index.interval.bytes", "max.message.bytes",
                 "message.timestamp.type", "message.timestamp.before.max.ms",
                 "message.timestamp.after.max.ms",
                 "min.insync.replicas", "retention.bytes", "retention.ms", "segment.bytes",
                 "segment.index.bytes", "segment.ms", "segment.jitter.ms", "unclean.leader.election.enable",
                 "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio", "preallocate",
                 "message.downconversion.enable"):
        assert name in t, name


# ---------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("name,value", [
    ("retention.ms", "-1"), ("retention.ms", "1000"), ("cleanup.policy", "compact,delete"),
    ("cleanup.policy", " compact , delete "), ("compression.type", "zstd"),
    ("min.cleanable.dirty.ratio", "0.9"),
    ("message.timestamp.type", "LogAppendTime"), ("preallocate", "TRUE"), ("retention.bytes", "-1"),
    ("segment.bytes", str(1024 * 1024)), ("flush.messages", "1"), ("min.insync.replicas", "1"),
    ("unclean.leader.election.enable", "false"), ("internal.segment.bytes", "1000"),
    ("compression.gzip.level", "-1"), ("compression.gzip.level", "9"),
])
def test_valid_values(name: str, value: str) -> None:
    assert tc.validate_topic_config(name, value) is not None
    tc.validate_topic_configs({name: value})


@pytest.mark.parametrize("name,value,fragment", [
    ("retention.ms", "-2", "at least -1"),
    ("retention.ms", "abc", "Not a number"),
    ("retention.ms", "9223372036854775808", "LONG"),
    ("segment.bytes", "100", "at least 1048576"),
    ("segment.bytes", "3000000000", "INT"),
    ("cleanup.policy", "compact,bogus", "compact, delete"),
    ("cleanup.policy", "delete,delete", "duplicated"),
    ("compression.type", "brotli", "String must be one of"),
    ("compression.type", "ZSTD", "String must be one of"),
    ("min.cleanable.dirty.ratio", "1.5", "no more than 1"),
    ("message.timestamp.type", "createtime", "CreateTime, LogAppendTime"),
    ("preallocate", "yes", "true or false"),
    ("flush.messages", "0", "at least 1"),
    ("min.insync.replicas", "0", "at least 1"),
    ("compression.gzip.level", "10", "between 1 and 9"),
    ("remote.storage.enable", "true", "Tiered Storage"),
    ("leader.replication.throttled.replicas", "0-1", "[partitionId]:[brokerId]"),
])
def test_invalid_values(name: str, value: str, fragment: str) -> None:
    with pytest.raises(Exception) as info:
        tc.validate_topic_configs({name: value})
    assert _code(info.value) == 40
    msg = tc.error_message_of(info.value)
    assert fragment in msg and name in msg


def test_unknown_and_null_configs_refused() -> None:
    with pytest.raises(Exception) as info:
        tc.validate_topic_configs({"retention.mss": "1"})
    assert _code(info.value) == 40 and "Unknown topic config name: retention.mss" in tc.error_message_of(
        info.value
    )
    with pytest.raises(Exception) as info:
        tc.validate_topic_configs({"retention.ms": None})
    assert _code(info.value) == 40


def test_cross_check_compaction_lags() -> None:
    with pytest.raises(Exception) as info:
        tc.validate_topic_configs({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"})
    assert "min.compaction.lag.ms" in tc.error_message_of(info.value)
    tc.validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"})


def test_normalize_writes_kafka_strings() -> None:
    assert tc.normalize_topic_configs({"cleanup.policy": " compact , delete", "preallocate": "TRUE",
                                       "retention.ms": " 5 "}) == {
        "cleanup.policy": "compact,delete", "preallocate": "true", "retention.ms": "5"}


# ---------------------------------------------------------------------------------------------- sources


def test_default_source_and_synonym() -> None:
    value, source, is_default, syns = tc.describe_topic_config({}, None, "retention.ms")
    assert (value, source, is_default) == ("604800000", Src.DEFAULT_CONFIG, True)
    assert [(s.name, s.value, s.source) for s in syns] == [("log.retention.hours", "168", Src.DEFAULT_CONFIG)]


def test_topic_override_source() -> None:
    value, source, is_default, syns = tc.describe_topic_config({"retention.ms": "1000"}, None, "retention.ms")
    assert (value, source, is_default) == ("1000", Src.DYNAMIC_TOPIC_CONFIG, False)
    assert syns[0].name == "retention.ms" and syns[0].source == Src.DYNAMIC_TOPIC_CONFIG
    assert syns[-1].name == "log.retention.hours"


def test_static_broker_synonym_with_unit_conversion() -> None:
    broker = {"log.retention.hours": "24", "log.segment.bytes": "2097152", "log.cleanup.policy": "compact"}
    value, source, is_default, syns = tc.describe_topic_config({}, broker, "retention.ms")
    assert (value, source, is_default) == (str(24 * 3_600_000), Src.STATIC_BROKER_CONFIG, False)
    assert [(s.name, s.source) for s in syns] == [
        ("log.retention.hours", Src.STATIC_BROKER_CONFIG), ("log.retention.hours", Src.DEFAULT_CONFIG)]
    # log.retention.ms wins over log.retention.hours
    broker["log.retention.ms"] = "5000"
    assert tc.describe_topic_config({}, broker, "retention.ms")[:2] == ("5000", Src.STATIC_BROKER_CONFIG)
    assert tc.describe_topic_config({}, broker, "segment.bytes")[:2] == ("2097152", Src.STATIC_BROKER_CONFIG)
    assert tc.describe_topic_config({}, broker, "cleanup.policy")[:2] == ("compact", Src.STATIC_BROKER_CONFIG)


def test_dynamic_broker_sources_order() -> None:
    dyn = tc.DynamicBrokerConfigs(per_broker={"log.retention.ms": "111"},
                                  cluster_default={"log.retention.ms": "222", "log.segment.bytes": "3145728"})
    view = tc.BrokerConfigView({"log.retention.ms": "333"}, dyn)
    value, source, _, syns = tc.describe_topic_config({}, view, "retention.ms")
    assert (value, source) == ("111", Src.DYNAMIC_BROKER_CONFIG)
    assert [s.source for s in syns] == [Src.DYNAMIC_BROKER_CONFIG, Src.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                        Src.STATIC_BROKER_CONFIG, Src.DEFAULT_CONFIG]
    assert tc.describe_topic_config({}, view, "segment.bytes")[:2] == (
        "3145728",
        Src.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # the topic override beats everything
    assert tc.describe_topic_config({"retention.ms": "7"}, view, "retention.ms")[:2] == (
        "7",
        Src.DYNAMIC_TOPIC_CONFIG,
    )


def test_attached_dynamic_configs_seen_through_plain_object() -> None:
    class FakeBrokerConfig:
        def __init__(self) -> None:
            self.values = {"log.segment.bytes": 4194304}

        def get(self, key: str):
            if key in self.values:
                return self.values[key]
            if key in tc.BROKER_SYNONYM_DEFAULTS:
                return tc.BROKER_SYNONYM_DEFAULTS[key]
            raise KeyError(key)

        def source(self, key: str) -> str:
            return "STATIC_BROKER_CONFIG" if key in self.values else "DEFAULT_CONFIG"

    cfg = FakeBrokerConfig()
    assert tc.describe_topic_config({}, cfg, "segment.bytes")[:2] == ("4194304", Src.STATIC_BROKER_CONFIG)
    assert tc.describe_topic_config({}, cfg, "retention.ms")[:3] == ("604800000", Src.DEFAULT_CONFIG, True)
    tc.dynamic_configs_of(cfg).cluster_default["log.retention.ms"] = "1234"
    assert tc.describe_topic_config({}, cfg, "retention.ms")[:2] == (
        "1234",
        Src.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )


def test_describe_all_sorted_with_types_and_docs() -> None:
    entries = tc.describe_topic_configs({"cleanup.policy": "compact"}, None)
    names = [e.name for e in entries]
    assert names == sorted(names) and "internal.segment.bytes" not in names
    by = {e.name: e for e in entries}
    assert by["cleanup.policy"].value == "compact" and by["cleanup.policy"].source == Src.DYNAMIC_TOPIC_CONFIG
    assert by["cleanup.policy"].config_type == tc.ConfigType.LIST
    assert by["min.cleanable.dirty.ratio"].value == "0.5"
    assert by["preallocate"].value == "false" and by["preallocate"].config_type == tc.ConfigType.BOOLEAN
    assert by["flush.messages"].value == str(tc.LONG_MAX)
    assert all(e.documentation for e in entries)
    assert all(not e.read_only and not e.sensitive for e in entries)
    some = tc.describe_topic_configs({}, None, ["segment.ms", "nope"], include_synonyms=False,
                                     include_documentation=False)
    assert [(e.name, e.synonyms, e.documentation) for e in some] == [("segment.ms", [], None)]


# ---------------------------------------------------------------------------------------------- incremental


def test_incremental_set_delete() -> None:
    cur = {"retention.ms": "1000", "segment.ms": "5000"}
    new = tc.apply_incremental_ops(cur, [("retention.ms", Op.SET, "2000"), ("segment.ms", Op.DELETE, None)])
    assert new == {"retention.ms": "2000"}
    assert cur == {"retention.ms": "1000", "segment.ms": "5000"}       # input untouched
    assert tc.apply_incremental_ops({}, [("segment.ms", Op.DELETE, None)]) == {}


def test_incremental_append_subtract_on_list() -> None:
    # APPEND with no override starts from the effective value ("delete")
    assert tc.apply_incremental_ops({}, [("cleanup.policy", Op.APPEND, "compact")]) == {
        "cleanup.policy": "delete,compact"}
    # APPEND of something present does not duplicate
    assert tc.apply_incremental_ops(
        {"cleanup.policy": "compact"}, [("cleanup.policy", Op.APPEND, "compact")]
    ) == {"cleanup.policy": "compact"}
    assert tc.apply_incremental_ops(
        {"cleanup.policy": "compact,delete"}, [("cleanup.policy", Op.SUBTRACT, "delete")]
    ) == {"cleanup.policy": "compact"}
    # subtracting everything leaves an empty list
    assert tc.apply_incremental_ops({"cleanup.policy": "compact"},
                                    [("cleanup.policy", Op.SUBTRACT, "compact")]) == {"cleanup.policy": ""}
    # broker-level value is the base for APPEND
    assert tc.apply_incremental_ops({}, [("cleanup.policy", Op.APPEND, "delete")],
                                    {"log.cleanup.policy": "compact"}) == {"cleanup.policy": "compact,delete"}
    # throttled replicas list
    assert tc.apply_incremental_ops(
        {}, [("leader.replication.throttled.replicas", Op.APPEND, "0:1,1:1")]
    ) == {"leader.replication.throttled.replicas": "0:1,1:1"}


def test_incremental_errors() -> None:
    with pytest.raises(Exception) as info:
        tc.apply_incremental_ops({}, [("retention.ms", Op.APPEND, "5")])
    assert _code(info.value) == 40 and "LIST" in tc.error_message_of(info.value)
    with pytest.raises(Exception) as info:
        tc.apply_incremental_ops({}, [("cleanup.policy", Op.APPEND, "bogus")])
    assert _code(info.value) == 40
    with pytest.raises(Exception) as info:
        tc.apply_incremental_ops({}, [("retention.ms", Op.SET, "1"), ("retention.ms", Op.SET, "2")])
    assert _code(info.value) == 42
    with pytest.raises(Exception) as info:
        tc.apply_incremental_ops({}, [("nope", Op.SET, "1")])
    assert _code(info.value) == 40
    with pytest.raises(Exception) as info:
        tc.apply_incremental_ops({}, [("retention.ms", 7, "1")])
    assert _code(info.value) == 42


def test_replace_configs_is_whole_set() -> None:
    assert tc.replace_configs({"segment.ms": "100"}) == {"segment.ms": "100"}
    with pytest.raises(Exception):
        tc.replace_configs({"segment.ms": "0"})


# ---------------------------------------------------------------------------------------------- broker keys


def test_dynamic_broker_key_validation() -> None:
    assert tc.validate_broker_config("log.retention.ms", "1000") == 1000
    with pytest.raises(Exception) as info:      # as Kafka: only the first synonym is dynamic
        tc.validate_broker_config("log.retention.hours", "2")
    assert _code(info.value) == 42 and "log.retention.hours" in tc.error_message_of(info.value)
    assert tc.validate_broker_config("log.cleanup.policy", "compact,delete") == ["compact", "delete"]
    with pytest.raises(Exception) as info:
        tc.validate_broker_config("num.partitions", "3")
    assert _code(info.value) == 42 and "num.partitions" in tc.error_message_of(info.value)
    with pytest.raises(Exception) as info:
        tc.validate_broker_config("log.segment.bytes", "10")
    assert _code(info.value) == 40 and "log.segment.bytes" in tc.error_message_of(info.value)


def test_dynamic_broker_setting_set_and_deleted() -> None:
    """A broker setting moldau reads at runtime (dynamic in Kafka too) is set, validated and deleted on a
    BROKER resource: kafka-reassign-partitions.sh --verify deletes the three throttle keys on every broker."""
    key = "replica.alter.log.dirs.io.max.bytes.per.second"
    assert tc.is_dynamic_broker_key(key) and not tc.is_dynamic_broker_key("num.partitions")
    assert tc.validate_broker_config(key, "1048576") == "1048576"
    for bad in ("0", "lots"):
        with pytest.raises(Exception) as info:
            tc.validate_broker_config(key, bad)
        assert _code(info.value) == 40 and key in tc.error_message_of(info.value)
    view = tc.BrokerConfigView({}, tc.DynamicBrokerConfigs())
    new = tc.apply_broker_ops({}, [(key, Op.SET, "2048")], view)
    assert new == {key: "2048"}
    throttles = ["leader.replication.throttled.rate", "follower.replication.throttled.rate", key]
    assert tc.apply_broker_ops(new, [(k, Op.DELETE, None) for k in throttles], view) == {}
    with pytest.raises(Exception) as info:      # still refused: a setting moldau does not change at runtime
        tc.apply_broker_ops({}, [("num.partitions", Op.DELETE, None)], view)
    assert _code(info.value) == 42
    entries = {e.name: e for e in tc.describe_broker_configs(view, [key, "num.partitions"])}
    assert not entries[key].read_only and entries["num.partitions"].read_only


# ---------------------------------------------------------------------------------------------- LogConfig


def test_log_config_kwargs_maps_fields_and_types() -> None:
    fields = {"segment_bytes": 1, "retention_ms": 1, "cleanup_policy": ("delete",), "compact": False,
              "message_timestamp_type": "CreateTime", "min_cleanable_dirty_ratio": 0.5, "preallocate": False,
              "flush_interval_messages": 1, "unrelated": 3}
    kw = tc.log_config_kwargs({"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime",
                               "internal.segment.bytes": "4096"}, {"log.retention.hours": "1"}, fields)
    assert kw["segment_bytes"] == 4096
    assert kw["retention_ms"] == 3_600_000
    assert kw["cleanup_policy"] == ("compact",)
    assert kw["compact"] is True
    assert kw["message_timestamp_type"] == "LogAppendTime"
    assert kw["min_cleanable_dirty_ratio"] == 0.5
    assert kw["flush_interval_messages"] == tc.LONG_MAX
    assert "unrelated" not in kw


def test_log_config_for_builds_real_log_config() -> None:
    cfg = tc.log_config_for({"retention.ms": "1234", "segment.bytes": "2097152"}, None)
    assert cfg.retention_ms == 1234
    assert cfg.segment_bytes == 2097152
    assert cfg.max_message_bytes == 1_048_588


def test_broker_ops_and_describe() -> None:
    view = tc.BrokerConfigView({"log.retention.hours": "24"}, tc.DynamicBrokerConfigs())
    new = tc.apply_broker_ops({}, [("log.retention.ms", Op.SET, "5000"),
                                   ("log.cleanup.policy", Op.APPEND, "compact")], view)
    assert new == {"log.retention.ms": "5000", "log.cleanup.policy": "delete,compact"}
    with pytest.raises(Exception) as info:
        tc.apply_broker_ops({}, [("log.retention.ms", Op.APPEND, "1")], view)
    assert _code(info.value) == 40
    with pytest.raises(Exception) as info:
        tc.apply_broker_ops({}, [("log.cleanup.policy", Op.APPEND, "bogus")], view)
    assert _code(info.value) == 40
    view.dynamic.per_broker.update(new)
    entries = {e.name: e for e in tc.describe_broker_configs(
        view, ["log.retention.ms", "log.retention.hours", "log.cleanup.policy", "log.segment.bytes"])}
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == (
        "5000", Src.DYNAMIC_BROKER_CONFIG)
    assert not entries["log.retention.ms"].read_only and entries["log.retention.hours"].read_only
    # log.retention.hours: its own synonyms only (Kafka drops the higher-priority ones)
    assert [s.name for s in entries["log.retention.hours"].synonyms] == ["log.retention.hours"] * 2
    assert entries["log.retention.hours"].source == Src.STATIC_BROKER_CONFIG
    assert entries["log.segment.bytes"].is_default
    # the topic level sees the dynamic broker value
    assert tc.describe_topic_config({}, view, "retention.ms")[:2] == ("5000", Src.DYNAMIC_BROKER_CONFIG)
    assert tc.describe_topic_config({}, view, "cleanup.policy")[:2] == (
        "delete,compact",
        Src.DYNAMIC_BROKER_CONFIG,
    )
    # resource name "": the cluster-wide dynamic defaults only
    view.dynamic.cluster_default["log.segment.bytes"] = "2097152"
    only = tc.describe_broker_configs(view, cluster_default_only=True)
    assert [(e.name, e.value, e.source) for e in only] == [
        ("log.segment.bytes", "2097152", Src.DYNAMIC_DEFAULT_BROKER_CONFIG)]


def test_invalid_stored_override_falls_back() -> None:
    value, source, _, _ = tc.describe_topic_config({"retention.ms": "junk"}, None, "retention.ms")
    assert (value, source) == ("604800000", Src.DEFAULT_CONFIG)
    assert tc.effective_topic_configs({"segment.bytes": "x"})["segment.bytes"] == 1073741824

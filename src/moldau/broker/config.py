"""Broker configuration: Kafka's server.properties keys, defaults and parsing.

Sources, lowest precedence first: Kafka's defaults (``BROKER_CONFIGS``), a server.properties file,
environment variables ``MOLDAU_<KEY>`` (dots -> underscores, upper case: ``MOLDAU_LOG_DIRS``), explicit
overrides (``--set key=value`` and the CLI flags). Unknown keys in the file or in overrides are refused with a
``ConfigError`` naming the key; unknown ``MOLDAU_*`` environment variables are ignored (tests and tools use
that prefix for other things).

Where moldau's default differs from Kafka's it is because the Kafka default is wrong for a one-command,
single-node local broker: ``node.id`` 1 (Kafka: required), ``listeners`` PLAINTEXT://127.0.0.1:9092,
``log.dirs`` ./moldau-data, and the replication factors of the internal topics
(``offsets.topic.replication.factor``, ``transaction.state.log.replication.factor``,
``transaction.state.log.min.isr``) 1 instead of 3/2.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .config_views import LogView, QuotaView, ReplicationView, SocketView

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


class ConfigError(ValueError):
    """A configuration key or value is not acceptable; the message names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


# Types use Kafka's ConfigDef.Type names in lower case.
TYPES = ("boolean", "string", "int", "short", "long", "double", "list", "class", "password")

# DescribeConfigs source names (Kafka's ConfigSource enum).
SOURCE_DEFAULT = "DEFAULT_CONFIG"
SOURCE_STATIC = "STATIC_BROKER_CONFIG"
SOURCE_DYNAMIC_BROKER = "DYNAMIC_BROKER_CONFIG"
SOURCE_DYNAMIC_DEFAULT_BROKER = "DYNAMIC_DEFAULT_BROKER_CONFIG"


@dataclass(slots=True, frozen=True)
class ConfigDef:
    name: str
    type: str
    default: Any  # typed Python value or None
    doc: str = ""
    dynamic: bool = False
    validator: Callable[[Any], str | None] | None = None  # returns an error text or None

    @property
    def sensitive(self) -> bool:
        return self.type == "password"


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None  # Kafka's string form (None = null; passwords are not hidden here)
    source: str
    is_default: bool
    sensitive: bool
    read_only: bool
    definition: ConfigDef


# --------------------------------------------------------------------------------------------- validators

def _at_least(n: int | float) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v is not None and v < n:
            return f"must be at least {n}"
        return None

    return check


def _one_of(*choices: str, case_insensitive: bool = False) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v is None:
            return None
        vv = v.lower() if case_insensitive else v
        cc = [c.lower() for c in choices] if case_insensitive else list(choices)
        if vv not in cc:
            return f"must be one of {', '.join(choices)}"
        return None

    return check


def _list_of(*choices: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v is None:
            return None
        for item in v:
            if item not in choices:
                return f"'{item}' is not one of {', '.join(choices)}"
        return None

    return check


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# --------------------------------------------------------------------------------------------- definitions

_DEFS: list[ConfigDef] = []


def _d(name: str, type_: str, default: Any, doc: str = "", dynamic: bool = False,
       validator: Callable[[Any], str | None] | None = None) -> None:
    assert type_ in TYPES, type_
    _DEFS.append(ConfigDef(name, type_, default, doc, dynamic, validator))


# node and listeners
_d("node.id", "int", 1, "The node id of this broker (moldau default 1; Kafka requires it).",
   validator=_at_least(0))
_d("broker.id", "int", None, "Alias of node.id.", validator=_at_least(-1))
_d("cluster.id", "string", None, "Cluster id; normally read from/created in meta.properties.")
_d("process.roles", "list", ["broker", "controller"], "Roles of this process (moldau is always both).",
   validator=_list_of("broker", "controller"))
_d("broker.rack", "string", None, "Rack of the broker.")
_d("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], "Listeners, NAME://host:port, comma separated.")
_d("advertised.listeners", "list", None, "Listeners published to clients (defaults to listeners).")
_d("listener.security.protocol.map", "string",
   "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,KAFKA07:KAFKA07",
   "Map of listener names to security protocols (moldau: KAFKA07 = the Kafka 0.7 wire protocol, plaintext).")
_d("inter.broker.listener.name", "string", None, "Listener used between brokers.")
_d("security.inter.broker.protocol", "string", "PLAINTEXT", "Security protocol between brokers.",
   validator=_one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
_d("controller.listener.names", "list", None, "Listener names used by the controller.")
_d("controller.quorum.voters", "list", [], "Controller quorum voters (id@host:port).")
_d("controller.quorum.bootstrap.servers", "list", [], "Controller quorum bootstrap servers.")
_d("zookeeper.connect", "string", None,
   "ZooKeeper connection string (host:port[,host:port][/chroot]): join that cluster (docs/cluster.md); "
   "unset: "
   "a single-node broker.")
_d("zookeeper.connection.timeout.ms", "int", None,
   "Max wait for the ZooKeeper connection (default: the session "
   "timeout).", validator=_at_least(1))
_d("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout.", validator=_at_least(1))
_d("reserved.broker.max.id", "int", 1000,
   "Max broker id for manual assignment; generated ids start above it.")
_d("broker.id.generation.enable", "boolean", True,
   "In a cluster without broker.id: take reserved.broker.max.id + the version of /brokers/seqid.")
_d("controlled.shutdown.enable", "boolean", True, "Controlled shutdown.")
_d("controlled.shutdown.max.retries", "int", 3, "Controlled shutdown attempts before stopping anyway.")
_d("controller.socket.timeout.ms", "int", 30000, "Timeout of the controller's requests to brokers.")
_d("auto.leader.rebalance.enable", "boolean", True, "Leader rebalancing.")
_d("leader.imbalance.check.interval.seconds", "long", 300, "")
_d("leader.imbalance.per.broker.percentage", "int", 10, "")

# network
_d("num.network.threads", "int", 3, "Accepted for compatibility (moldau uses one event loop).", True,
   _at_least(1))
_d("num.io.threads", "int", 8, "Accepted for compatibility (moldau uses one event loop).", True, _at_least(1))
_d("background.threads", "int", 10, "", True, _at_least(1))
_d("queued.max.requests", "int", 500, "Requests queued per connection before reading pauses.",
   validator=_at_least(1))
_d("queued.max.request.bytes", "long", -1, "")
_d("request.timeout.ms", "int", 30000, "")
_d("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF (-1: OS default).")
_d("socket.receive.buffer.bytes", "int", 102400, "SO_RCVBUF (-1: OS default).")
_d("socket.request.max.bytes", "int", 104857600, "Largest request accepted.", validator=_at_least(1))
_d("socket.listen.backlog.size", "int", 50, "Listen backlog.", validator=_at_least(1))
_d("connections.max.idle.ms", "long", 600000, "Idle connections are closed after this.")
_d("connections.max.reauth.ms", "long", 0, "")
_d("max.connections", "int", INT_MAX, "", True, _at_least(0))
_d("max.connections.per.ip", "int", INT_MAX, "", True, _at_least(0))
_d("max.connections.per.ip.overrides", "string", "", "", True)
_d("max.connection.creation.rate", "int", INT_MAX, "", True, _at_least(0))

# Kafka 0.7 listener (broker.kafka07): brokers and topics registered in ZooKeeper in 0.7's layout
_d("kafka07.zookeeper.connect", "string", None,
   "moldau: ZooKeeper (host:port,...) where the KAFKA07 listener registers the broker and its topics in "
   "Kafka 0.7's layout, for ZooKeeper-based 0.7 clients; unset: no registration.")
_d("kafka07.zookeeper.chroot", "string", "/kafka07",
   "moldau: ZooKeeper path under which the 0.7 layout (/brokers/ids, /brokers/topics) is written ('/' for "
   "the root of a ZooKeeper of its own).")
_d("kafka07.zookeeper.session.timeout.ms", "int", 6000,
   "moldau: ZooKeeper session timeout of the 0.7 registration (its ephemeral nodes go this long after the "
   "broker stops answering).", validator=_at_least(1))
_d("kafka07.views.eager", "boolean", False,
   "moldau: with a KAFKA07 listener, build the 0.7 byte-offset index and the stored 0.7 views of every "
   "partition (internal topics aside) in the background as data arrives, so that the first 0.7 read of any "
   "data is a read of stored views; costs the conversion of everything written and the views' disk space. "
   "Off: only partitions 0.7 clients read are indexed, and data is converted by its first 0.7 read.")

# topics
_d("auto.create.topics.enable", "boolean", True, "Create topics on Metadata requests for unknown topics.")
_d("delete.topic.enable", "boolean", True, "Allow DeleteTopics.")
_d("num.partitions", "int", 1, "Partitions of auto-created topics.", validator=_at_least(1))
_d("max.topic.partitions", "int", 50_000,
   "moldau: most partitions one topic may have; CreateTopics / CreatePartitions beyond it are refused with "
   "POLICY_VIOLATION.", validator=_at_least(1))
_d("max.broker.partitions", "int", 100_000,
   "moldau: most partition replicas one broker may hold (KIP-578's name; not in a Kafka release); "
   "CreateTopics / CreatePartitions beyond it are refused with POLICY_VIOLATION.", validator=_at_least(1))
_d("default.replication.factor", "int", 1, "Replication factor of auto-created topics.",
   validator=_at_least(1))
_d("min.insync.replicas", "int", 1, "", True, _at_least(1))
_d("unclean.leader.election.enable", "boolean", False, "", True)
_d("message.max.bytes", "int", 1048588, "Largest record batch accepted.", True, _at_least(0))
_d("compression.type", "string", "producer", "Final compression of topics.", True, _one_of(*_COMPRESSION))
_d("compression.gzip.level", "int", -1, "", True)
_d("compression.lz4.level", "int", 9, "", True)
_d("compression.zstd.level", "int", 3, "", True)
_d("create.topic.policy.class.name", "class", None, "")
_d("alter.config.policy.class.name", "class", None, "")

# log
_d("log.dir", "string", "/tmp/kafka-logs", "Log directory (used when log.dirs is not set).")
_d("log.dirs", "list", ["./moldau-data"],
   "Log directories (partitions spread over them; the broker's files in the first).")
_d("metadata.log.dir", "string", None, "")
_d("log.segment.bytes", "int", 1073741824, "Segment size.", True, _at_least(14))
_d("log.roll.ms", "long", None, "Segment roll time (overrides log.roll.hours).", True, _at_least(1))
_d("log.roll.hours", "int", 168, "Segment roll time in hours.", False, _at_least(1))
_d("log.roll.jitter.ms", "long", None, "", True, _at_least(0))
_d("log.roll.jitter.hours", "int", 0, "", False, _at_least(0))
_d("log.retention.ms", "long", None, "Retention time (overrides minutes/hours; -1 = forever).", True)
_d("log.retention.minutes", "int", None, "Retention time in minutes (overrides hours).")
_d("log.retention.hours", "int", 168, "Retention time in hours.")
_d("log.retention.bytes", "long", -1, "Retention size per partition (-1 = unlimited).", True)
_d("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", validator=_at_least(1))
_d("log.cleanup.policy", "list", ["delete"], "delete and/or compact.", True, _list_of("delete", "compact"))
_d("log.cleaner.enable", "boolean", True, "")
_d("log.cleaner.threads", "int", 1, "", True, _at_least(0))
_d("log.cleaner.dedupe.buffer.size", "long", 134217728, "", True)
_d("log.cleaner.io.buffer.size", "int", 524288, "", True, _at_least(0))
_d("log.cleaner.io.buffer.load.factor", "double", 0.9, "", True)
_d("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, "", True)
_d("log.cleaner.backoff.ms", "long", 15000, "", True, _at_least(0))
_d("log.cleaner.min.cleanable.ratio", "double", 0.5, "", True)
_d("log.cleaner.delete.retention.ms", "long", 86400000, "", True, _at_least(0))
_d("log.cleaner.min.compaction.lag.ms", "long", 0, "", True, _at_least(0))
_d("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "", True, _at_least(1))
_d("log.index.size.max.bytes", "int", 10485760, "", True, _at_least(4))
_d("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", True, _at_least(0))
_d("log.flush.interval.messages", "long", LONG_MAX, "Messages before an fsync (1 = fsync before ack).", True,
   _at_least(1))
_d("log.flush.interval.ms", "long", None, "Max time before an fsync.", True)
_d("log.flush.scheduler.interval.ms", "long", LONG_MAX, "")
_d("log.flush.offset.checkpoint.interval.ms", "int", 60000, "", False, _at_least(0))
_d("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "", False, _at_least(0))
_d("log.segment.delete.delay.ms", "long", 60000, "", True, _at_least(0))
_d("log.preallocate", "boolean", False, "", True)
_d("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.", True,
   _one_of("CreateTime", "LogAppendTime"))
_d("log.message.timestamp.difference.max.ms", "long", LONG_MAX, "", True, _at_least(0))
_d("log.message.timestamp.before.max.ms", "long", LONG_MAX, "", True, _at_least(0))
# Kafka 4.1's default is 3600000 (records at most an hour ahead of the broker clock), and so is the topic
# table's (moldau.log.config); moldau's broker keeps Kafka 3.x's "no bound" because tests produce with fixed
# future timestamps (tests/client/test_produce_consume.py::test_offsets_for_times uses January 2027).
_d("log.message.timestamp.after.max.ms", "long", LONG_MAX, "", True, _at_least(0))
_d("log.message.format.version", "string", "3.0-IV1", "Ignored (always v2); accepted for old files.")
_d("log.message.downconversion.enable", "boolean", True, "Down-convert for Fetch v0-3.", True)
_d("log.local.retention.ms", "long", -2, "", True)
_d("log.local.retention.bytes", "long", -2, "", True)
_d("log.initial.task.delay.ms", "long", 30000, "")
_d("num.recovery.threads.per.data.dir", "int", 1,
   "Threads per log directory opening its partitions at start after a clean shutdown (a recovery after an "
   "unclean one opens one partition at a time). More than one shortens the start only while the loads "
   "wait (a busy machine, a cold disk): on idle cores the threads pass the GIL after every system call "
   "and use more CPU (docs/limits.md).", True, _at_least(1))
_d("num.replica.alter.log.dirs.threads", "int", None, "")
_d("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX,
   "Bytes per second a replica move between log dirs (AlterReplicaLogDirs) copies.", True, _at_least(1))
_d("remote.log.storage.system.enable", "boolean", False, "")

# replication (single node: accepted, mostly unused)
_d("num.replica.fetchers", "int", 1, "", True)
_d("replica.lag.time.max.ms", "long", 30000, "")
_d("replica.fetch.max.bytes", "int", 1048576, "", False, _at_least(0))
_d("replica.fetch.min.bytes", "int", 1,
   "Bytes a follower's fetch asks the leader to wait for (at most replica.fetch.wait.max.ms).", False,
   _at_least(1))
_d("replica.fetch.wait.max.ms", "int", 500, "")
_d("replica.fetch.response.max.bytes", "int", 10485760, "", False, _at_least(0))
_d("replica.fetch.backoff.ms", "int", 1000, "", False, _at_least(0))
_d("replica.socket.timeout.ms", "int", 30000, "")
_d("replica.socket.receive.buffer.bytes", "int", 65536, "")
_d("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "")
_d("replica.selector.class", "class", None,
   "Fetch from the closest replica (KIP-392): org.apache.kafka.common.replica.RackAwareReplicaSelector lets "
   "consumers with client.rack read from an in-sync replica in their rack; unset: from the leader only.",
   validator=_one_of("org.apache.kafka.common.replica.RackAwareReplicaSelector"))
_d("fetch.max.bytes", "int", 57671680, "Max bytes in a Fetch response.", False, _at_least(1024))
_d("fetch.purgatory.purge.interval.requests", "int", 1000, "")
_d("producer.purgatory.purge.interval.requests", "int", 1000, "")
_d("delete.records.purgatory.purge.interval.requests", "int", 1, "")
_d("max.incremental.fetch.session.cache.slots", "int", 1000, "Fetch session cache size (KIP-227).",
   validator=_at_least(0))

# consumer groups and offsets
_d("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", validator=_at_least(1))
_d("offsets.topic.replication.factor", "short", 1, "Replication of __consumer_offsets (moldau 1; Kafka 3).",
   validator=_at_least(1))
_d("offsets.topic.segment.bytes", "int", 104857600, "", validator=_at_least(1))
_d("offsets.topic.compression.codec", "int", 0, "")
_d("offsets.load.buffer.size", "int", 5242880, "", validator=_at_least(1))
_d("offsets.retention.minutes", "int", 10080, "Committed offsets of empty groups kept this long.",
   validator=_at_least(1))
_d("offsets.retention.check.interval.ms", "long", 600000, "", validator=_at_least(1))
_d("offsets.commit.timeout.ms", "int", 5000, "", validator=_at_least(1))
_d("offsets.commit.required.acks", "short", -1, "")
_d("offset.metadata.max.bytes", "int", 4096, "Max size of commit metadata.")
_d("group.min.session.timeout.ms", "int", 6000, "")
_d("group.max.session.timeout.ms", "int", 1800000, "")
_d("group.initial.rebalance.delay.ms", "int", 0,
   "Delay of a new/empty group's first join (Kafka 3000; moldau 0, "
   "as Kafka's own config/server.properties ships: see docs/groups.md).")
_d("group.max.size", "int", INT_MAX, "", validator=_at_least(1))
_d("group.coordinator.rebalance.protocols", "list", ["classic", "consumer", "share"],
   "Group protocols served; share groups (KIP-932) need 'share' here and share.version >= 1.",
   validator=_list_of("classic", "consumer", "share"))
_d("group.coordinator.threads", "int", 1, "", validator=_at_least(1))
_d("group.consumer.session.timeout.ms", "int", 45000, "")
_d("group.consumer.min.session.timeout.ms", "int", 45000, "")
_d("group.consumer.max.session.timeout.ms", "int", 60000, "")
_d("group.consumer.heartbeat.interval.ms", "int", 5000, "")
_d("group.consumer.min.heartbeat.interval.ms", "int", 5000, "")
_d("group.consumer.max.heartbeat.interval.ms", "int", 15000, "")
_d("group.consumer.max.size", "int", INT_MAX, "")
_d("group.consumer.assignors", "list",
   ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor"], "")

# share groups (KIP-932, docs/share-groups.md)
_d("share.version", "short", 1, "moldau's stand-in for Kafka's share.version feature level: 0 turns share "
   "groups off, 1 (default) on.", validator=_at_least(0))
_d("group.share.enable", "boolean", True, "Kafka 4.0's switch for share groups (with share.version).")
_d("group.share.record.lock.duration.ms", "int", 30000, "Acquisition lock of a share group's records.",
   validator=_at_least(1000))
_d("group.share.min.record.lock.duration.ms", "int", 15000, "", validator=_at_least(1000))
_d("group.share.max.record.lock.duration.ms", "int", 60000, "", validator=_at_least(1000))
_d("group.share.delivery.count.limit", "int", 5, "Deliveries of a record before it is archived.",
   validator=_at_least(2))
_d("group.share.partition.max.record.locks", "int", 2000, "In-flight records per share-partition.",
   validator=_at_least(100))
_d("group.share.session.timeout.ms", "int", 45000, "", validator=_at_least(1))
_d("group.share.min.session.timeout.ms", "int", 45000, "", validator=_at_least(1))
_d("group.share.max.session.timeout.ms", "int", 60000, "", validator=_at_least(1))
_d("group.share.heartbeat.interval.ms", "int", 5000, "", validator=_at_least(1))
_d("group.share.min.heartbeat.interval.ms", "int", 5000, "", validator=_at_least(1))
_d("group.share.max.heartbeat.interval.ms", "int", 15000, "", validator=_at_least(1))
_d("group.share.max.size", "int", 200, "Members of one share group.", validator=_at_least(1))
_d("group.share.max.share.sessions", "int", 2000, "Share sessions a broker keeps (ShareFetch).",
   validator=_at_least(1))
_d("share.coordinator.state.topic.num.partitions", "int", 50, "", validator=_at_least(1))
_d("share.coordinator.state.topic.replication.factor", "short", 1, "moldau 1; Kafka 3.",
   validator=_at_least(1))
_d("share.coordinator.state.topic.min.isr", "short", 1, "moldau 1; Kafka 2.", validator=_at_least(1))
_d("share.coordinator.state.topic.segment.bytes", "int", 104857600, "", validator=_at_least(1))
_d("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, "", validator=_at_least(0))

# transactions and producer ids
_d("transactional.id.expiration.ms", "int", 604800000, "", True, _at_least(1))
_d("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms accepted.",
   validator=_at_least(1))
_d("transaction.state.log.num.partitions", "int", 50, "", validator=_at_least(1))
_d("transaction.state.log.replication.factor", "short", 1, "moldau 1; Kafka 3.", validator=_at_least(1))
_d("transaction.state.log.min.isr", "int", 1, "moldau 1; Kafka 2.", validator=_at_least(1))
_d("transaction.state.log.segment.bytes", "int", 104857600, "", validator=_at_least(1))
_d("transaction.state.log.load.buffer.size", "int", 5242880, "", validator=_at_least(1))
_d("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "", validator=_at_least(1))
_d("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "",
   validator=_at_least(1))
_d("transaction.partition.verification.enable", "boolean", True, "", True)
_d("producer.id.expiration.ms", "int", 86400000, "", True, _at_least(1))
_d("producer.id.expiration.check.interval.ms", "int", 600000, "", validator=_at_least(1))

# quotas, metrics
_d("quota.window.num", "int", 11, "", validator=_at_least(1))
_d("quota.window.size.seconds", "int", 1, "", validator=_at_least(1))
_d("metric.reporters", "list", [], "", True)
_d("metrics.num.samples", "int", 2, "", validator=_at_least(1))
_d("metrics.sample.window.ms", "long", 30000, "", validator=_at_least(1))
_d("metrics.recording.level", "string", "INFO", "", validator=_one_of("INFO", "DEBUG", "TRACE"))
_d("auto.include.jmx.reporter", "boolean", True, "")
_d("metrics.listener", "string", None,
   "moldau: HOST:PORT of the Prometheus metrics endpoint (/metrics, /health, "
   "/ready); off when unset.")
_d("console.listener", "string", None,
   "moldau: HOST:PORT of the web console (moldau.console), served from the broker process; off when unset.",
   validator=lambda v: None if not v or v.rpartition(":")[2].isdigit()
   else "expected HOST:PORT, e.g. 127.0.0.1:8080")
_d("schema.registry.listener", "string", None,
   "moldau: HOST:PORT of the schema registry (moldau.registry, Confluent's REST API, state in _schemas), "
   "served from the broker process; off when unset.",
   validator=lambda v: None if not v or v.rpartition(":")[2].isdigit()
   else "expected HOST:PORT, e.g. 127.0.0.1:8081")

# security
_d("authorizer.class.name", "string", "", "")
_d("super.users", "string", None, "")
_d("allow.everyone.if.no.acl.found", "boolean", False, "")
_d("sasl.enabled.mechanisms", "list", ["GSSAPI"], "", True)
_d("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "", True)
_d("sasl.mechanism.controller.protocol", "string", "GSSAPI", "")
_d("ssl.keystore.type", "string", "JKS", "", True)
_d("ssl.keystore.location", "string", None, "", True)
_d("ssl.keystore.password", "password", None, "", True)
_d("ssl.key.password", "password", None, "", True)
_d("ssl.keystore.certificate.chain", "password", None, "", True)
_d("ssl.keystore.key", "password", None, "", True)
_d("ssl.truststore.type", "string", "JKS", "", True)
_d("ssl.truststore.location", "string", None, "", True)
_d("ssl.truststore.password", "password", None, "", True)
_d("ssl.truststore.certificates", "password", None, "", True)
_d("ssl.client.auth", "string", "none", "", True, _one_of("required", "requested", "none"))
_d("ssl.endpoint.identification.algorithm", "string", "https", "", True)
_d("ssl.protocol", "string", "TLSv1.3", "", True)
_d("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "", True)
_d("ssl.cipher.suites", "list", [], "", True)
_d("ssl.certificate.location", "string", None, "PEM certificate chain of the broker (SSL listeners).", True)
_d("ssl.key.location", "string", None, "PEM private key of the broker (SSL listeners).", True)
_d("ssl.ca.location", "string", None, "PEM CA bundle verifying client certificates.", True)
_d("ssl.principal.mapping.rules", "string", "DEFAULT", "Client certificate subject -> principal name rules.")
_d("connection.failed.authentication.delay.ms", "int", 100, "Delay before answering a failed authentication.",
   validator=_at_least(0))

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
ALIASES: dict[str, str] = {"broker.id": "node.id"}

_ENV_PREFIX = "MOLDAU_"

# --------------------------------------------------------------------------------------------- parsing


def parse_properties(text: str) -> list[tuple[str, str]]:
    """Parse java.util.Properties text: comments (# !), line continuations, escapes, key=value / key: value /
    key value. Returns the (key, value) pairs in file order."""
    out: list[tuple[str, str]] = []
    # join logical lines
    lines = text.splitlines()
    logical: list[str] = []
    buf = ""
    cont = False
    for raw in lines:
        line = raw.lstrip(" \t\f")
        if not cont and (not line or line[0] in "#!"):
            continue
        # count trailing backslashes
        n = len(line) - len(line.rstrip("\\"))
        if n % 2 == 1:
            buf += line[:-1]
            cont = True
            continue
        buf += line
        logical.append(buf)
        buf = ""
        cont = False
    if cont and buf:
        logical.append(buf)

    for line in logical:
        # find separator: first unescaped '=', ':' or whitespace
        i = 0
        n = len(line)
        key_end = n
        val_start = n
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:":
                key_end = i
                val_start = i + 1
                break
            if c in " \t\f":
                key_end = i
                j = i
                while j < n and line[j] in " \t\f":
                    j += 1
                if j < n and line[j] in "=:":
                    j += 1
                val_start = j
                break
            i += 1
        key = _unescape(line[:key_end])
        rest = line[val_start:] if val_start <= n else ""
        value = _unescape(rest.lstrip(" \t\f"))
        out.append((key, value))
    return out


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        if c == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 1:i + 5]):
            out.append(chr(int(s[i + 1:i + 5], 16)))
            i += 5
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c))
        i += 1
    return "".join(out)


def parse_value(defn: ConfigDef, raw: str | None) -> Any:
    """Convert a string to the definition's type; raises ConfigError naming the key."""
    if raw is None:
        return None
    key = defn.name
    t = defn.type
    s = raw.strip() if t not in ("password", "string") else raw
    try:
        if t == "boolean":
            low = s.lower()
            if low not in ("true", "false"):
                raise ValueError
            v: Any = low == "true"
        elif t in ("int", "short", "long"):
            if s == "" and defn.default is None:
                return None
            v = int(s)
            lim = {"int": (-(2**31), 2**31 - 1), "short": (-(2**15), 2**15 - 1),
                   "long": (-(2**63), 2**63 - 1)}[t]
            if not (lim[0] <= v <= lim[1]):
                raise ValueError
        elif t == "double":
            v = float(s)
        elif t == "list":
            v = [x.strip() for x in s.split(",") if x.strip()] if s.strip() else []
        elif t == "class":
            v = s or None
        else:
            v = raw
    except ValueError:
        raise ConfigError(key, f"Invalid value {raw!r} for configuration {key}: expected {t}") from None
    if defn.validator is not None:
        err = defn.validator(v)
        if err:
            raise ConfigError(key, f"Invalid value {raw!r} for configuration {key}: {err}")
    return v


def format_value(defn: ConfigDef, value: Any) -> str | None:
    """Kafka's string form of a typed value."""
    if value is None:
        return None
    if defn.type == "boolean":
        return "true" if value else "false"
    if defn.type == "list":
        return ",".join(value)
    if defn.type == "double":
        return repr(float(value))
    return str(value)


@dataclass(slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[^\]]*\]|[^:\[\]]*):(-?\d+)$")


def parse_listeners(key: str, items: Iterable[str], protocol_map: Mapping[str, str]) -> list[Listener]:
    out: list[Listener] = []
    seen: set[str] = set()
    for item in items:
        m = _LISTENER_RE.match(item.strip())
        if not m:
            raise ConfigError(key, f"Invalid value {item!r} for configuration {key}: expected NAME://host:port")
        name = m.group(1).upper()
        host = m.group(2).strip("[]")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"Invalid port {port} in configuration {key}")
        if name in seen:
            raise ConfigError(key, f"Listener name {name} appears twice in configuration {key}")
        seen.add(name)
        out.append(Listener(name, host, port, protocol_map.get(name, name)))
    return out


# --------------------------------------------------------------------------------------------- BrokerConfig


@dataclass(slots=True)
class BrokerConfig:
    """Resolved broker configuration. ``get`` returns typed values; ``raw`` Kafka's string form."""

    values: dict[str, Any] = field(default_factory=dict)   # explicitly set keys -> typed value
    sources: dict[str, str] = field(default_factory=dict)  # explicitly set keys -> source name
    dynamic: dict[str, Any] = field(default_factory=dict)  # dynamic broker overrides (AlterConfigs)

    # -- construction
    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, overrides: Mapping[str, str] | None = None,
             env: Mapping[str, str] | None = None) -> "BrokerConfig":
        """Defaults <- file <- environment (MOLDAU_*) <- overrides. Raises ConfigError naming a bad key."""
        cfg = cls()
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ConfigError("--config", f"Cannot read config file {path}: {e.strerror}") from None
            for k, v in parse_properties(text):
                cfg._set(k, v, SOURCE_STATIC, where=f" in {path}")
        env = os.environ if env is None else env
        for name in BROKER_CONFIGS:
            ev = _ENV_PREFIX + name.replace(".", "_").upper()
            if ev in env:
                cfg._set(name, env[ev], SOURCE_STATIC, where=f" (environment {ev})")
        for k, v in (overrides or {}).items():
            cfg._set(k, v, SOURCE_STATIC)
        cfg._check()
        return cfg

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "BrokerConfig":
        """Convenience for tests: values may be strings or typed."""
        cfg = cls()
        for k, v in values.items():
            cfg._set(k, v if isinstance(v, str) else _to_str(v), SOURCE_STATIC)
        cfg._check()
        return cfg

    def _set(self, key: str, raw: str, source: str, where: str = "") -> None:
        key = key.strip()
        defn = BROKER_CONFIGS.get(key) or listener_prefixed_def(key)
        if defn is None:
            raise ConfigError(key, f"Unknown configuration key '{key}'{where}")
        value = parse_value(defn, raw)
        if key in ALIASES:
            target = ALIASES[key]
            if value is None or (key == "broker.id" and value == -1):
                return
            self.values[target] = value
            self.sources[target] = source
        self.values[key] = value
        self.sources[key] = source

    def _check(self) -> None:
        _ = self.listeners, self.advertised_listeners  # must parse (the properties raise ConfigError)
        if not self.log_dirs:
            raise ConfigError("log.dirs", "Configuration log.dirs is empty")

    # -- access
    # -- typed views of the central keys (config_views; read on access, dynamic configs apply)
    @property
    def log(self) -> LogView:
        return LogView(self)

    @property
    def replication(self) -> ReplicationView:
        return ReplicationView(self)

    @property
    def socket(self) -> SocketView:
        return SocketView(self)

    @property
    def quota(self) -> QuotaView:
        return QuotaView(self)

    def get(self, key: str) -> Any:
        key = ALIASES.get(key, key) if key != "broker.id" else "node.id"
        if key in self.dynamic:
            return self.dynamic[key]
        if key in self.values:
            return self.values[key]
        defn = BROKER_CONFIGS.get(key)
        if defn is None:
            raise ConfigError(key, f"Unknown configuration key '{key}'")
        return defn.default

    def __getitem__(self, key: str) -> Any:
        return self.get(key)

    def raw(self, key: str) -> str | None:
        defn = BROKER_CONFIGS[key]
        return format_value(defn, self.get(key))

    def source(self, key: str) -> str:
        if key == "broker.id":
            key = "node.id"
        if key in self.dynamic:
            return SOURCE_DYNAMIC_BROKER
        return self.sources.get(key, SOURCE_DEFAULT)

    def is_set(self, key: str) -> bool:
        return key in self.values or key in self.dynamic

    def entries(self) -> list[ConfigEntry]:
        out = []
        for name, defn in BROKER_CONFIGS.items():
            src = self.source(name)
            out.append(ConfigEntry(name, self.raw(name), src, src == SOURCE_DEFAULT, defn.sensitive,
                                   not defn.dynamic, defn))
        return out

    def set_dynamic(self, key: str, raw: str | None) -> None:
        """Set (raw string) or delete (None) a dynamic broker-level value. ConfigError if not dynamic."""
        defn = BROKER_CONFIGS.get(key)
        if defn is None:
            raise ConfigError(key, f"Unknown configuration key '{key}'")
        if not defn.dynamic:
            raise ConfigError(key, f"Cannot update these configs dynamically: {{{key}}}")
        if raw is None:
            self.dynamic.pop(key, None)
        else:
            self.dynamic[key] = parse_value(defn, raw)

    # -- derived values
    @property
    def node_id(self) -> int:
        return int(self.get("node.id"))

    @property
    def log_dirs(self) -> list[str]:
        if self.is_set("log.dirs") or not self.is_set("log.dir"):
            dirs = self.get("log.dirs")
            if dirs:
                return list(dirs)
        return [self.get("log.dir")]

    @property
    def protocol_map(self) -> dict[str, str]:
        out = {}
        for item in (self.get("listener.security.protocol.map") or "").split(","):
            if ":" in item:
                a, b = item.split(":", 1)
                out[a.strip().upper()] = b.strip().upper()
        return out

    @property
    def listeners(self) -> list[Listener]:
        ls = parse_listeners("listeners", self.get("listeners") or [], self.protocol_map)
        if not ls:
            raise ConfigError("listeners", "Configuration listeners is empty")
        return ls

    @property
    def advertised_listeners(self) -> list[Listener]:
        adv = self.get("advertised.listeners")
        if not adv:
            return self.listeners
        return parse_listeners("advertised.listeners", adv, self.protocol_map)

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours (Kafka's precedence); -1 = forever."""
        ms = self.get("log.retention.ms")
        if ms is not None:
            return int(ms) if ms >= 0 else -1
        mins = self.get("log.retention.minutes")
        if mins is not None:
            return int(mins) * 60_000 if mins >= 0 else -1
        hours = self.get("log.retention.hours")
        return int(hours) * 3_600_000 if hours >= 0 else -1

    @property
    def segment_ms(self) -> int:
        ms = self.get("log.roll.ms")
        if ms is not None:
            return int(ms)
        return int(self.get("log.roll.hours")) * 3_600_000

    @property
    def segment_jitter_ms(self) -> int:
        ms = self.get("log.roll.jitter.ms")
        if ms is not None:
            return int(ms)
        return int(self.get("log.roll.jitter.hours")) * 3_600_000

    @property
    def flush_interval_ms(self) -> int:
        ms = self.get("log.flush.interval.ms")
        if ms is not None:
            return int(ms)
        return int(self.get("log.flush.scheduler.interval.ms"))


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def parse_set_option(item: str) -> tuple[str, str]:
    """'key=value' from --set; ConfigError when malformed or unknown."""
    if "=" not in item:
        raise ConfigError(item, f"--set expects KEY=VALUE, got '{item}'")
    k, v = item.split("=", 1)
    k = k.strip()
    if k not in BROKER_CONFIGS and listener_prefixed_def(k) is None:
        raise ConfigError(k, f"Unknown configuration key '{k}'")
    return k, v


_LISTENER_PREFIXED = re.compile(r"^listener\.name\.([a-z0-9_-]+)\.((?:ssl|sasl|connections)\..+)$")


def listener_prefixed_def(key: str) -> ConfigDef | None:
    """``listener.name.<listener>.<key>`` (ssl.*, sasl.*, connections.*): per-listener security settings, read
    by moldau.broker.security (values keep the full key)."""
    m = _LISTENER_PREFIXED.match(key)
    return BROKER_CONFIGS.get(m.group(2)) if m else None

"""Topic metadata: names, ids, partition counts, topic configs, persisted in one JSON file.

``<data-dir>/__moldau_metadata.json`` is rewritten atomically (write tmp, fsync, rename, fsync dir) on every
change. Listeners (the replica manager) are told about changes so partition logs follow the metadata.
Cluster id and node id are not stored here: they live in moldau.log's meta.properties.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from moldau.log.checkpoint import atomic_write
from moldau.log.errors import StorageError
from moldau.log.manager import MAX_TOPIC_LENGTH as MAX_NAME_LENGTH  # noqa: F401  (re-exported)
from moldau.log.manager import validate_topic_name  # Kafka's topic name rules (InvalidTopicError, code 17)
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

METADATA_FILE = "__moldau_metadata.json"

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})


def kafka_error(code_name: str, message: str | None = None) -> KafkaError:
    """Build a KafkaError for the named error code with an optional message."""
    return KafkaError.for_code(getattr(ErrorCode, code_name), message)


@dataclass(slots=True)
class TopicInfo:
    """One topic. ``is_internal``: one of INTERNAL_TOPICS (clients may not produce to it, delete it or
    delete its records)."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    is_internal: bool = False
    replication_factor: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "topic_id": str(self.topic_id), "num_partitions": self.num_partitions,
                "replication_factor": self.replication_factor, "configs": dict(self.configs),
                "is_internal": self.is_internal}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TopicInfo":
        return cls(d["name"], uuid.UUID(d["topic_id"]), int(d["num_partitions"]), dict(d.get("configs")
                                                                                       or {}),
                   bool(d.get("is_internal", False)) or d["name"] in INTERNAL_TOPICS,
                   int(d.get("replication_factor", 1)))


class MetadataListener(Protocol):
    def on_topic_created(self, topic: TopicInfo) -> None: ...
    def on_topic_deleted(self, topic: TopicInfo) -> None: ...
    def on_partitions_created(self, topic: TopicInfo, old_count: int) -> None: ...
    def on_topic_configs_changed(self, topic: TopicInfo) -> None: ...


class MetadataService(Protocol):
    """What both modes' metadata stores offer (``MetadataStore`` here, ``cluster.store.ZkMetadataStore``;
    ``interfaces`` has mypy check both)."""

    topics: dict[str, TopicInfo]
    listeners: list[MetadataListener]
    pending_deletions: dict[uuid.UUID, str]

    def get(self, name: str) -> TopicInfo | None: ...

    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def __contains__(self, name: str) -> bool: ...

    def live_brokers(self, listener_name: str | None) -> list[tuple[int, str, int, str | None]]: ...

    def controller_id(self) -> int: ...

    def partition_state(self, topic: str, partition: int) -> Any: ...

    def replicas_of(self, topic: str, partition: int) -> list[int]: ...

    async def learn_topic(self, name: str) -> bool: ...

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str | None] | None = None, *, validate_only: bool = False,
                     topic_id: uuid.UUID | None = None, assignment: dict[int, list[int]] | None = None
                     ) -> TopicInfo: ...

    def create_partitions(self, name: str, new_total: int, *, validate_only: bool = False,
                          assignment: list[list[int]] | None = None) -> TopicInfo: ...

    def alter_topic_configs(self, name: str, configs: dict[str, str | None], *, replace: bool = False,
                            validate_only: bool = False) -> TopicInfo: ...

    def ensure_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str | None]) -> TopicInfo: ...

    def delete_topic(self, name: str) -> TopicInfo: ...

    def adopt(self, name: str, num_partitions: int, topic_id: uuid.UUID | None) -> TopicInfo: ...

    def save(self) -> None: ...


def is_valid_topic_name(name: str | None) -> bool:
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


# ---------------------------------------------------------------------- checks shared by both stores
def check_new_topic(name: str, topics: Mapping[str, TopicInfo], collisions: Mapping[str, str]) -> None:
    """A valid name, not taken, not colliding ('.' vs '_') with an existing topic."""
    validate_topic_name(name)
    if name in topics:
        raise kafka_error("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.")
    other = collisions.get(_collision_key(name))
    if other is not None:
        raise kafka_error("INVALID_TOPIC_EXCEPTION", f"Topic '{name}' collides with existing topic: {other}")


def topic_counts(num_partitions: int, replication_factor: int, broker_config: Any) -> tuple[int, int]:
    """(partitions, replication factor) with -1 meaning the broker defaults; both must be positive."""
    if num_partitions == -1:
        num_partitions = int(broker_config.get("num.partitions")) if broker_config is not None else 1
    if replication_factor == -1:
        replication_factor = (int(broker_config.get("default.replication.factor"))
                              if broker_config is not None else 1)
    if num_partitions <= 0:
        raise kafka_error("INVALID_PARTITIONS", "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise kafka_error("INVALID_REPLICATION_FACTOR", "Replication factor must be larger than 0.")
    return num_partitions, replication_factor


def clean_topic_configs(configs: Mapping[str, str | None] | None,
                        validator: Callable[[dict[str, str | None]], None] | None) -> dict[str, str]:
    cfg = dict(configs or {})
    if validator is not None:
        validator(cfg)
    return {k: v for k, v in cfg.items() if v is not None}


def existing_topic(topics: Mapping[str, TopicInfo], name: str) -> TopicInfo:
    t = topics.get(name)
    if t is None:
        raise kafka_error("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition.")
    return t


def check_deletion_enabled(broker_config: Any) -> None:
    if broker_config is not None and not broker_config.get("delete.topic.enable"):
        raise kafka_error("TOPIC_DELETION_DISABLED", "Topic deletion is disabled.")


def check_partition_increase(t: TopicInfo, new_total: int) -> None:
    if new_total < t.num_partitions:
        raise kafka_error("INVALID_PARTITIONS",
                          f"Topic currently has {t.num_partitions} partitions, which is higher than the "
                          f"requested {new_total}.")
    if new_total == t.num_partitions:
        raise kafka_error("INVALID_PARTITIONS", f"Topic already has {t.num_partitions} partitions.")


def merged_topic_configs(t: TopicInfo, changes: Mapping[str, str | None], replace: bool,
                         validator: Callable[[dict[str, str | None]], None] | None) -> dict[str, str]:
    """Set (value) or delete (None) topic configs; ``replace`` drops keys not given (AlterConfigs)."""
    new = {} if replace else dict(t.configs)
    for k, v in changes.items():
        if v is None:
            new.pop(k, None)
        else:
            new[k] = v
    if validator is not None:
        validator(dict(new))
    return new


class TopicIndex:
    """The topics by name and id, and the names that collide ('.' vs '_'): what both metadata stores (this
    module's and the cluster's ``ZkMetadataStore``) keep in memory and answer lookups from."""

    def __init__(self, broker_config: Any = None,
                 config_validator: Callable[[dict[str, str | None]], None] | None = None) -> None:
        self.broker_config = broker_config
        self.config_validator = config_validator
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        self._collisions: dict[str, str] = {}
        self.listeners: list[MetadataListener] = []
        # deleted topics (id -> name) whose partition directories the replica manager has not all renamed to
        # <dir>.<id>-delete yet: a start after a crash deletes the ones left instead of adopting them
        self.pending_deletions: dict[uuid.UUID, str] = {}

    def _index(self, t: TopicInfo) -> None:
        self.topics[t.name] = t
        self.by_id[t.topic_id] = t
        self._collisions[_collision_key(t.name)] = t.name

    def _unindex(self, t: TopicInfo) -> None:
        self.topics.pop(t.name, None)
        self.by_id.pop(t.topic_id, None)
        if self._collisions.get(_collision_key(t.name)) == t.name:
            del self._collisions[_collision_key(t.name)]

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.by_id.get(topic_id)

    def __contains__(self, name: str) -> bool:
        return name in self.topics


class MetadataStore(TopicIndex):
    """Topics of this cluster. Mutating methods raise KafkaError with Kafka's codes."""

    def __init__(self, data_dir: str, *, broker_config: Any = None,
                 config_validator: Callable[[dict[str, str | None]], None] | None = None) -> None:
        super().__init__(broker_config, config_validator)
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, METADATA_FILE)
        # this node, the only broker of a single-node cluster: set by the broker once its listeners are bound
        self.node_id = -1
        self.rack: str | None = None
        self.advertised: Callable[[str | None], tuple[str, int]] | None = None

    # ----------------------------------------------------------------------------------- the cluster view
    # (the same questions ZkMetadataStore answers from the controller's UpdateMetadata; here a cluster of one)
    def live_brokers(self, listener_name: str | None) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of every live broker, for the listener ``listener_name``."""
        if self.advertised is None:
            return []
        host, port = self.advertised(listener_name)
        return [(self.node_id, host, port, self.rack)]

    def controller_id(self) -> int:
        return self.node_id

    def partition_state(self, topic: str, partition: int) -> Any:
        """None: one node leads every partition; the replica manager's Partition is the state."""
        return None

    async def learn_topic(self, name: str) -> bool:
        """Whether the topic exists (the cluster's store reads one it has not heard of from ZooKeeper)."""
        return name in self.topics

    def replicas_of(self, topic: str, partition: int) -> list[int]:
        return [self.node_id] if topic in self.topics else []

    # ----------------------------------------------------------------------------------- persistence
    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
            topics = [TopicInfo.from_json(d) for d in doc.get("topics", [])]
            deleting = {uuid.UUID(d["topic_id"]): str(d["name"]) for d in doc.get("deleting", [])}
        except FileNotFoundError:
            return
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # written atomically: a corrupt disk
            raise StorageError(f"cannot read the topic metadata {self.path}: {e!r}; the broker does not "
                               "start without its topics (restore the file from a backup)") from None
        for t in topics:
            self._index(t)
        self.pending_deletions.update(deleting)
        log.debug("loaded metadata: %d topics", len(self.topics))

    def save(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        doc: dict[str, Any] = {"version": 1, "topics": [t.to_json() for t in sorted(self.topics.values(),
                                                                                    key=lambda t: t.name)]}
        if self.pending_deletions:  # what a restart must still delete (see TopicIndex.pending_deletions)
            doc["deleting"] = [{"name": n, "topic_id": str(i)}
                               for i, n in sorted(self.pending_deletions.items(), key=lambda x: str(x[0]))]
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    # ----------------------------------------------------------------------------------- mutations
    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str | None] | None = None, *, validate_only: bool = False,
                     topic_id: uuid.UUID | None = None, assignment: dict[int, list[int]] | None = None
                     ) -> TopicInfo:
        """Create a topic. num_partitions / replication_factor -1 = broker defaults. ``assignment`` (a manual
        replica assignment) can only name this node here, which the caller checked."""
        check_new_topic(name, self.topics, self._collisions)
        num_partitions, replication_factor = topic_counts(num_partitions, replication_factor,
                                                          self.broker_config)
        if replication_factor > 1:
            raise kafka_error("INVALID_REPLICATION_FACTOR",
                              f"Unable to replicate the partition {replication_factor} time(s): "
                              "The target replication factor of "
                              f"{replication_factor} cannot be reached because only 1 broker(s) are "
                              "registered.")
        clean = clean_topic_configs(configs, self.config_validator)
        t = TopicInfo(name, topic_id or _new_topic_id(self.by_id), num_partitions, clean,
                      name in INTERNAL_TOPICS, replication_factor)
        if validate_only:
            return t
        self._index(t)
        self.save()
        log.info("created topic %s (%d partitions, id %s)", name, num_partitions, t.topic_id)
        for lst in self.listeners:
            lst.on_topic_created(t)
        return t

    def ensure_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str | None]) -> TopicInfo:
        """The topic ``name``, created with these settings when missing (the coordinators' internal topics,
        created on first use as Kafka does)."""
        t = self.topics.get(name)
        if t is None:
            t = self.create_topic(name, num_partitions, replication_factor, configs)
        return t

    def delete_topic(self, name: str) -> TopicInfo:
        t = existing_topic(self.topics, name)
        check_deletion_enabled(self.broker_config)
        self._unindex(t)
        self.pending_deletions[t.topic_id] = t.name  # till the replica manager renamed every directory
        self.save()
        log.info("deleted topic %s (id %s)", name, t.topic_id)
        for lst in self.listeners:
            lst.on_topic_deleted(t)
        return t

    def create_partitions(self, name: str, new_total: int, *, validate_only: bool = False,
                          assignment: list[list[int]] | None = None) -> TopicInfo:
        """``assignment`` (checked by the caller) can only name this node: every replica is here."""
        t = existing_topic(self.topics, name)
        check_partition_increase(t, new_total)
        if validate_only:
            return t
        old = t.num_partitions
        t.num_partitions = new_total
        self.save()
        log.info("topic %s: partitions %d -> %d", name, old, new_total)
        for lst in self.listeners:
            lst.on_partitions_created(t, old)
        return t

    def alter_topic_configs(self, name: str, configs: dict[str, str | None], *, replace: bool = False,
                            validate_only: bool = False) -> TopicInfo:
        """Set (value) or delete (None) topic configs; replace=True drops keys not given (AlterConfigs)."""
        t = existing_topic(self.topics, name)
        new = merged_topic_configs(t, configs, replace, self.config_validator)
        if validate_only:
            return t
        t.configs = new
        self.save()
        for lst in self.listeners:
            lst.on_topic_configs_changed(t)
        return t

    def adopt(self, name: str, num_partitions: int, topic_id: uuid.UUID | None) -> TopicInfo:
        """Register a topic found on disk but missing from the metadata file (no listeners called)."""
        t = TopicInfo(name, topic_id or _new_topic_id(self.by_id), num_partitions, {},
                      name in INTERNAL_TOPICS)
        self._index(t)
        self.save()
        log.warning("adopted topic %s from the log directory (%d partitions)", name, num_partitions)
        return t


def _new_topic_id(existing: dict[uuid.UUID, Any]) -> uuid.UUID:
    while True:
        u = uuid.uuid4()
        # Kafka never hands out the zero UUID, nor ids whose url-safe base64 form starts with '-'.
        if u.int != 0 and u not in existing and (u.bytes[0] >> 2) != 62:
            return u

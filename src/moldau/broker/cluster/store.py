"""ZkMetadataStore: the broker's metadata store over ZooKeeper (the cluster's counterpart of
``broker.metadata.MetadataStore``, same interface).

* Topics (name, id, partition count, replication factor, configs) follow ``/brokers/topics`` and
  ``/config/topics`` through watches; listeners (the replica manager) hear of configs changes and deletions.
* Mutations from admin requests on any broker write ZooKeeper as Kafka's ZooKeeper-mode admin path did: the
  topic's config znode then its assignment znode (replicas assigned here, Kafka's round-robin); deletion
  removes
  the topic's znodes (the controller also serves markers under ``/admin/delete_topics``, written by other
  tools);
  the controller and the brokers act on the watches. These writes are synchronous kazoo calls
  (one loopback round trip each) because the store's interface is synchronous.
* The cluster view (live brokers, controller, every partition's leader / replicas / ISR) comes from the
  controller's UpdateMetadata (``update_metadata``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..metadata import (
    INTERNAL_TOPICS,
    TopicIndex,
    TopicInfo,
    _new_topic_id,
    check_deletion_enabled,
    check_new_topic,
    check_partition_increase,
    clean_topic_configs,
    existing_topic,
    kafka_error,
    merged_topic_configs,
    topic_counts,
)
from . import zkdata as zd
from .assignment import assign_replicas

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PartitionView:
    """One partition as the controller last described it."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int] = field(default_factory=list)
    zk_version: int = 0


@dataclass(slots=True)
class LiveBroker:
    node_id: int
    endpoints: dict[str, tuple[str, int]]
    rack: str | None


class ZkMetadataStore(TopicIndex):
    def __init__(
        self,
        zk: Any,
        *,
        node_id: int,
        broker_config: Any = None,
        config_validator: Callable[[dict[str, str | None]], None] | None = None,
    ) -> None:
        super().__init__(broker_config, config_validator)
        self.zk = zk
        self.node_id = node_id
        self.assignments: dict[str, dict[int, list[int]]] = {}
        # the controller's view (UpdateMetadata)
        self.live: dict[int, LiveBroker] = {}
        self.partitions: dict[tuple[str, int], PartitionView] = {}
        self.controller: int = -1
        self.controller_epoch: int = -1
        self._watched: set[str] = set()
        self._pending_configs: dict[str, dict[str, str]] = {}

    # ----------------------------------------------------------------------------------- loading
    async def load(self) -> None:
        """Every topic in ZooKeeper, then watches that keep them current."""
        for name in await self.zk.children(zd.BROKER_TOPICS):
            got = await self.zk.get(zd.topic_path(name))
            if got is None:
                continue
            cfg = await self.zk.get(zd.topic_config_path(name))
            self._apply_topic(
                name,
                zd.TopicAssignment.decode(got[0]),
                zd.decode_topic_config(cfg[0] if cfg else None),
                notify=False,
            )
        self.zk.watch_children(zd.BROKER_TOPICS, self._on_topics)

    async def learn_topic(self, name: str) -> bool:
        """A topic a LeaderAndIsr names before this broker's watch reported it (the controller wrote the
        znode and sent the request at once): read it from ZooKeeper now; the watch applies the same data
        later. False when ZooKeeper has no such topic."""
        if name in self.topics:
            return True
        got = await self.zk.get(zd.topic_path(name))
        if got is None:
            return False
        cfg = await self.zk.get(zd.topic_config_path(name))
        if name not in self.topics:
            self._apply_topic(name, zd.TopicAssignment.decode(got[0]),
                              zd.decode_topic_config(cfg[0] if cfg else None), notify=False)
        if name not in self._watched:  # so a deletion reaches this broker whatever the children watch saw
            self._watched.add(name)
            self._watch_topic(name)
        return name in self.topics

    def _on_topics(self, names: list[str]) -> None:
        current = set(names)
        for name in current - self._watched:
            self._watched.add(name)
            self._watch_topic(name)
        # the list was read when the watch fired and reaches the loop later: a topic this broker created
        # meanwhile is missing from it without being gone, so a missing name counts as deleted only once
        # ZooKeeper says so (a deletion also reaches the topic's own data watch)
        gone = [n for n in set(self.topics) | self._watched if n not in current]
        if gone:
            kz = self.zk.sync
            gone = [n for n in gone if kz.exists(zd.topic_path(n)) is None]
        for name in gone:
            self._remove(name)
        self._watched -= set(gone)

    def _watch_topic(self, name: str) -> None:
        def on_assignment(data: bytes | None, _stat: Any) -> bool:
            if data is None:
                self._remove(name)
                return False
            t = self.topics.get(name)
            self._apply_topic(name, zd.TopicAssignment.decode(data), t.configs if t else None, notify=True)
            return True

        def on_config(data: bytes | None, _stat: Any) -> bool:
            t = self.topics.get(name)
            if data is None:
                return name in self._watched
            if t is None:
                self._pending_configs[name] = zd.decode_topic_config(data)
                return True
            new = zd.decode_topic_config(data)
            if new != t.configs:
                t.configs = new
                for lst in self.listeners:
                    lst.on_topic_configs_changed(t)
            return True

        self.zk.watch_data(zd.topic_path(name), on_assignment)
        self.zk.watch_data(zd.topic_config_path(name), on_config)

    def _apply_topic(
        self, name: str, a: zd.TopicAssignment, configs: dict[str, str] | None, *, notify: bool
    ) -> None:
        parts = a.partitions
        if not parts:
            return
        self.assignments[name] = {p: list(r) for p, r in parts.items()}
        rf = len(next(iter(parts.values())))
        t = self.topics.get(name)
        if configs is None:
            configs = self._pending_configs.pop(name, None) or {}
        if t is None:
            t = TopicInfo(
                name,
                a.topic_id or _new_topic_id(self.by_id),
                len(parts),
                dict(configs),
                name in INTERNAL_TOPICS,
                rf,
            )
            self._index(t)
            log.info("topic %s: %d partitions, replication factor %d", name, len(parts), rf)
            return
        if len(parts) > t.num_partitions:
            old = t.num_partitions
            t.num_partitions = len(parts)
            if notify:
                for lst in self.listeners:
                    lst.on_partitions_created(t, old)

    def _remove(self, name: str) -> None:
        t = self.topics.get(name)
        self.assignments.pop(name, None)
        if t is None:
            return
        self._unindex(t)
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]
        log.info("topic %s deleted", name)
        for lst in self.listeners:
            lst.on_topic_deleted(t)

    def save(self) -> None:
        """Nothing to save locally: ZooKeeper holds the metadata."""

    # ----------------------------------------------------------------------------------- queries
    def live_brokers(self, listener_name: str | None) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of every live broker that has the listener ``listener_name``."""
        out = []
        for b in sorted(self.live.values(), key=lambda b: b.node_id):
            ep = b.endpoints.get(listener_name or "") or (
                next(iter(b.endpoints.values())) if b.endpoints and listener_name is None else None
            )
            if ep is not None:
                out.append((b.node_id, ep[0], ep[1], b.rack))
        return out

    def controller_id(self) -> int:
        return self.controller

    def partition_state(self, topic: str, partition: int) -> PartitionView | None:
        """The controller's view; a partition the controller has not described yet has no leader (-1)."""
        view = self.partitions.get((topic, partition))
        if view is None and topic in self.topics:
            return PartitionView(-1, -1, self.replicas_of(topic, partition), [])
        return view

    def replicas_of(self, topic: str, partition: int) -> list[int]:
        return list(self.assignments.get(topic, {}).get(partition, []))

    # ----------------------------------------------------------------------------------- UpdateMetadata
    def update_metadata(
        self,
        controller_id: int,
        controller_epoch: int,
        brokers: list[LiveBroker],
        states: list[tuple[str, int, PartitionView]],
    ) -> bool:
        """Apply an UpdateMetadata; False (STALE_CONTROLLER_EPOCH) when the controller epoch is older."""
        if controller_epoch < self.controller_epoch:
            return False
        self.controller_epoch = controller_epoch
        self.controller = controller_id
        self.live = {b.node_id: b for b in brokers}
        for topic, p, view in states:
            self.partitions[(topic, p)] = view
        return True

    # ----------------------------------------------------------------------------------- mutations
    def _registered_brokers(self) -> list[tuple[int, str | None]]:
        from kazoo.exceptions import NoNodeError

        kz = self.zk.sync
        out = []
        for child in kz.get_children(zd.BROKER_IDS):
            try:
                data, _ = kz.get(zd.broker_path(int(child)))
            except NoNodeError:  # vanished meanwhile
                continue
            info = zd.BrokerInfo.decode(int(child), data)
            out.append((info.broker_id, info.rack))
        return out

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        topic_id: uuid.UUID | None = None,
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicInfo:
        check_new_topic(name, self.topics, self._collisions)
        kz = self.zk.sync
        if kz.exists(zd.topic_path(name)):
            raise kafka_error("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.")
        num_partitions, replication_factor = topic_counts(num_partitions, replication_factor,
                                                          self.broker_config)
        if assignment is None:
            assignment = assign_replicas(self._registered_brokers(), num_partitions, replication_factor)
        clean = clean_topic_configs(configs, self.config_validator)
        t = TopicInfo(
            name,
            topic_id or _new_topic_id(self.by_id),
            len(assignment),
            clean,
            name in INTERNAL_TOPICS,
            len(next(iter(assignment.values()))),
        )
        if validate_only:
            return t
        from kazoo.exceptions import NodeExistsError

        kz.ensure_path(zd.CONFIG_TOPICS)
        try:
            kz.create(zd.topic_config_path(name), zd.encode_topic_config(clean))
        except NodeExistsError:
            kz.set(zd.topic_config_path(name), zd.encode_topic_config(clean))
        try:
            kz.create(zd.topic_path(name), zd.TopicAssignment(t.topic_id, assignment).encode(), makepath=True)
        except NodeExistsError:
            raise kafka_error("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.") from None
        self.assignments[name] = {p: list(r) for p, r in assignment.items()}
        self._index(t)
        log.info(
            "created topic %s (%d partitions, replication factor %d, id %s)",
            name,
            t.num_partitions,
            t.replication_factor,
            t.topic_id,
        )
        return t

    def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str | None]
    ) -> TopicInfo:
        t = self.topics.get(name)
        if t is None:
            try:
                t = self.create_topic(name, num_partitions, replication_factor, dict(configs))
            except Exception as e:
                if getattr(e, "code", None) is not None and self.topics.get(name) is not None:
                    return self.topics[name]
                raise
        return t

    def delete_topic(self, name: str) -> TopicInfo:
        t = existing_topic(self.topics, name)
        check_deletion_enabled(self.broker_config)
        # Kafka's admin path writes /admin/delete_topics/<t> and the controller removes the topic; here the
        # topic's znodes go at once (the answer comes once the topic is gone, as Kafka's DeleteTopics waits),
        # every broker deletes its replicas when the watch fires, and the controller forgets the partitions.
        kz = self.zk.sync
        kz.delete(zd.topic_path(name), recursive=True)
        try:
            kz.delete(zd.topic_config_path(name))
        except Exception:  # noqa: BLE001, S110 - no config znode
            pass
        self._remove(name)
        log.info("deleted topic %s", name)
        return t

    def create_partitions(self, name: str, new_total: int, *, validate_only: bool = False,
                          assignment: list[list[int]] | None = None) -> TopicInfo:
        """``assignment``: the replicas of each new partition (checked by the caller), else Kafka's
        round-robin."""
        t = existing_topic(self.topics, name)
        check_partition_increase(t, new_total)
        kz = self.zk.sync
        data, stat = kz.get(zd.topic_path(name))
        a = zd.TopicAssignment.decode(data)
        if assignment is not None:
            added = {len(a.partitions) + i: list(r) for i, r in enumerate(assignment)}
        else:
            added = assign_replicas(
                self._registered_brokers(),
                new_total - len(a.partitions),
                t.replication_factor,
                start_partition=len(a.partitions),
            )
        if validate_only:
            return t
        a.partitions.update(added)
        kz.set(zd.topic_path(name), a.encode(), stat.version)
        self.assignments[name] = {p: list(r) for p, r in a.partitions.items()}
        old = t.num_partitions
        t.num_partitions = new_total
        log.info("topic %s: partitions %d -> %d", name, old, new_total)
        return t

    def alter_topic_configs(
        self, name: str, configs: dict[str, str | None], *, replace: bool = False, validate_only: bool = False
    ) -> TopicInfo:
        t = existing_topic(self.topics, name)
        new = merged_topic_configs(t, configs, replace, self.config_validator)
        if validate_only:
            return t
        kz = self.zk.sync
        kz.set(zd.topic_config_path(name), zd.encode_topic_config(new))
        kz.create(
            zd.CONFIG_CHANGES + "/config_change_",
            zd.encode_config_change(f"topics/{name}"),
            sequence=True,
            makepath=True,
        )
        t.configs = new
        for lst in self.listeners:
            lst.on_topic_configs_changed(t)
        return t

    def adopt(self, name: str, num_partitions: int, topic_id: uuid.UUID | None) -> TopicInfo:
        raise kafka_error(
            "UNKNOWN_TOPIC_OR_PARTITION",
            f"topic {name} is on disk but not in ZooKeeper; a cluster broker does not adopt it",
        )

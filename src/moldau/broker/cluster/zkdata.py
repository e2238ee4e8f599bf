"""Kafka's ZooKeeper layout (ZooKeeper-mode Kafka 2.8/3.x ``ZkData``): paths and JSON codecs. Pure: no I/O.

docs/cluster.md lists every path with its JSON.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"

# persistent paths every cluster has (created by the first broker, as Kafka's
# KafkaZkClient.createTopLevelPaths)
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    ISR_CHANGES,
    "/config/clients",
    "/config/users",
    "/admin",
    "/cluster",
    BROKER_SEQID,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data.decode())


# ------------------------------------------------------------------------------------------------ cluster id


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data)["id"])


# ------------------------------------------------------------------------------------------------ brokers


@dataclass(slots=True)
class EndPoint:
    listener: str
    host: str
    port: int
    security_protocol: str


@dataclass(slots=True)
class BrokerInfo:
    """``/brokers/ids/<id>`` (version 5 of Kafka's BrokerIdZNode)."""

    broker_id: int
    endpoints: list[EndPoint]
    rack: str | None = None
    timestamp: int = 0

    def endpoint(self, listener: str | None) -> EndPoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return self.endpoints[0] if self.endpoints and listener is None else None

    def encode(self) -> bytes:
        first = self.endpoints[0] if self.endpoints else None
        return _dumps(
            {
                "version": 5,
                "host": first.host if first else None,
                "port": first.port if first else -1,
                "jmx_port": -1,
                "endpoints": [f"{ep.listener}://{ep.host}:{ep.port}" for ep in self.endpoints],
                "listener_security_protocol_map": {
                    ep.listener: ep.security_protocol for ep in self.endpoints
                },
                "rack": self.rack,
                "features": {},
                "timestamp": str(self.timestamp or int(time.time() * 1000)),
            }
        )

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerInfo:
        d = _loads(data) or {}
        pmap = d.get("listener_security_protocol_map") or {}
        eps = []
        for url in d.get("endpoints") or []:
            name, _, rest = url.partition("://")
            host, _, port = rest.rpartition(":")
            host = host.strip("[]")
            eps.append(EndPoint(name, host, int(port), pmap.get(name, name)))
        return cls(broker_id, eps, d.get("rack"), int(d.get("timestamp") or 0))


# ------------------------------------------------------------------------------------------------ topics


def topic_id_to_zk(topic_id: uuid.UUID) -> str:
    """Kafka writes topic ids as url-safe base64 without padding (Uuid.toString)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_zk(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return uuid.UUID(bytes=raw)


@dataclass(slots=True)
class TopicAssignment:
    """``/brokers/topics/<topic>`` (version 3: topic id, adding/removing replicas)."""

    topic_id: uuid.UUID | None
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        d: dict[str, Any] = {
            "version": 3,
            "partitions": {str(p): r for p, r in sorted(self.partitions.items())},
            "adding_replicas": {str(p): r for p, r in sorted(self.adding.items())},
            "removing_replicas": {str(p): r for p, r in sorted(self.removing.items())},
        }
        if self.topic_id is not None:
            d["topic_id"] = topic_id_to_zk(self.topic_id)
        return _dumps(d)

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        d = _loads(data) or {}
        tid = d.get("topic_id")
        return cls(
            topic_id_from_zk(tid) if tid else None,
            {int(p): [int(b) for b in r] for p, r in (d.get("partitions") or {}).items()},
            {int(p): [int(b) for b in r] for p, r in (d.get("adding_replicas") or {}).items()},
            {int(p): [int(b) for b in r] for p, r in (d.get("removing_replicas") or {}).items()},
        )


def encode_topic_config(configs: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(sorted(configs.items()))})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    d = _loads(data) or {}
    return {str(k): str(v) for k, v in (d.get("config") or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    return _dumps({"version": 2, "entity_path": entity_path})


# ------------------------------------------------------------------------------------------------ partition
# state

NO_LEADER = -1


@dataclass(slots=True)
class LeaderAndIsr:
    """``/brokers/topics/<t>/partitions/<p>/state``; ``zk_version`` is the znode's version (not in the
    JSON)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = 0

    def encode(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes, zk_version: int = 0) -> LeaderAndIsr:
        d = _loads(data) or {}
        return cls(
            int(d["leader"]),
            int(d["leader_epoch"]),
            [int(b) for b in d["isr"]],
            int(d["controller_epoch"]),
            zk_version,
        )


# ------------------------------------------------------------------------------------------------ controller


def encode_controller(broker_id: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))})


def decode_controller(data: bytes | None) -> int:
    d = _loads(data)
    return int(d["brokerid"]) if d else -1


def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(data: bytes | None) -> list[tuple[str, int]]:
    d = _loads(data) or {}
    return [(str(e["topic"]), int(e["partition"])) for e in d.get("partitions") or []]

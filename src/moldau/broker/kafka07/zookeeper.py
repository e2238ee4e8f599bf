"""ZooKeeper registration for ZooKeeper-based Kafka 0.7 clients, in 0.7's layout, under a chroot of its own
(0.7's ``/brokers/ids`` values clash with the JSON of later Kafka versions)::

    <chroot>/brokers/ids/<broker id>             ephemeral  "<creator>:<host>:<port>" (the KAFKA07 listener)
    <chroot>/brokers/topics/<topic>/<broker id>  ephemeral  number of partitions of the topic on this broker

0.7 producers read these to find brokers and partitions; 0.7 consumers also keep their group registrations
and offsets under ``<chroot>/consumers/...``, which the broker never touches. Needs kazoo (the ``zookeeper``
extra). Topic changes arrive as a ``MetadataStore`` listener and are written with kazoo's asynchronous calls
(the event loop does not wait for ZooKeeper); after a lost session everything is registered again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

from ..config import ConfigError

log = logging.getLogger(__name__)


class ZooKeeperRegistration:
    def __init__(self, connect: str, chroot: str, broker_id: int, host: str, port: int, metadata: Any, *,
                 session_timeout_ms: int = 6000) -> None:
        from kazoo.client import KazooClient

        self.chroot = "/" + chroot.strip("/") if chroot.strip("/") else ""
        self.broker_id = broker_id
        self.host = host or socket.getfqdn()
        self.port = port
        self.metadata = metadata
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self._stopped = False
        self._lost = False

    def _path(self, *parts: str) -> str:
        return self.chroot + "/" + "/".join(parts)

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 10.0) -> None:
        """Connect and register the broker and every topic (blocking: run it off the event loop)."""
        self.client.start(timeout=timeout)
        self.client.add_listener(self._on_state)
        self._register_all()
        log.info("0.7 ZooKeeper registration: broker %d at %s:%d under %s", self.broker_id, self.host,
                 self.port, self.chroot or "/")

    def stop(self) -> None:
        self._stopped = True
        try:
            self.client.stop()
            self.client.close()
        except Exception:
            log.debug("closing the 0.7 ZooKeeper client", exc_info=True)

    def _on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost and not self._stopped:
            self._lost = False
            self.client.handler.spawn(self._register_all)  # ephemeral nodes went with the session

    def _register_all(self) -> None:
        from kazoo.exceptions import NodeExistsError

        c = self.client
        for p in (self._path("brokers", "ids"), self._path("brokers", "topics"), self._path("consumers")):
            c.ensure_path(p)
        creator = f"{self.host}-{int(time.time() * 1000)}"
        value = f"{creator}:{self.host}:{self.port}".encode()
        path = self._path("brokers", "ids", str(self.broker_id))
        try:
            c.create(path, value, ephemeral=True)
        except NodeExistsError:  # left by our previous session (a crash): it expires, replace it now
            c.delete(path)
            c.create(path, value, ephemeral=True)
        for t in list(self.metadata.topics.values()):
            if not getattr(t, "is_internal", False):
                self._write_topic(t.name, int(t.num_partitions), sync=True)

    def _write_topic(self, name: str, partitions: int, *, sync: bool = False) -> None:
        from kazoo.exceptions import NodeExistsError

        c = self.client
        path = self._path("brokers", "topics", name, str(self.broker_id))
        value = str(partitions).encode()
        if sync:
            c.ensure_path(self._path("brokers", "topics", name))
            try:
                c.create(path, value, ephemeral=True)
            except NodeExistsError:
                c.set(path, value)
            return
        # from the event loop: asynchronous; an existing node (more partitions) is updated
        def created(result: Any) -> None:
            try:
                result.get()
            except NodeExistsError:
                c.set_async(path, value)
            except Exception:
                log.warning("0.7 ZooKeeper registration of topic %s failed", name, exc_info=True)

        c.create_async(path, value, ephemeral=True, makepath=True).rawlink(created)

    # ------------------------------------------------------------------------------------------ MetadataStore
    def on_topic_created(self, topic: Any) -> None:
        if not topic.is_internal and not self._stopped:
            self._write_topic(topic.name, int(topic.num_partitions))

    def on_partitions_created(self, topic: Any, old_count: int) -> None:
        self.on_topic_created(topic)

    def on_topic_deleted(self, topic: Any) -> None:
        if not self._stopped:
            self.client.delete_async(self._path("brokers", "topics", topic.name, str(self.broker_id)))

    def on_topic_configs_changed(self, topic: Any) -> None:
        return None


async def start_registration(config: Any, broker_id: int, host: str, port: int, metadata: Any) -> Any:
    """Connect (off the event loop), register, and follow topic changes. A missing kazoo or an unreachable
    ZooKeeper is a ConfigError naming ``kafka07.zookeeper.connect``."""
    try:
        reg = ZooKeeperRegistration(
            config.get("kafka07.zookeeper.connect"), config.get("kafka07.zookeeper.chroot") or "/", broker_id,
            host, port, metadata, session_timeout_ms=int(config.get("kafka07.zookeeper.session.timeout.ms")))
    except ImportError:
        raise ConfigError("kafka07.zookeeper.connect",
                          "kafka07.zookeeper.connect needs kazoo: pip install 'moldau[cluster]'") from None
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, reg.start)
    except Exception as e:  # noqa: BLE001 - kazoo's timeout and connection errors
        reg.stop()
        raise ConfigError("kafka07.zookeeper.connect",
                          f"cannot register in ZooKeeper at {config.get('kafka07.zookeeper.connect')}: "
                          f"{e or type(e).__name__}") from None
    metadata.listeners.append(reg)
    return reg

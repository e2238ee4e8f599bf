"""The cluster: brokers coordinated through ZooKeeper (docs/cluster.md).

``ClusterServices`` is what a broker started with ``zookeeper.connect`` adds: the ZooKeeper session, the
cluster id, the broker's registration under ``/brokers/ids``, the controller (active on one broker) and
controlled shutdown. The broker builds it, then the ``ZkMetadataStore`` and the ``ClusterReplicaManager`` on
it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from . import zkdata as zd

if TYPE_CHECKING:
    from ..config import Listener
    from ..services import BrokerServices
    from .store import ZkMetadataStore

log = logging.getLogger(__name__)


class ClusterError(RuntimeError):
    """A broker that cannot join the cluster (one line for the operator)."""


class ClusterServices:
    def __init__(self, services: BrokerServices) -> None:
        self.services = services
        self.config = services.config
        self.zk: Any = None
        self.controller: Any = None
        self.store: ZkMetadataStore | None = None  # services.metadata, once built (compose.Cluster)
        self.cluster_id = ""
        self.listener_name = ""
        self._registered = False
        self._closed = False
        self.config_changes: Any = None  # zkconfig.ConfigChangeWatcher on /config/changes
        self.broker_epoch = -1  # czxid of the registration znode (Kafka's broker epoch in ZooKeeper mode)

    # ------------------------------------------------------------------------------------------ start
    async def connect(self) -> None:
        """ZooKeeper session, top-level paths, cluster id. Before the log manager opens the data dir."""
        try:
            import kazoo  # noqa: F401
        except ImportError:
            raise ClusterError(
                "zookeeper.connect needs the kazoo package: pip install 'moldau[cluster]'"
            ) from None
        from .zk import ZkClient, ZkUnavailable

        cfg = self.config
        self._refuse_single_node_data()
        self._check_inter_broker_listener()
        self.zk = ZkClient(
            str(cfg.get("zookeeper.connect")),
            session_timeout_ms=int(cfg.get("zookeeper.session.timeout.ms")),
            connection_timeout_ms=cfg.get("zookeeper.connection.timeout.ms"),
        )
        try:
            await self.zk.start()
        except ZkUnavailable as e:
            raise ClusterError(str(e)) from None
        wanted = cfg.get("cluster.id") or _new_cluster_id()

        async def steps() -> None:
            for path in zd.PERSISTENT_PATHS:
                await self.zk.ensure_path(path)
            data = await self.zk.create_or_get(zd.CLUSTER_ID, zd.encode_cluster_id(wanted))
            self.cluster_id = zd.decode_cluster_id(data)

        await self._through_expiry("start-up", steps)
        self.zk.add_session_listener(self._on_session_state)
        await self._through_expiry("broker id", self._broker_id)
        from .zkconfig import ConfigChangeWatcher

        self.config_changes = ConfigChangeWatcher(self.zk)
        self.config_changes.start()

    async def _broker_id(self) -> None:
        """Without ``broker.id`` (or with -1) and ``broker.id.generation.enable``: the id of the data dir's
        meta.properties, else ``reserved.broker.max.id`` + the version of ``/brokers/seqid`` after a write
        (Kafka's KafkaZkClient.generateBrokerSequenceId); the log manager keeps it in meta.properties."""
        cfg = self.config
        reserved = int(cfg.get("reserved.broker.max.id"))
        if cfg.is_set("node.id"):
            if cfg.get("broker.id.generation.enable") and self.services.node_id > reserved:
                raise ClusterError(f"broker.id {self.services.node_id} is above reserved.broker.max.id "
                                   f"{reserved}, the range of generated ids")
            return
        if not cfg.get("broker.id.generation.enable"):
            return  # moldau's default node.id
        from moldau.log.checkpoint import read_meta_properties

        for d in cfg.log_dirs:
            meta = read_meta_properties(os.path.abspath(d)) or {}
            stored = meta.get("node.id") or meta.get("broker.id")
            if stored and stored.lstrip("-").isdigit() and int(stored) >= 0:
                self.services.node_id = int(stored)
                log.info("broker id %d from %s/meta.properties", self.services.node_id, d)
                return
        stat = await self.zk.set(zd.BROKER_SEQID, b"")
        self.services.node_id = reserved + int(stat.version)
        log.info("generated broker id %d (/brokers/seqid version %d)", self.services.node_id, stat.version)

    # ------------------------------------------------------------------------------------------ stores
    def broker_config_store(self, services: Any) -> Any:
        """Dynamic broker configs in /config/brokers (``zkconfig.ZkBrokerConfigStore``)."""
        from .zkconfig import ZkBrokerConfigStore

        return ZkBrokerConfigStore(services, self.zk, self.config_changes)

    def quota_store(self) -> Any:
        """Client quotas in /config/users, /config/clients, /config/ips (``zkconfig.ZkQuotaStore``)."""
        from ..quotas import QUOTAS_FILE
        from .zkconfig import ZkQuotaStore

        self._warn_local(QUOTAS_FILE, "client quotas", "/config/users, /config/clients, /config/ips")
        return ZkQuotaStore(self.zk, self.config_changes)

    def _warn_local(self, name: str, what: str, where: str) -> None:
        path = os.path.join(self.services.data_dir, name)
        if os.path.exists(path):
            log.warning("%s are not read from %s in a cluster: ZooKeeper (%s) holds them", what, path, where)

    def credential_store(self, local: Any) -> Any:
        """SCRAM credentials in /config/users (``zkconfig.ZkCredentialStore``); PLAIN stays in ``local``."""
        from .zkconfig import ZkCredentialStore

        return ZkCredentialStore(self.zk, self.config_changes, local)

    def acl_authorizer(self, **kw: Any) -> Any:
        """The ACL authorizer over /kafka-acl and /kafka-acl-extended (``zkacl.ZkAclAuthorizer``)."""
        from ..security.authorizer import ACL_FILE
        from .zkacl import ZkAclAuthorizer

        self._warn_local(ACL_FILE, "ACLs", "/kafka-acl, /kafka-acl-extended")
        return ZkAclAuthorizer(self.zk, **kw)

    def _check_inter_broker_listener(self) -> None:
        """The controller, the replica fetchers and the marker writers connect without TLS or SASL."""
        listeners = self.config.listeners
        name = self.config.get("inter.broker.listener.name") or listeners[0].name
        lst = next((x for x in listeners if x.name == name), None)
        if lst is None:
            raise ClusterError(f"inter.broker.listener.name {name} is not one of the listeners")
        if lst.security_protocol != "PLAINTEXT":
            raise ClusterError(f"inter.broker.listener.name {name} is {lst.security_protocol}; brokers of a "
                               "cluster talk to each other over a PLAINTEXT listener (docs/cluster.md)")

    def _refuse_single_node_data(self) -> None:
        from ..metadata import METADATA_FILE

        path = os.path.join(self.services.data_dir, METADATA_FILE)
        try:
            import json

            with open(path, encoding="utf-8") as f:
                topics = json.load(f).get("topics") or []
        except (FileNotFoundError, ValueError):
            return
        if topics:
            raise ClusterError(
                f"{path} holds the topics of a single-node broker; a broker with zookeeper.connect "
                "does not take them over (use another log.dirs, see docs/cluster.md)"
            )

    async def register(self, listeners: list[Listener]) -> None:
        """``/brokers/ids/<id>`` (ephemeral) with the bound ``listeners``, then the controller election."""
        from .controller import Controller

        broker = self.services
        eps = []
        for lst in listeners:
            adv = broker.advertised_listener(lst.name)
            eps.append(zd.EndPoint(lst.name, adv.host, adv.port, lst.security_protocol))
        self.listener_name = self.config.get("inter.broker.listener.name") or listeners[0].name
        info = zd.BrokerInfo(broker.node_id, eps, self.config.get("broker.rack"))
        await self._create_registration(info)
        self._info = info
        self.controller = Controller(
            broker.node_id,
            self.zk,
            listener_name=self.listener_name,
            unclean=self._unclean_enabled,
            timeout_ms=int(self.config.get("controller.socket.timeout.ms") or 30000),
        )
        self.controller.start()
        if self.config.get("auto.leader.rebalance.enable"):
            self.controller.start_rebalance(float(self.config.get("leader.imbalance.check.interval.seconds")),
                                            int(self.config.get("leader.imbalance.per.broker.percentage")))

    async def _through_expiry(self, what: str, step: Any) -> Any:
        """``step()`` again when the session expired under it (ZkClient raises SessionExpiredError; the next
        try runs in the new session), as Kafka's broker repeats its registration after a new session."""
        from kazoo.exceptions import SessionExpiredError

        while True:
            try:
                return await step()
            except SessionExpiredError:
                log.info("ZooKeeper session expired during %s; again in the new session", what)

    async def _create_registration(self, info: zd.BrokerInfo) -> None:
        await self._through_expiry("registration", lambda: self._register_once(info))

    async def _register_once(self, info: zd.BrokerInfo) -> None:
        """The ephemeral ``/brokers/ids/<id>``. ZooKeeper unreachable meanwhile: the calls wait and are
        retried (``ZkClient``), a create whose answer was lost counts when the znode is our session's. A
        znode of another session (this broker before a kill -9 and restart) is waited out, up to twice the
        session timeout plus 10 s of answers (time without a connection does not count): then another live
        broker has the id."""
        from kazoo.exceptions import NodeExistsError

        path = zd.broker_path(info.broker_id)
        waits = int((2 * self.zk.session_timeout_ms + 10000) / 500)
        for attempt in range(waits + 1):
            try:
                await self.zk.create(path, info.encode(), ephemeral=True)
                got = await self.zk.get(path)
                if got is not None:
                    self.broker_epoch = got[1].czxid
                self._registered = True
                log.info("registered broker %d in ZooKeeper at %s", info.broker_id, path)
                return
            except NodeExistsError:
                got = await self.zk.get(path)
                if got is not None and got[1].ephemeralOwner == self.zk.session_id:
                    self.broker_epoch = got[1].czxid
                    self._registered = True
                    log.info("registered broker %d in ZooKeeper at %s", info.broker_id, path)
                    return
                if attempt == 0 and got is not None:
                    log.info("%s is held by session 0x%x (an earlier run of this broker?); waiting for it to "
                             "expire", path, got[1].ephemeralOwner)
                await asyncio.sleep(0.5)
        raise ClusterError(f"broker id {info.broker_id} is registered by another live broker ({path})")

    def _unclean_enabled(self, topic: str) -> bool:
        t = self.services.metadata.get(topic)
        val = t.configs.get("unclean.leader.election.enable") if t is not None else None
        if val is None:
            return bool(self.config.get("unclean.leader.election.enable"))
        return str(val).lower() == "true"

    def _on_session_state(self, state: str) -> None:
        if self._closed:
            return
        if state == "LOST":
            log.warning("ZooKeeper session expired; re-registering when reconnected")
            self._registered = False
        elif state == "CONNECTED" and not self._registered and getattr(self, "_info", None) is not None:
            asyncio.get_running_loop().create_task(self._reregister())

    async def _reregister(self) -> None:
        try:
            await self._create_registration(self._info)
        except Exception:
            log.exception("cannot re-register broker %d", self.services.node_id)

    # ------------------------------------------------------------------------------------------ stop
    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away (controlled.shutdown.enable)."""
        if not self.config.get("controlled.shutdown.enable") or self.zk is None or not self._registered:
            return
        from moldau.client.conn import Connection
        from moldau.protocol import messages as m

        store = self.store
        if store is None:  # pragma: no cover - registered brokers have built their metadata store
            return
        retries = int(self.config.get("controlled.shutdown.max.retries") or 3)
        for _ in range(retries):
            cid = store.controller_id()
            if cid == self.services.node_id and self.controller is not None and self.controller.active:
                _err, remaining = await self.controller.controlled_shutdown(cid)
                if not remaining:
                    log.info("controlled shutdown: leaderships moved")
                    return
            else:
                b = store.live.get(cid)
                ep = b.endpoints.get(self.listener_name) if b is not None else None
                if ep is not None:
                    try:
                        conn = await Connection.open(ep[0], ep[1],
                                                     client_id=f"broker-{self.services.node_id}")
                        try:
                            resp = await conn.send(
                                7,
                                m.ControlledShutdownRequest.new(
                                    broker_id=self.services.node_id, broker_epoch=-1
                                ),
                                version=3,
                                timeout_ms=30000,
                            )
                        finally:
                            conn.close()
                        if resp.error_code == 0 and not resp.remaining_partitions:
                            log.info("controlled shutdown: leaderships moved")
                            return
                    except Exception as e:  # noqa: BLE001
                        log.info("controlled shutdown request failed: %s", e)
            await asyncio.sleep(0.5)
        log.warning("controlled shutdown did not complete; stopping anyway")

    async def close(self) -> None:
        self._closed = True
        if self.controller is not None:
            await self.controller.close()
        if self.zk is not None:
            await self.zk.close()


def _new_cluster_id() -> str:
    from moldau.log.checkpoint import new_kafka_uuid

    return str(new_kafka_uuid())

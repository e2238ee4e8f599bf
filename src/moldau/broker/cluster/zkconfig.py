"""Entity configs in ZooKeeper, as ZooKeeper-mode Kafka keeps them (``AdminZkClient.changeConfigs``,
``ZkConfigManager``): dynamic broker configs, client quotas and SCRAM credentials of a cluster.

Layout (docs/cluster.md)::

    /config/brokers/<default> | /config/brokers/<id>          {"version":1,"config":{"log.retention.ms":".."}}
    /config/users/<user> | /config/users/<default>            quotas and SCRAM-SHA-256 / SCRAM-SHA-512
    /config/users/<user>/clients/<client-id>                  quotas of a (user, client-id)
    /config/clients/<client-id> | /config/clients/<default>   quotas of a client id
    /config/ips/<ip> | /config/ips/<default>                  connection_creation_rate
    /config/changes/config_change_<seq>                       {"version":2,"entity_path":"users/alice"}

User and client-id names in paths are sanitized as Kafka's ``Sanitizer`` (URL encoding, ``*`` as ``%2A``,
space as ``%20``); ``<default>`` is the entity type's default. A SCRAM credential is the string
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` (``ScramCredentialUtils``).

Every change writes the entity's znode and then a notification; every broker watches ``/config/changes``
(``ConfigChangeWatcher``) and re-reads the entity the notification names, so a change made through one broker
reaches all of them. The stores here are the cluster's implementations of the broker's store interfaces:
``ZkBrokerConfigStore`` (``topic_config.FileBrokerConfigStore``), ``ZkQuotaStore`` (``quotas.QuotaStore``),
``ZkCredentialStore`` (``security.credentials.CredentialStore``). Their writes are synchronous kazoo calls
(one loopback round trip each), because the request handlers that call them are synchronous, as the topic
writes of ``ZkMetadataStore``.
"""

from __future__ import annotations

import asyncio
import base64
import decimal
import functools
import json
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from . import zkdata as zd

log = logging.getLogger(__name__)

DEFAULT = "<default>"
CONFIG = "/config"
CHANGE_PREFIX = "config_change_"
#: notifications older than this are removed by the brokers that process them (Kafka: 15 minutes)
CHANGE_EXPIRY_MS = 15 * 60 * 1000

BROKERS, USERS, CLIENTS, IPS = "brokers", "users", "clients", "ips"
GROUPS = "groups"  # group configs (ConfigResource GROUP): share groups


# ------------------------------------------------------------------------------------------------ codecs


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encode (UTF-8) with ``*`` and space percent-encoded."""
    out = urllib.parse.quote(name, safe="-_.*")
    return out.replace("*", "%2A").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def entity_path(entity_type: str, name: str | None) -> str:
    """``users/alice`` for (users, alice); ``<default>`` for None. Brokers and ips are not sanitized."""
    if name is None:
        return f"{entity_type}/{DEFAULT}"
    if entity_type in (USERS, CLIENTS):
        return f"{entity_type}/{sanitize(name)}"
    return f"{entity_type}/{name}"


def encode_entity_config(configs: Mapping[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(sorted(configs.items()))}, separators=(",", ":")).encode()


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    d = json.loads(data.decode())
    return {str(k): str(v) for k, v in (d.get("config") or {}).items()}


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def scram_to_string(salt: bytes, stored_key: bytes, server_key: bytes, iterations: int) -> str:
    """``ScramCredentialUtils.credentialToString``."""
    return (f"salt={_b64(salt)},stored_key={_b64(stored_key)},server_key={_b64(server_key)},"
            f"iterations={iterations}")


def scram_from_string(text: str) -> dict[str, Any]:
    """{"salt","stored_key","server_key"} (base64 text) and "iterations" (int) of a credential string."""
    parts = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
    return {"salt": parts["salt"], "stored_key": parts["stored_key"], "server_key": parts["server_key"],
            "iterations": int(parts["iterations"])}


def write_entity_config(kz: Any, path: str, configs: Mapping[str, str]) -> int:
    """Write ``/config/<path>`` and the change notification (``AdminZkClient.changeEntityConfig``). Returns
    the znode's mzxid after the write (``ConfigChangeWatcher.wrote``)."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    znode = f"{CONFIG}/{path}"
    data = encode_entity_config(configs)
    try:
        stat = kz.set(znode, data)
    except NoNodeError:
        try:
            stat = kz.create(znode, data, makepath=True, include_data=True)[1]
        except NodeExistsError:
            stat = kz.set(znode, data)
    kz.create(f"{zd.CONFIG_CHANGES}/{CHANGE_PREFIX}", zd.encode_config_change(path), sequence=True,
              makepath=True)
    return int(stat.mzxid)


def read_entity_config(kz: Any, path: str) -> dict[str, str]:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = kz.get(f"{CONFIG}/{path}")
    except NoNodeError:
        return {}
    return decode_entity_config(data)


def children(kz: Any, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return list(kz.get_children(path))
    except NoNodeError:
        return []


# ------------------------------------------------------------------------------------------------ watcher

EntityHandler = Callable[[str, dict[str, str]], None]


class NotificationListener:
    """Kafka's ``ZkNodeChangeNotificationListener``: watches a folder of sequential notifications
    (``<path>/<prefix><seq>``) and hands the data of each new one, in order, to ``handler`` (a coroutine
    function). Notifications present at ``start`` are not replayed (whoever listens reads the full state when
    it starts). Notifications older than 15 minutes are deleted (at most once a minute, as they are seen)."""

    def __init__(self, zk: Any, path: str, prefix: str, handler: Callable[[bytes], Awaitable[None]]) -> None:
        self.zk = zk
        self.path = path
        self.prefix = prefix
        self.handler = handler
        self._last_seq = -1
        self._last_purge_ms = 0
        self._lock = asyncio.Lock()

    def _seq(self, name: str) -> int:
        if not name.startswith(self.prefix):
            return -1
        try:
            return int(name[len(self.prefix):])
        except ValueError:
            return -1

    def start(self) -> None:
        self._last_seq = max((self._seq(c) for c in children(self.zk.sync, self.path)), default=-1)
        self.zk.watch_children(self.path, self._on_children)

    async def _on_children(self, names: list[str]) -> None:
        async with self._lock:
            new = sorted((s, n) for n in names if (s := self._seq(n)) > self._last_seq)
            for seq, name in new:
                self._last_seq = seq
                got = await self.zk.get(f"{self.path}/{name}")
                if got is None:
                    continue
                try:
                    await self.handler(got[0])
                except Exception:
                    log.exception("notification %s/%s failed", self.path, name)
            now_ms = int(time.time() * 1000)
            if new and now_ms - self._last_purge_ms >= 60_000:
                self._last_purge_ms = now_ms
                for name in sorted(names, key=self._seq):
                    got = await self.zk.exists(f"{self.path}/{name}")
                    if got is None:
                        continue
                    if now_ms - int(got.ctime) <= CHANGE_EXPIRY_MS:
                        break  # the rest are newer
                    await self.zk.delete(f"{self.path}/{name}")


class ConfigChangeWatcher:
    """``/config/changes`` (Kafka's ``ZkConfigManager``): each ``config_change_<seq>`` names an entity path;
    the handlers registered for its entity type get the rest of the path (``alice``, ``alice/clients/c1``,
    ``<default>``) and the entity's current config.

    The config is re-read when the notification is processed, and this broker's own writes are applied at
    once (read-your-writes): a notification of an earlier change whose re-read finished before this broker
    wrote the entity again would put the older config back. So the newest version (mzxid) applied per entity
    is kept, and a re-read older than it is dropped (the notification of the newer write follows)."""

    def __init__(self, zk: Any) -> None:
        self.zk = zk
        self._handlers: dict[str, list[EntityHandler]] = {}
        self._applied: dict[str, int] = {}  # entity path -> mzxid of the newest config applied
        self._listener = NotificationListener(zk, zd.CONFIG_CHANGES, CHANGE_PREFIX, self._process)

    def register(self, entity_type: str, fn: EntityHandler) -> None:
        self._handlers.setdefault(entity_type, []).append(fn)

    def start(self) -> None:
        self._listener.start()

    def wrote(self, path: str, mzxid: int) -> None:
        """This broker wrote (and applied) entity ``path`` at ``mzxid`` (``write_entity_config``)."""
        self._applied[path] = max(mzxid, self._applied.get(path, -1))

    async def _process(self, data: bytes) -> None:
        d = json.loads(data.decode())
        if int(d.get("version", 0)) == 2:
            path = str(d["entity_path"])
        else:  # version 1: {"version":1,"entity_type":"topics","entity_name":"t"}
            path = f"{d['entity_type']}/{d['entity_name']}"
        entity_type, _, rest = path.partition("/")
        handlers = self._handlers.get(entity_type)
        if not handlers:
            return
        got = await self.zk.get(f"{CONFIG}/{path}")
        if got is not None:
            mzxid = int(got[1].mzxid)
            if mzxid < self._applied.get(path, -1):
                log.debug("config change for %s: older than what this broker applied, dropped", path)
                return
            self._applied[path] = mzxid
        configs = decode_entity_config(got[0] if got else None)
        log.debug("config change for %s: %s", path, sorted(configs))
        for fn in handlers:
            fn(rest, configs)


# ------------------------------------------------------------------------------------------------ brokers


class ZkBrokerConfigStore:
    """Dynamic broker configs in ``/config/brokers/<default>`` and ``/config/brokers/<id>``: any broker
    writes any level (a per-broker change for another broker is validated here and reaches that broker
    through the notification); each broker applies the cluster default and its own id."""

    any_broker = True

    def __init__(self, services: Any, zk: Any, watcher: ConfigChangeWatcher) -> None:
        from .. import topic_config as tc

        self.services = services
        self.zk = zk
        self.watcher = watcher
        self._tc = tc
        kz = zk.sync
        node = services.node_id
        default = read_entity_config(kz, entity_path(BROKERS, None))
        mine = read_entity_config(kz, entity_path(BROKERS, str(node)))
        local = tc.broker_dynamic_configs(services)
        if (local.cluster_default or local.per_broker) and (local.cluster_default != default
                                                            or local.per_broker != mine):
            log.warning("dynamic broker configs in %s (per broker %s, cluster default %s) are not used: in a "
                        "cluster ZooKeeper holds them (/config/brokers)", tc.DYNAMIC_CONFIGS_FILE,
                        local.per_broker, local.cluster_default)
        self._apply(True, default)
        self._apply(False, mine)
        watcher.register(BROKERS, self._on_change)

    def _apply(self, cluster_default: bool, configs: Mapping[str, str]) -> None:
        """Apply a level read from ZooKeeper; a key this broker refuses (written by another tool or a newer
        version) is left out with an error in the log, as the receiving broker would have refused it."""
        good: dict[str, str] = {}
        for key, value in configs.items():
            try:
                self._tc.validate_broker_config(key, value)
            except Exception as e:  # noqa: BLE001 - KafkaError with the reason
                log.error("dynamic broker config %s=%r from ZooKeeper ignored: %s", key, value, e)
                continue
            good[key] = value
        self._tc.apply_dynamic_level(self.services, cluster_default=cluster_default, configs=good)

    def level(self, broker_id: int | None) -> dict[str, str]:
        if broker_id is None or broker_id == self.services.node_id:
            dyn = self._tc.broker_dynamic_configs(self.services)
            return dict(dyn.cluster_default if broker_id is None else dyn.per_broker)
        return read_entity_config(self.zk.sync, entity_path(BROKERS, str(broker_id)))

    def set_level(self, broker_id: int | None, configs: Mapping[str, str]) -> None:
        name = None if broker_id is None else str(broker_id)
        path = entity_path(BROKERS, name)
        mzxid = write_entity_config(self.zk.sync, path, dict(configs))
        if broker_id is None or broker_id == self.services.node_id:  # read-your-writes on this broker
            self.watcher.wrote(path, mzxid)
            self._apply(broker_id is None, configs)

    def _on_change(self, name: str, configs: dict[str, str]) -> None:
        if name == DEFAULT:
            self._apply(True, configs)
        elif name == str(self.services.node_id):
            self._apply(False, configs)


# ------------------------------------------------------------------------------------------------ quotas

QuotaEntity = tuple[tuple[str, "str | None"], ...]


def quota_entity_path(entity: QuotaEntity) -> str:
    """The znode path (below /config) of a quota entity (sorted (type, name) pairs, None = default)."""
    names = dict(entity)
    if "ip" in names:
        return entity_path(IPS, names["ip"])
    if "user" in names and "client-id" in names:
        return f"{entity_path(USERS, names['user'])}/{entity_path(CLIENTS, names['client-id'])}"
    if "user" in names:
        return entity_path(USERS, names["user"])
    return entity_path(CLIENTS, names["client-id"])


def _name(part: str) -> str | None:
    return None if part == DEFAULT else desanitize(part)


class ZkQuotaStore:
    """Client quotas under ``/config/users``, ``/config/clients`` and ``/config/ips``
    (``quotas.QuotaStore``). ``on_change`` (the QuotaManager's ``reload``) is called when another broker
    changed one."""

    def __init__(self, zk: Any, watcher: ConfigChangeWatcher) -> None:
        self.zk = zk
        self.watcher = watcher
        self.on_change: Callable[[], None] | None = None
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        kz = zk.sync
        for user in children(kz, f"{CONFIG}/{USERS}"):
            self._put(((USERS, user),), read_entity_config(kz, f"{USERS}/{user}"))
            for client in children(kz, f"{CONFIG}/{USERS}/{user}/{CLIENTS}"):
                self._put(((USERS, user), (CLIENTS, client)),
                          read_entity_config(kz, f"{USERS}/{user}/{CLIENTS}/{client}"))
        for client in children(kz, f"{CONFIG}/{CLIENTS}"):
            self._put(((CLIENTS, client),), read_entity_config(kz, f"{CLIENTS}/{client}"))
        for ip in children(kz, f"{CONFIG}/{IPS}"):
            self._put(((IPS, ip),), read_entity_config(kz, f"{IPS}/{ip}"))
        for t in (USERS, CLIENTS, IPS):
            watcher.register(t, functools.partial(self._on_change, t))

    def _put(self, parts: Iterable[tuple[str, str]], configs: Mapping[str, str]) -> None:
        from ..quotas import CLIENT_KEYS, IP_KEYS, make_entity

        kinds = {USERS: "user", CLIENTS: "client-id", IPS: "ip"}
        entity = make_entity((kinds[t], _name(n)) for t, n in parts)
        keys = IP_KEYS if entity[0][0] == "ip" else CLIENT_KEYS
        values: dict[str, float] = {}
        for k, v in configs.items():
            if k in keys:
                try:
                    values[k] = float(v)
                except ValueError:
                    log.error("quota %s=%r of %s in ZooKeeper is not a number", k, v, entity)
        if values:
            self._quotas[entity] = values
        else:
            self._quotas.pop(entity, None)

    def _on_change(self, entity_type: str, rest: str, configs: dict[str, str]) -> None:
        segs = rest.split("/")
        if entity_type == USERS and len(segs) == 3 and segs[1] == CLIENTS:
            self._put(((USERS, segs[0]), (CLIENTS, segs[2])), configs)
        elif len(segs) == 1:
            self._put(((entity_type, segs[0]),), configs)
        else:
            return
        if self.on_change is not None:
            self.on_change()

    def all(self) -> dict[QuotaEntity, dict[str, float]]:
        return {e: dict(v) for e, v in self._quotas.items()}

    def alter(self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]) -> None:
        from ..quotas import apply_changes

        kz = self.zk.sync
        new = apply_changes(self._quotas, changes)
        for entity in dict.fromkeys(e for e, _ in changes):
            path = quota_entity_path(entity)
            current = read_entity_config(kz, path)  # a user's znode also holds its SCRAM credentials
            ours = set(self._quotas.get(entity, {})) | set(new.get(entity, {}))
            merged = {k: v for k, v in current.items() if k not in ours}
            merged.update({k: _quota_string(v) for k, v in new.get(entity, {}).items()})
            self.watcher.wrote(path, write_entity_config(kz, path, merged))
        self._quotas = new


def _quota_string(v: float) -> str:
    """Kafka writes quota values with Java's ``Double.toString``: ``1048576.0``, ``1.048576E7`` from 10^7
    up (and below 10^-3)."""
    v = float(v)
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(v)
    sign, digits, exp = decimal.Decimal(repr(v)).normalize().as_tuple()
    assert isinstance(exp, int)
    e = len(digits) + exp - 1
    frac = "".join(map(str, digits[1:])) or "0"
    return f"{'-' if sign else ''}{digits[0]}.{frac}E{e}"


# ------------------------------------------------------------------------------------------------ SCRAM


class ZkCredentialStore:
    """SCRAM credentials in ``/config/users/<user>`` (keys ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``), the
    interface of ``CredentialStore``. PLAIN users stay in the broker's local store (Kafka keeps them in a
    JAAS file, not in ZooKeeper): ``check_plain`` and the PLAIN entries of ``users()`` come from it."""

    def __init__(self, zk: Any, watcher: ConfigChangeWatcher, local: Any) -> None:
        self.zk = zk
        self.watcher = watcher
        self.local = local
        self.path = "ZooKeeper /config/users"
        self._scram: dict[str, dict[str, dict[str, Any]]] = {}
        kz = zk.sync
        for user in children(kz, f"{CONFIG}/{USERS}"):
            if user != DEFAULT:
                self._set_user(desanitize(user), read_entity_config(kz, f"{USERS}/{user}"))
        local_scram = {u for u, mechs in local.users().items()
                       if any(m.startswith("SCRAM-") for m in mechs)}
        if local_scram:
            log.warning("SCRAM users of %s are not used in a cluster (ZooKeeper /config/users holds "
                        "them): %s", local.path, ", ".join(sorted(local_scram)))
        watcher.register(USERS, self._on_change)

    def _set_user(self, name: str, configs: Mapping[str, str]) -> None:
        from moldau.protocol.sasl_mechanisms import SCRAM_MECHANISMS

        entry: dict[str, dict[str, Any]] = {}
        for mech in SCRAM_MECHANISMS:
            text = configs.get(mech)
            if text is None:
                continue
            try:
                entry[mech] = scram_from_string(text)
            except (KeyError, ValueError):
                log.error("the %s credential of %r in ZooKeeper is damaged", mech, name)
        if entry:
            self._scram[name] = entry
        else:
            self._scram.pop(name, None)

    def _on_change(self, rest: str, configs: dict[str, str]) -> None:
        if "/" in rest or rest == DEFAULT:
            return
        self._set_user(desanitize(rest), configs)

    # ---------------------------------------------------------------------------------------- queries
    def users(self) -> dict[str, dict[str, int]]:
        out = {u: {m: int(c) for m, c in mechs.items() if m == "PLAIN"}
               for u, mechs in self.local.users().items()}
        for u, mechs in self._scram.items():
            out.setdefault(u, {}).update({m: int(c["iterations"]) for m, c in mechs.items()})
        return {u: dict(sorted(m.items())) for u, m in sorted(out.items()) if m}

    def has_user(self, name: str) -> bool:
        return name in self._scram or self.local.has_user(name)

    def scram(self, name: str, mechanism: str) -> Any:
        from moldau.protocol.sasl_mechanisms import ScramCredential

        c = self._scram.get(name, {}).get(mechanism)
        if c is None:
            return None
        try:
            return ScramCredential(base64.b64decode(c["salt"]), int(c["iterations"]),
                                   base64.b64decode(c["stored_key"]), base64.b64decode(c["server_key"]))
        except (KeyError, ValueError, TypeError):
            return None

    def check_plain(self, name: str, password: str) -> bool:
        return bool(self.local.check_plain(name, password))

    # ---------------------------------------------------------------------------------------- changes
    def apply(self, changes: list[tuple[str, str, Any]]) -> None:
        """As ``CredentialStore.apply``: ("delete", user, mechanism) or ("upsert", user, (mechanism,
        iterations, salt, salted_password)); one znode write and notification per user."""
        from moldau.protocol.sasl_mechanisms import SCRAM_MECHANISMS, credential_from_salted

        by_user: dict[str, list[tuple[str, Any]]] = {}
        for kind, name, arg in changes:
            by_user.setdefault(name, []).append((kind, arg))
        kz = self.zk.sync
        for name, ops in by_user.items():
            path = entity_path(USERS, name)
            configs = read_entity_config(kz, path)
            for kind, arg in ops:
                if kind == "delete":
                    configs.pop(arg, None)
                else:
                    mechanism, iterations, salt, salted = arg
                    cred = credential_from_salted(SCRAM_MECHANISMS[mechanism], salted, salt, iterations)
                    configs[mechanism] = scram_to_string(cred.salt, cred.stored_key, cred.server_key,
                                                         cred.iterations)
            self.watcher.wrote(path, write_entity_config(kz, path, configs))
            self._set_user(name, configs)

    def upsert_scram_salted(self, name: str, mechanism: str, iterations: int, salt: bytes,
                            salted_password: bytes) -> None:
        from ..security.credentials import check_iterations, check_user

        check_user(name)
        check_iterations(iterations)
        self.apply([("upsert", name, (mechanism, iterations, salt, salted_password))])

    def delete(self, name: str, mechanism: str | None = None) -> bool:
        from moldau.protocol.sasl_mechanisms import SCRAM_MECHANISMS

        have = self._scram.get(name, {})
        mechs = [mechanism] if mechanism is not None else list(have)
        mechs = [m for m in mechs if m in have and m in SCRAM_MECHANISMS]
        if not mechs:
            return False
        self.apply([("delete", name, m) for m in mechs])
        return True


# ------------------------------------------------------------------------------------------------ groups


class ZkGroupConfigs:
    """Group configs (ConfigResource GROUP, the share groups' ``share.*`` keys) in ``/config/groups/<group>``:
    any broker writes them (``save``), every broker's ``share.config.GroupConfigStore`` holds them all, so the
    leader of a share-partition sees the group's ``share.auto.offset.reset`` whichever broker was asked."""

    def __init__(self, zk: Any, watcher: ConfigChangeWatcher, store: Any) -> None:
        self.zk = zk
        self.watcher = watcher
        self.store = store
        kz = zk.sync
        groups: dict[str, dict[str, str]] = {}
        for g in children(kz, f"{CONFIG}/{GROUPS}"):
            configs = read_entity_config(kz, f"{GROUPS}/{g}")
            if configs:
                groups[desanitize(g)] = configs
        store.groups = groups
        store.save = self.save
        watcher.register(GROUPS, self._on_change)

    def _on_change(self, rest: str, configs: dict[str, str]) -> None:
        group = desanitize(rest)
        if configs:
            self.store.groups[group] = dict(configs)
        else:
            self.store.groups.pop(group, None)

    def save(self, group: str, configs: Mapping[str, str]) -> None:
        path = f"{GROUPS}/{sanitize(group)}"
        self.watcher.wrote(path, write_entity_config(self.zk.sync, path, dict(configs)))

"""ACLs in ZooKeeper, as ZooKeeper-mode Kafka's ``AclAuthorizer`` keeps them (``ZkAclStore`` in ``ZkData``).

Layout (docs/cluster.md)::

    /kafka-acl/<ResourceType>/<name>                       literal patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>     prefixed patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
                              "host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                   "TOPIC:<name>" (a literal resource changed)
    /kafka-acl-extended-changes/acl_changes_<seq>          {"version":1,"resourceType":"TOPIC","name":..,
                                                            "patternType":"PREFIXED"}

``<ResourceType>`` is Kafka's camel-case name (``Topic``, ``Group``, ``Cluster``, ``TransactionalId``,
``DelegationToken``, ``User``), operations and permissions too (``Read``, ``IdempotentWrite``, ``Allow``).

``ZkAclAuthorizer`` is the standard authorizer (``security.authorizer.AclAuthorizer``: the decisions, the
cache, validation) over this storage instead of the data dir's file: CreateAcls / DeleteAcls write the
changed resources' znodes (a conditional set on the version read, retried on a conflict, as Kafka) and a
change notification; every broker watches both notification paths and re-reads the resource named.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable
from typing import Any

from ..security import authorizer as az
from .zkconfig import NotificationListener

log = logging.getLogger(__name__)

ACL_PATH = "/kafka-acl"
EXTENDED_PATH = "/kafka-acl-extended"
ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
PERSISTENT_PATHS = (ACL_PATH, f"{EXTENDED_PATH}/prefixed", ACL_CHANGES, EXTENDED_CHANGES)

Resource = tuple[int, int, str]  # (resource type, pattern type, name)


def camel(name: str) -> str:
    """``TRANSACTIONAL_ID`` -> ``TransactionalId`` (Kafka's SecurityUtils.resourceTypeName/operationName)."""
    return "".join(p.capitalize() for p in name.split("_"))


def uncamel(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.upper())
    return "".join(out)


def resource_path(r: Resource) -> str:
    rtype, ptype, name = r
    tname = camel(az.NAMES_RESOURCE[rtype])
    if ptype == az.LITERAL:
        return f"{ACL_PATH}/{tname}/{name}"
    return f"{EXTENDED_PATH}/{az.NAMES_PATTERN[ptype].lower()}/{tname}/{name}"


def encode_acls(acls: Iterable[az.AclBinding]) -> bytes:
    entries = [{"principal": a.principal, "permissionType": camel(az.NAMES_PERMISSION[a.permission]),
                "operation": camel(az.NAMES_OPERATION[a.operation]), "host": a.host}
               for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission))]
    return json.dumps({"version": 1, "acls": entries}, separators=(",", ":")).encode()


def decode_acls(r: Resource, data: bytes | None) -> set[az.AclBinding]:
    if not data:
        return set()
    d = json.loads(data.decode())
    rtype, ptype, name = r
    out = set()
    for e in d.get("acls") or []:
        try:
            out.add(az.AclBinding(rtype, name, ptype, str(e["principal"]), str(e["host"]),
                                  az.OPERATIONS[uncamel(str(e["operation"]))],
                                  az.PERMISSIONS[uncamel(str(e["permissionType"]))]))
        except KeyError:
            log.error("unreadable ACL entry %s of %s", e, resource_path(r))
    return out


def encode_change(r: Resource) -> tuple[str, bytes]:
    """(notification path prefix, data) of a change of resource ``r``."""
    rtype, ptype, name = r
    if ptype == az.LITERAL:
        return f"{ACL_CHANGES}/{CHANGE_PREFIX}", f"{az.NAMES_RESOURCE[rtype]}:{name}".encode()
    body = {"version": 1, "resourceType": az.NAMES_RESOURCE[rtype], "name": name,
            "patternType": az.NAMES_PATTERN[ptype]}
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(body, separators=(",", ":")).encode()


def decode_change(path: str, data: bytes) -> Resource:
    if path == ACL_CHANGES:
        tname, _, name = data.decode().partition(":")
        return az.RESOURCE_TYPES[uncamel(tname) if not tname.isupper() else tname], az.LITERAL, name
    d = json.loads(data.decode())
    rtype = az.RESOURCE_TYPES[str(d["resourceType"]).upper()]
    return rtype, az.PATTERN_TYPES[str(d["patternType"]).upper()], str(d["name"])


class ZkAclAuthorizer(az.AclAuthorizer):
    """The ACL authorizer of a cluster broker: bindings in ZooKeeper, shared by every broker."""

    def __init__(self, zk: Any, *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.zk = zk
        self._resources: dict[Resource, set[az.AclBinding]] = {}
        # resource -> the newest znode version (mzxid) this broker applied: a change notification re-reads the
        # resource, and a re-read older than this broker's own later write must not put the old ACLs back
        # (Kafka's AclAuthorizer holds one lock over its writes and the notifications' re-reads)
        self._applied: dict[Resource, int] = {}
        super().__init__("", super_users=super_users,
                         allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found)
        self.path = "ZooKeeper " + ACL_PATH
        kz = zk.sync
        for p in PERSISTENT_PATHS:
            kz.ensure_path(p)
        listeners = [NotificationListener(zk, changes, CHANGE_PREFIX,
                                          functools.partial(self._on_change, changes))
                     for changes in (ACL_CHANGES, EXTENDED_CHANGES)]
        for lst in listeners:  # before the full read: no change falls between the two
            lst.start()
        self._load_all(kz)

    # ---------------------------------------------------------------------------------------- storage
    def _load_all(self, kz: Any) -> None:
        resources: dict[Resource, set[az.AclBinding]] = {}
        roots = [(ACL_PATH, az.LITERAL), (f"{EXTENDED_PATH}/prefixed", az.PREFIXED)]
        for root, ptype in roots:
            for tname in kz.get_children(root):
                rtype = az.RESOURCE_TYPES.get(uncamel(tname))
                if rtype is None:
                    continue
                for name in kz.get_children(f"{root}/{tname}"):
                    r = (rtype, ptype, name)
                    data, _ = kz.get(resource_path(r))
                    acls = decode_acls(r, data)
                    if acls:
                        resources[r] = acls
        self._resources = resources
        self._publish()
        log.info("loaded %d ACL bindings from ZooKeeper", len(self._acls))

    def _publish(self) -> None:
        self._set([a for r in sorted(self._resources, key=str) for a in sorted(
            self._resources[r], key=lambda a: (a.principal, a.host, a.operation, a.permission))])

    def _load(self, force: bool = False) -> None:
        """The bindings come from ZooKeeper (loaded at start, then by the change watches)."""

    def maybe_reload(self) -> None:
        pass

    def _save(self) -> None:
        """Write the resources whose bindings differ from what ZooKeeper holds, each with a notification."""
        wanted: dict[Resource, set[az.AclBinding]] = {}
        for a in self._acls:
            wanted.setdefault((a.resource_type, a.pattern_type, a.name), set()).add(a)
        try:
            self._write(wanted)
        finally:  # what ZooKeeper holds, also when a write failed half way
            self._publish()

    def _write(self, wanted: dict[Resource, set[az.AclBinding]]) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        kz = self.zk.sync
        for r in set(wanted) | set(self._resources):
            old, new = self._resources.get(r, set()), wanted.get(r, set())
            if old == new:
                continue
            added, removed = new - old, old - new
            path = resource_path(r)
            for _attempt in range(10):  # another broker may change the same resource meanwhile
                try:
                    data, stat = kz.get(path)
                    current = decode_acls(r, data)
                except NoNodeError:
                    current, stat = set(), None
                result = (current | added) - removed
                try:
                    if stat is None:
                        if not result:
                            break
                        written = int(kz.create(path, encode_acls(result), makepath=True,
                                                include_data=True)[1].mzxid)
                    elif result:
                        written = int(kz.set(path, encode_acls(result), stat.version).mzxid)
                    else:
                        kz.delete(path, stat.version)
                        written = int(stat.mzxid) + 1  # every version up to the deleted one is older
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
                self._applied[r] = max(written, self._applied.get(r, -1))
                self._resources[r] = result
                if not result:
                    self._resources.pop(r, None)
                prefix, body = encode_change(r)
                kz.create(prefix, body, sequence=True, makepath=True)
                break
            else:
                raise RuntimeError(f"cannot update {path}: too many concurrent changes")

    # ---------------------------------------------------------------------------------------- watches
    async def _on_change(self, changes: str, data: bytes) -> None:
        try:
            r = decode_change(changes, data)
        except (KeyError, ValueError) as e:
            log.error("unreadable ACL change under %s: %s", changes, e)
            return
        path = resource_path(r)
        got = await self.zk.get(path)
        if got is not None:
            seen = int(got[1].mzxid)
        else:  # gone: as of the parent's last child change (a re-create since shows in the list)
            parent, _, name = path.rpartition("/")
            listed = await self.zk.children_stat(parent)
            if listed is not None and name in listed[0]:
                got = await self.zk.get(path)
            seen = int(got[1].mzxid) if got is not None else int(listed[1].pzxid) if listed else -1
        if seen < self._applied.get(r, -1):
            log.debug("ACL change of %s: older than what this broker applied, dropped", r)
            return
        self._applied[r] = seen
        acls = decode_acls(r, got[0] if got else None)
        if acls:
            self._resources[r] = acls
        else:
            self._resources.pop(r, None)
        with self._lock:
            self._publish()

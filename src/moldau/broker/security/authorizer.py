"""ACL authorization, as Kafka's standard authorizer, and the helpers the request handlers call.

An ACL binding is (resource type, resource name, pattern type) + (principal, host, operation, permission).

* Resource types: TOPIC, GROUP, CLUSTER (name ``kafka-cluster``), TRANSACTIONAL_ID, DELEGATION_TOKEN, USER.
* Pattern types: LITERAL (the name, or ``*`` for every resource of the type) and PREFIXED (names starting
  with it).
* Operations: ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
  ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS. An ALLOW of READ, WRITE, DELETE or ALTER
  implies DESCRIBE, an ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL covers every operation.
* Principals ``Type:name`` (``User:alice``; ``User:*`` = everyone), hosts an IP address or ``*``.

Decision for (principal, host, operation, resource): super users (``super.users``, ``User:a;User:b``) are
allowed; a matching DENY denies (deny beats allow); a matching ALLOW allows; when no ACL at all matches the
resource (whatever its principal), ``allow.everyone.if.no.acl.found`` decides; otherwise denied.

Bindings persist in ``<data-dir>/__moldau_acls.json`` and the file is re-read (at most once a second) when it
changes, so offline edits (``moldau acls --data-dir``) reach a running broker. Decisions are cached until the
ACLs change.

Handlers call the module-level helpers; with no authorizer configured (``authorizer.class.name`` empty)
they allow everything and cost one attribute read:

    from ..security.authorizer import allowed, TOPIC, WRITE
    if not allowed(ctx, WRITE, TOPIC, name): -> TOPIC_AUTHORIZATION_FAILED
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from moldau.log.checkpoint import atomic_write

log = logging.getLogger(__name__)

ACL_FILE = "__moldau_acls.json"
CLUSTER_NAME = "kafka-cluster"

# resource types (org.apache.kafka.common.resource.ResourceType)
UNKNOWN, ANY = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {"TOPIC": TOPIC, "GROUP": GROUP, "CLUSTER": CLUSTER, "TRANSACTIONAL_ID": TRANSACTIONAL_ID,
                  "DELEGATION_TOKEN": DELEGATION_TOKEN, "USER": USER}
# pattern types (PatternType)
MATCH, LITERAL, PREFIXED = 2, 3, 4
PATTERN_TYPES = {"ANY": ANY, "MATCH": MATCH, "LITERAL": LITERAL, "PREFIXED": PREFIXED}
# operations (AclOperation)
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION = 2, 3, 4, 5, 6, 7, 8, 9
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = 10, 11, 12, 13, 14
OPERATIONS = {"ALL": ALL, "READ": READ, "WRITE": WRITE, "CREATE": CREATE, "DELETE": DELETE, "ALTER": ALTER,
              "DESCRIBE": DESCRIBE, "CLUSTER_ACTION": CLUSTER_ACTION, "DESCRIBE_CONFIGS": DESCRIBE_CONFIGS,
              "ALTER_CONFIGS": ALTER_CONFIGS, "IDEMPOTENT_WRITE": IDEMPOTENT_WRITE,
              "CREATE_TOKENS": CREATE_TOKENS, "DESCRIBE_TOKENS": DESCRIBE_TOKENS}
# permission types (AclPermissionType)
DENY, ALLOW = 2, 3
PERMISSIONS = {"DENY": DENY, "ALLOW": ALLOW}

NAMES_RESOURCE = {v: k for k, v in RESOURCE_TYPES.items()}
NAMES_PATTERN = {v: k for k, v in PATTERN_TYPES.items()}
NAMES_OPERATION = {v: k for k, v in OPERATIONS.items()}
NAMES_PERMISSION = {v: k for k, v in PERMISSIONS.items()}

# operations each resource type supports (what authorized_operations reports), Kafka's lists
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}

# an ALLOW of any of these implies the key
_IMPLIED_BY = {DESCRIBE: (DESCRIBE, READ, WRITE, DELETE, ALTER), DESCRIBE_CONFIGS: (DESCRIBE_CONFIGS,
                                                                                    ALTER_CONFIGS)}


class AclError(ValueError):
    """An ACL binding that cannot be created (INVALID_REQUEST with this message)."""


@dataclass(slots=True, frozen=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={NAMES_OPERATION.get(self.operation)}, "
                f"permissionType={NAMES_PERMISSION.get(self.permission)}) on "
                f"{NAMES_RESOURCE.get(self.resource_type)}:{NAMES_PATTERN.get(self.pattern_type)}:{self.name}")


@dataclass(slots=True, frozen=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter; None and ANY match everything."""

    resource_type: int = ANY
    name: str | None = None
    pattern_type: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission: int = ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ANY and self.resource_type != b.resource_type:
            return False
        if not self._pattern_matches(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != ANY and self.operation != b.operation:
            return False
        if self.permission != ANY and self.permission != b.permission:
            return False
        return True

    def _pattern_matches(self, b: AclBinding) -> bool:
        pt = self.pattern_type
        if pt == ANY:
            return self.name is None or self.name == b.name
        if pt == MATCH:
            if self.name is None:
                return True
            if b.pattern_type == LITERAL:
                return b.name == self.name or b.name == "*"
            if b.pattern_type == PREFIXED:
                return self.name.startswith(b.name)
            return False
        return pt == b.pattern_type and (self.name is None or self.name == b.name)


def validate_binding(b: AclBinding) -> None:
    if b.resource_type not in NAMES_RESOURCE:
        raise AclError(f"Invalid resource type {b.resource_type}")
    if b.pattern_type not in (LITERAL, PREFIXED):
        raise AclError(f"Invalid pattern type {b.pattern_type}: must be LITERAL or PREFIXED")
    if b.operation not in NAMES_OPERATION:
        raise AclError(f"Invalid operation {b.operation}")
    if b.permission not in NAMES_PERMISSION:
        raise AclError(f"Invalid permission type {b.permission}")
    if not b.name:
        raise AclError("Resource name should not be empty")
    if b.pattern_type == PREFIXED and b.name == "*":
        raise AclError("A PREFIXED ACL cannot use the wildcard name '*'")
    if b.resource_type == CLUSTER and b.name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    ptype, sep, pname = b.principal.partition(":")
    if not sep or not ptype or not pname:
        raise AclError(f"Invalid principal {b.principal!r}: expected Type:name, e.g. User:alice")
    if not b.host:
        raise AclError("Invalid host: must not be empty ('*' means any host)")


def parse_super_users(value: str | None) -> frozenset[str]:
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class AclAuthorizer:
    """Kafka's standard ACL authorizer over a JSON file in the data directory."""

    def __init__(self, data_dir: str | os.PathLike[str], *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = os.path.join(os.fspath(data_dir), ACL_FILE)
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._monotonic = monotonic
        self._acls: list[AclBinding] = []
        self._by_type: dict[int, list[AclBinding]] = {}
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self._mtime: int | None = None
        self._next_check = 0.0
        self._lock = threading.Lock()
        self._load(force=True)

    # ---------------------------------------------------------------------------------------- storage
    def _load(self, force: bool = False) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._acls or force:
                self._set([])
            self._mtime = None
            return
        if not force and st.st_mtime_ns == self._mtime:
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            acls = [AclBinding(**a) for a in data.get("acls", [])]
        except (OSError, ValueError, TypeError) as e:
            if force:
                raise ValueError(f"cannot read the ACL file {self.path}: {e}") from None
            log.error("cannot read the ACL file %s: %s (keeping the previous ACLs)", self.path, e)
            return
        self._set(acls)
        self._mtime = st.st_mtime_ns
        log.info("loaded %d ACL bindings from %s", len(acls), self.path)

    def _set(self, acls: list[AclBinding]) -> None:
        by_type: dict[int, list[AclBinding]] = {}
        for a in acls:
            by_type.setdefault(a.resource_type, []).append(a)
        self._acls = acls
        self._by_type = by_type
        self._cache = {}

    def _save(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        data = json.dumps({"version": 1, "acls": [asdict(a) for a in self._acls]}, indent=1)
        atomic_write(self.path, data.encode("utf-8"), mode=0o600)
        try:
            self._mtime = os.stat(self.path).st_mtime_ns
        except OSError:  # pragma: no cover
            self._mtime = None

    def maybe_reload(self) -> None:
        now = self._monotonic()
        if now >= self._next_check:
            self._next_check = now + 1.0
            self._load()

    # ---------------------------------------------------------------------------------------- decisions
    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        self.maybe_reload()
        key = (principal, host, operation, resource_type, name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        result = self._decide(principal, host, operation, resource_type, name)
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[key] = result
        if not result:
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s", principal,
                     NAMES_OPERATION.get(operation, operation), host,
                     NAMES_RESOURCE.get(resource_type, resource_type), name)
        return result

    def _decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        matching = [a for a in self._by_type.get(resource_type, ()) if _resource_matches(a, name)]
        if not matching:
            return self.allow_if_no_acl
        implied = _IMPLIED_BY.get(operation, (operation,))
        allow = False
        for a in matching:
            if not (a.principal == principal or a.principal == "User:*"):
                continue
            if not (a.host == "*" or a.host == host):
                continue
            if a.permission == DENY:
                if a.operation == operation or a.operation == ALL:
                    return False
            elif a.permission == ALLOW and (a.operation == ALL or a.operation in implied):
                allow = True
        return allow

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of the type (Kafka's
        authorizeByResourceType, used for IdempotentWrite through any topic Write): an ALLOW for it that is
        not cancelled by a DENY on the same or a wider pattern."""
        self.maybe_reload()
        if principal in self.super_users:
            return True
        acls = [a for a in self._by_type.get(resource_type, ())
                if (a.principal == principal or a.principal == "User:*") and (a.host == "*" or a.host == host)
                and (a.operation == operation or a.operation == ALL)]
        denies = [a for a in acls if a.permission == DENY]
        if any(d.pattern_type == LITERAL and d.name == "*" for d in denies):
            return False
        for a in acls:
            if a.permission != ALLOW:
                continue
            covered = any((d.pattern_type == LITERAL and d.name == a.name and a.pattern_type == LITERAL)
                          or (d.pattern_type == PREFIXED and a.name.startswith(d.name)) for d in denies)
            if not covered:
                return True
        if self.allow_if_no_acl and not self._by_type.get(resource_type):
            return True
        return False

    # ---------------------------------------------------------------------------------------- admin
    def acls(self) -> list[AclBinding]:
        self.maybe_reload()
        return list(self._acls)

    def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """Add bindings; returns per binding None or an error message (INVALID_REQUEST)."""
        results: list[str | None] = []
        with self._lock:
            self._load()
            current = set(self._acls)
            new = list(self._acls)
            for b in bindings:
                try:
                    validate_binding(b)
                except AclError as e:
                    results.append(str(e))
                    continue
                if b not in current:
                    current.add(b)
                    new.append(b)
                    log.info("ACL created: %s", b)
                results.append(None)
            if len(new) != len(self._acls):
                self._set(new)
                self._save()
        return results

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        self.maybe_reload()
        return [a for a in self._acls if flt.matches(a)]

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove every binding matching each filter; returns the removed bindings per filter."""
        out: list[list[AclBinding]] = []
        with self._lock:
            self._load()
            remaining = list(self._acls)
            for f in filters:
                hit = [a for a in remaining if f.matches(a)]
                out.append(hit)
                if hit:
                    gone = set(hit)
                    remaining = [a for a in remaining if a not in gone]
                    for a in hit:
                        log.info("ACL deleted: %s", a)
            if len(remaining) != len(self._acls):
                self._set(remaining)
                self._save()
        return out


def _resource_matches(a: AclBinding, name: str) -> bool:
    if a.pattern_type == LITERAL:
        return a.name == name or a.name == "*"
    return a.pattern_type == PREFIXED and name.startswith(a.name)


# ---------------------------------------------------------------------------------------- handler helpers

def allowed(ctx: Any, operation: int, resource_type: int, name: str) -> bool:
    """Whether the request's principal may do ``operation`` on the resource (True without an authorizer)."""
    authz = ctx.services.authorizer
    if authz is None:
        return True
    conn = ctx.connection
    return bool(authz.authorize(conn.principal, conn.peer[0], operation, resource_type, name))


def allowed_topic(ctx: Any, operation: int, topic: str) -> bool:
    return allowed(ctx, operation, TOPIC, topic)


def allowed_cluster(ctx: Any, operation: int) -> bool:
    return allowed(ctx, operation, CLUSTER, CLUSTER_NAME)


def allowed_any(ctx: Any, operation: int, resource_type: int) -> bool:
    authz = ctx.services.authorizer
    if authz is None:
        return True
    conn = ctx.connection
    return bool(authz.authorize_any(conn.principal, conn.peer[0], operation, resource_type))


def allowed_idempotent_write(ctx: Any) -> bool:
    """IdempotentWrite on the cluster, or Write on any topic (as Kafka since 2.8)."""
    return allowed_cluster(ctx, IDEMPOTENT_WRITE) or allowed_any(ctx, WRITE, TOPIC)


def allowed_create_topic(ctx: Any, topic: str) -> bool:
    """CreateTopics / auto-creation: Create on the cluster or on the topic."""
    return allowed_cluster(ctx, CREATE) or allowed_topic(ctx, CREATE, topic)


def authorized_operations(ctx: Any, resource_type: int, name: str) -> int:
    """The bit field of Metadata/DescribeGroups/DescribeCluster ``*_authorized_operations``."""
    bits = 0
    for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
        if allowed(ctx, op, resource_type, name):
            bits |= 1 << op
    return bits


# Kafka's error code for a denied operation, by resource type
AUTHORIZATION_ERRORS = {TOPIC: 29, GROUP: 30, CLUSTER: 31, TRANSACTIONAL_ID: 53, DELEGATION_TOKEN: 65}


def require(ctx: Any, operation: int, resource_type: int, name: str = CLUSTER_NAME) -> None:
    """Raise the resource type's *_AUTHORIZATION_FAILED KafkaError unless allowed. For requests whose
    response has a top-level error_code (the router turns the exception into that response)."""
    if not allowed(ctx, operation, resource_type, name):
        from moldau.protocol.errors import KafkaError

        raise KafkaError.for_code(AUTHORIZATION_ERRORS.get(resource_type, 31))


# DescribeConfigs / AlterConfigs resource types -> ACL resources
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32


def require_config_resource(ctx: Any, operation: int, config_resource_type: int, name: str) -> None:
    """DescribeConfigs (DESCRIBE_CONFIGS) / AlterConfigs (ALTER_CONFIGS) on a config resource: topics by
    name, brokers and broker loggers through the cluster, groups by name."""
    if config_resource_type == _CONFIG_TOPIC:
        require(ctx, operation, TOPIC, name)
    elif config_resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER):
        require(ctx, operation, CLUSTER)
    elif config_resource_type == _CONFIG_GROUP:
        require(ctx, operation, GROUP, name)

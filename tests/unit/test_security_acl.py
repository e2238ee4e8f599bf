"""ACL matching and persistence (moldau.broker.security.authorizer)."""

import os

import pytest

from moldau.broker.security import authorizer as az
from moldau.broker.security.authorizer import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    ANY,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    MATCH,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclAuthorizer,
    AclBinding,
    AclFilter,
)


def acl(rt, name, pt, principal, op, perm=ALLOW, host="*"):
    return AclBinding(rt, name, pt, principal, host, op, perm)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.fixture
def authz(tmp_path):
    return AclAuthorizer(tmp_path, super_users={"User:admin"}, monotonic=Clock())


def test_no_acls_default_deny_and_allow_everyone(tmp_path):
    deny_all = AclAuthorizer(tmp_path / "a")
    assert not deny_all.authorize("User:alice", "1.2.3.4", READ, TOPIC, "t")
    allow_all = AclAuthorizer(tmp_path / "b", allow_everyone_if_no_acl_found=True)
    assert allow_all.authorize("User:alice", "1.2.3.4", READ, TOPIC, "t")
    # ... but once the resource has any ACL, only the ACLs count
    allow_all.create([acl(TOPIC, "t", LITERAL, "User:bob", READ)])
    assert not allow_all.authorize("User:alice", "1.2.3.4", READ, TOPIC, "t")
    assert allow_all.authorize("User:alice", "1.2.3.4", READ, TOPIC, "other")


def test_super_users(authz):
    assert authz.authorize("User:admin", "h", ALTER, CLUSTER, "kafka-cluster")
    authz.create([acl(TOPIC, "*", LITERAL, "User:admin", ALL, DENY)])
    assert authz.authorize("User:admin", "h", WRITE, TOPIC, "x")  # super users are never denied


def test_literal_prefixed_and_wildcard(authz):
    authz.create([
        acl(TOPIC, "orders", LITERAL, "User:alice", READ),
        acl(TOPIC, "logs-", PREFIXED, "User:alice", WRITE),
        acl(GROUP, "*", LITERAL, "User:alice", READ),
        acl(TOPIC, "*", LITERAL, "User:*", DESCRIBE),
    ])
    a = "User:alice"
    assert authz.authorize(a, "h", READ, TOPIC, "orders")
    assert not authz.authorize(a, "h", READ, TOPIC, "orders2")       # literal is exact
    assert authz.authorize(a, "h", WRITE, TOPIC, "logs-app")
    assert not authz.authorize(a, "h", WRITE, TOPIC, "log")           # prefix must match
    assert authz.authorize(a, "h", READ, GROUP, "any-group")
    assert authz.authorize("User:bob", "h", DESCRIBE, TOPIC, "whatever")  # User:* and name *
    assert not authz.authorize("User:bob", "h", READ, TOPIC, "orders")
    assert not authz.authorize(a, "h", READ, TRANSACTIONAL_ID, "orders")  # other resource type


def test_deny_beats_allow_and_operation_implications(authz):
    a = "User:alice"
    authz.create([
        acl(TOPIC, "t", LITERAL, a, ALL),
        acl(TOPIC, "t", LITERAL, a, WRITE, DENY),
        acl(TOPIC, "u", LITERAL, a, READ),
        acl(TOPIC, "v", LITERAL, a, ALTER_CONFIGS),
        acl(TOPIC, "w", LITERAL, a, READ),
        acl(TOPIC, "w", LITERAL, a, READ, DENY),
    ])
    assert authz.authorize(a, "h", READ, TOPIC, "t")      # ALL allows
    assert not authz.authorize(a, "h", WRITE, TOPIC, "t")  # deny beats allow
    assert authz.authorize(a, "h", DESCRIBE, TOPIC, "u")   # READ implies DESCRIBE
    assert not authz.authorize(a, "h", WRITE, TOPIC, "u")
    assert authz.authorize(a, "h", DESCRIBE_CONFIGS, TOPIC, "v")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not authz.authorize(a, "h", ALTER, TOPIC, "v")
    assert not authz.authorize(a, "h", READ, TOPIC, "w")
    assert authz.authorize(a, "h", DESCRIBE, TOPIC, "w")  # a READ deny does not deny DESCRIBE (as Kafka)


def test_hosts(authz):
    authz.create([acl(TOPIC, "t", LITERAL, "User:alice", READ, host="10.0.0.1")])
    assert authz.authorize("User:alice", "10.0.0.1", READ, TOPIC, "t")
    assert not authz.authorize("User:alice", "10.0.0.2", READ, TOPIC, "t")


def test_prefixed_deny_over_wildcard_allow(authz):
    a = "User:alice"
    authz.create([acl(TOPIC, "*", LITERAL, a, ALL), acl(TOPIC, "secret-", PREFIXED, a, ALL, DENY)])
    assert authz.authorize(a, "h", WRITE, TOPIC, "public")
    assert not authz.authorize(a, "h", READ, TOPIC, "secret-plans")


def test_authorize_any_for_idempotent_write(authz):
    a = "User:alice"
    assert not authz.authorize_any(a, "h", WRITE, TOPIC)
    authz.create([acl(TOPIC, "t", LITERAL, a, WRITE)])
    assert authz.authorize_any(a, "h", WRITE, TOPIC)
    assert not authz.authorize_any("User:bob", "h", WRITE, TOPIC)
    authz.create([acl(TOPIC, "*", LITERAL, a, WRITE, DENY)])
    assert not authz.authorize_any(a, "h", WRITE, TOPIC)
    authz.create([acl(CLUSTER, "kafka-cluster", LITERAL, "User:bob", IDEMPOTENT_WRITE)])
    assert authz.authorize("User:bob", "h", IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster")


def test_filters(authz):
    bindings = [
        acl(TOPIC, "orders", LITERAL, "User:alice", READ),
        acl(TOPIC, "ord", PREFIXED, "User:bob", WRITE),
        acl(TOPIC, "*", LITERAL, "User:carol", DESCRIBE),
        acl(GROUP, "g", LITERAL, "User:alice", READ, DENY),
    ]
    authz.create(bindings)
    assert set(authz.describe(AclFilter())) == set(bindings)
    assert authz.describe(AclFilter(resource_type=GROUP)) == [bindings[3]]
    assert authz.describe(AclFilter(resource_type=TOPIC, name="orders", pattern_type=LITERAL)) == [
        bindings[0]
    ]
    assert set(authz.describe(AclFilter(resource_type=TOPIC, name="orders", pattern_type=MATCH))) == \
        set(bindings[:3])
    assert authz.describe(AclFilter(pattern_type=PREFIXED)) == [bindings[1]]
    assert set(authz.describe(AclFilter(principal="User:alice"))) == {bindings[0], bindings[3]}
    assert authz.describe(AclFilter(permission=DENY)) == [bindings[3]]
    assert authz.describe(AclFilter(operation=WRITE, resource_type=ANY)) == [bindings[1]]
    removed = authz.delete([AclFilter(principal="User:alice"), AclFilter(principal="User:alice")])
    assert set(removed[0]) == {bindings[0], bindings[3]} and removed[1] == []
    assert set(authz.describe(AclFilter())) == {bindings[1], bindings[2]}


def test_create_validation_and_idempotence(authz):
    good = acl(TOPIC, "t", LITERAL, "User:alice", READ)
    errors = authz.create([
        good, good,
        acl(TOPIC, "t", MATCH, "User:alice", READ),
        acl(TOPIC, "t", LITERAL, "alice", READ),
        acl(TOPIC, "", LITERAL, "User:alice", READ),
        acl(CLUSTER, "other", LITERAL, "User:alice", CREATE),
        acl(TOPIC, "t", LITERAL, "User:alice", ANY),
        acl(TOPIC, "t", LITERAL, "User:alice", READ, perm=ANY),
        acl(TOPIC, "t", LITERAL, "User:alice", READ, host=""),
        acl(TOPIC, "*", PREFIXED, "User:alice", READ),
    ])
    assert errors[:2] == [None, None]
    assert all(e for e in errors[2:]), errors
    assert authz.acls() == [good]


def test_persistence_and_reload(tmp_path):
    clock = Clock()
    a = AclAuthorizer(tmp_path, monotonic=clock)
    a.create([acl(TOPIC, "t", LITERAL, "User:alice", READ)])
    assert oct(os.stat(a.path).st_mode & 0o777) == "0o600"
    b = AclAuthorizer(tmp_path, monotonic=clock)
    assert b.authorize("User:alice", "h", READ, TOPIC, "t")
    # another process (offline CLI) deletes it; b sees it after its next check (at most once a second)
    AclAuthorizer(tmp_path).delete([AclFilter()])
    os.utime(a.path, ns=(1, 1))
    assert b.authorize("User:alice", "h", READ, TOPIC, "t")  # cached until the next check
    clock.t += 1.5
    assert not b.authorize("User:alice", "h", READ, TOPIC, "t")


def test_damaged_file_refused_at_start(tmp_path):
    (tmp_path / az.ACL_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the ACL file"):
        AclAuthorizer(tmp_path)


def test_delete_by_filter_with_match(authz):
    authz.create([acl(TOPIC, "a-", PREFIXED, "User:x", READ), acl(TOPIC, "a-b", LITERAL, "User:x", READ),
                  acl(TOPIC, "z", LITERAL, "User:x", READ)])
    removed = authz.delete([AclFilter(resource_type=TOPIC, name="a-b", pattern_type=MATCH)])
    assert {b.name for b in removed[0]} == {"a-", "a-b"}
    assert [b.name for b in authz.acls()] == ["z"]
    assert authz.delete([AclFilter(resource_type=GROUP, operation=DELETE)]) == [[]]

"""Kafka requests the console needs and the moldau admin client has no method for yet: DescribeLogDirs,
ListTransactions / DescribeTransactions / DescribeProducers, DescribeAcls / CreateAcls / DeleteAcls,
DescribeUserScramCredentials / AlterUserScramCredentials, DescribeClientQuotas.

They go over the admin client's own connections (its ``Cluster``), so TLS and SASL settings apply as for
every other call. A broker that does not offer an API raises ``UnsupportedVersionError``; callers show the
page section as unavailable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from moldau.client import AsyncAdmin
from moldau.client.errors import UnsupportedVersionError, broker_error
from moldau.protocol import messages as m

_DESCRIBE_ACLS, _CREATE_ACLS, _DELETE_ACLS, _DESCRIBE_LOG_DIRS = 29, 30, 31, 35
_DESCRIBE_QUOTAS, _DESCRIBE_SCRAM, _ALTER_SCRAM = 48, 50, 51
_DESCRIBE_PRODUCERS, _DESCRIBE_TXNS, _LIST_TXNS = 61, 65, 66

# Kafka's AclOperation / AclPermissionType / ResourceType / PatternType codes
ACL_OPERATIONS = {
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
}
ACL_PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
RESOURCE_TYPES = {
    "ANY": 1,
    "TOPIC": 2,
    "GROUP": 3,
    "CLUSTER": 4,
    "TRANSACTIONAL_ID": 5,
    "DELEGATION_TOKEN": 6,
    "USER": 7,
}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}


def name_of(table: dict[str, int], code: int) -> str:
    for k, v in table.items():
        if v == code:
            return k
    return str(code)


async def _nodes(admin: AsyncAdmin) -> list[int]:
    cluster = admin._cluster
    if not cluster.brokers:
        await cluster.refresh()
    return sorted(cluster.brokers)


async def _send(admin: AsyncAdmin, node: int | None, api_key: int, req: Any) -> Any:
    cluster = admin._cluster
    conn = await (cluster.connection(node) if node is not None else cluster.any_connection())
    if not conn.supports(api_key):
        raise UnsupportedVersionError(f"the broker does not offer API {api_key}")
    return await conn.send(api_key, req)


# ---------------------------------------------------------------------------------------------- log dirs
async def partition_sizes(admin: AsyncAdmin, topics: list[str] | None = None) -> dict[tuple[str, int], int]:
    """Bytes on disk per partition (leader or replica: the largest copy), from every broker; every topic, or
    the partitions of ``topics``."""
    R = m.DescribeLogDirsRequest
    wanted = None
    if topics is not None:
        parts = await admin.describe_topics(topics)
        wanted = [
            R.DescribableLogDirTopic(topic=t, partitions=[p.partition for p in d.partitions])
            for t, d in parts.items()
        ]
    out: dict[tuple[str, int], int] = {}
    for node in await _nodes(admin):
        resp = await _send(admin, node, _DESCRIBE_LOG_DIRS, R.new(topics=wanted))
        for res in resp.results:
            if res.error_code:
                continue
            for t in res.topics:
                for p in t.partitions:
                    if p.is_future_key:
                        continue
                    key = (t.name, p.partition_index)
                    out[key] = max(out.get(key, 0), p.partition_size)
    return out


# ---------------------------------------------------------------------------------------------- transactions
@dataclass(slots=True)
class Transaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int
    timeout_ms: int = -1
    start_ms: int = -1
    producer_epoch: int = -1
    partitions: list[tuple[str, int]] | None = None


async def transactions(admin: AsyncAdmin) -> list[Transaction]:
    """Every transactional id each broker coordinates (ListTransactions), described (DescribeTransactions)."""
    out: list[Transaction] = []
    for node in await _nodes(admin):
        resp = await _send(
            admin,
            node,
            _LIST_TXNS,
            m.ListTransactionsRequest.new(
                state_filters=[], producer_id_filters=[], duration_filter=-1, transactional_id_pattern=None
            ),
        )
        if resp.error_code:
            raise broker_error(resp.error_code, f"ListTransactions on node {node}")
        txns = [
            Transaction(s.transactional_id, s.producer_id, s.transaction_state, node)
            for s in resp.transaction_states
        ]
        if not txns:
            continue
        by_id = {t.transactional_id: t for t in txns}
        d = await _send(
            admin, node, _DESCRIBE_TXNS, m.DescribeTransactionsRequest.new(transactional_ids=list(by_id))
        )
        for s in d.transaction_states:
            t = by_id.get(s.transactional_id)
            if t is None or s.error_code:
                continue
            t.state = s.transaction_state
            t.timeout_ms = s.transaction_timeout_ms
            t.start_ms = s.transaction_start_time_ms
            t.producer_epoch = s.producer_epoch
            t.partitions = sorted((tp.topic, p) for tp in s.topics for p in tp.partitions)
        out.extend(txns)
    return sorted(out, key=lambda t: t.transactional_id)


@dataclass(slots=True)
class ProducerState:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int


async def producers(admin: AsyncAdmin, leaders: dict[tuple[str, int], int]) -> list[ProducerState]:
    """Active producers of the given partitions (DescribeProducers to each partition's leader)."""
    by_node: dict[int, dict[str, list[int]]] = {}
    for (topic, part), node in leaders.items():
        if node >= 0:
            by_node.setdefault(node, {}).setdefault(topic, []).append(part)
    R = m.DescribeProducersRequest
    out: list[ProducerState] = []
    for node, topics in sorted(by_node.items()):
        req = R.new(topics=[R.TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()])
        resp = await _send(admin, node, _DESCRIBE_PRODUCERS, req)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    continue
                for s in p.active_producers:
                    out.append(
                        ProducerState(
                            t.name,
                            p.partition_index,
                            s.producer_id,
                            s.producer_epoch,
                            s.last_sequence,
                            s.last_timestamp,
                            s.coordinator_epoch,
                            s.current_txn_start_offset,
                        )
                    )
    return out


def hanging(
    producers_: list[ProducerState], txns: list[Transaction], now_ms: int, default_timeout_ms: int = 900_000
) -> list[ProducerState]:
    """Producers holding an open transaction on a partition (``txn_start_offset`` >= 0) that no coordinator
    reports as ongoing for that partition, or whose transaction has been open longer than its timeout:
    Kafka's definition of a hanging transaction (it blocks read_committed consumers at the LSO)."""
    ongoing: dict[int, Transaction] = {t.producer_id: t for t in txns if t.state == "Ongoing"}
    out = []
    for p in producers_:
        if p.txn_start_offset < 0:
            continue
        t = ongoing.get(p.producer_id)
        if t is None or (t.partitions is not None and (p.topic, p.partition) not in t.partitions):
            out.append(p)
            continue
        timeout = t.timeout_ms if t.timeout_ms > 0 else default_timeout_ms
        if t.start_ms > 0 and now_ms - t.start_ms > timeout:
            out.append(p)
    return out


# ---------------------------------------------------------------------------------------------- ACLs
@dataclass(slots=True, frozen=True)
class Acl:
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


async def describe_acls(admin: AsyncAdmin) -> list[Acl]:
    req = m.DescribeAclsRequest.new(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    resp = await _send(admin, None, _DESCRIBE_ACLS, req)
    if resp.error_code:
        raise broker_error(resp.error_code, resp.error_message or "DescribeAcls")
    out = []
    for r in resp.resources:
        for a in r.acls:
            out.append(
                Acl(
                    name_of(RESOURCE_TYPES, r.resource_type),
                    r.resource_name,
                    name_of(PATTERN_TYPES, r.pattern_type),
                    a.principal,
                    a.host,
                    name_of(ACL_OPERATIONS, a.operation),
                    name_of(ACL_PERMISSIONS, a.permission_type),
                )
            )
    return sorted(out, key=lambda a: (a.resource_type, a.resource_name, a.principal, a.operation))


def _code(table: dict[str, int], value: str, what: str) -> int:
    try:
        return table[value.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown {what} {value!r} (one of {', '.join(table)})") from None


def _codes(acl: Acl) -> tuple[int, int, int, int]:
    """(resource type, pattern type, operation, permission) codes of a binding; ValueError names a bad one."""
    return (
        _code(RESOURCE_TYPES, acl.resource_type, "resource type"),
        _code(PATTERN_TYPES, acl.pattern_type, "pattern type"),
        _code(ACL_OPERATIONS, acl.operation, "operation"),
        _code(ACL_PERMISSIONS, acl.permission, "permission"),
    )


async def create_acl(admin: AsyncAdmin, acl: Acl) -> None:
    R = m.CreateAclsRequest
    rtype, ptype, op, perm = _codes(acl)
    req = R.new(
        creations=[
            R.AclCreation(
                resource_type=rtype,
                resource_name=acl.resource_name,
                resource_pattern_type=ptype,
                principal=acl.principal,
                host=acl.host,
                operation=op,
                permission_type=perm,
            )
        ]
    )
    resp = await _send(admin, None, _CREATE_ACLS, req)
    for r in resp.results:
        if r.error_code:
            raise broker_error(r.error_code, r.error_message or "CreateAcls")


async def delete_acl(admin: AsyncAdmin, acl: Acl) -> int:
    R = m.DeleteAclsRequest
    rtype, ptype, op, perm = _codes(acl)
    req = R.new(
        filters=[
            R.DeleteAclsFilter(
                resource_type_filter=rtype,
                resource_name_filter=acl.resource_name,
                pattern_type_filter=ptype,
                principal_filter=acl.principal,
                host_filter=acl.host,
                operation=op,
                permission_type=perm,
            )
        ]
    )
    resp = await _send(admin, None, _DELETE_ACLS, req)
    n = 0
    for r in resp.filter_results:
        if r.error_code:
            raise broker_error(r.error_code, r.error_message or "DeleteAcls")
        n += len(r.matching_acls)
    return n


# ---------------------------------------------------------------------------------------------- SCRAM users
@dataclass(slots=True)
class ScramUser:
    name: str
    mechanisms: list[tuple[str, int]]


async def scram_users(admin: AsyncAdmin) -> list[ScramUser]:
    from moldau.protocol.sasl_mechanisms import scram_mechanism_name

    resp = await _send(admin, None, _DESCRIBE_SCRAM, m.DescribeUserScramCredentialsRequest.new(users=None))
    if resp.error_code:
        raise broker_error(resp.error_code, resp.error_message or "DescribeUserScramCredentials")
    out = []
    for r in resp.results:
        if r.error_code:
            continue
        out.append(
            ScramUser(
                r.user,
                [
                    (scram_mechanism_name(c.mechanism) or str(c.mechanism), c.iterations)
                    for c in r.credential_infos
                ],
            )
        )
    return sorted(out, key=lambda u: u.name)


async def upsert_scram_user(
    admin: AsyncAdmin, name: str, mechanism: str, password: str, iterations: int = 8192
) -> None:
    from moldau.protocol.sasl_mechanisms import salted_password

    if not name:
        raise ValueError("a user name is needed")
    if not password:
        raise ValueError("a password is needed")
    mech = _scram(mechanism)
    salt = os.urandom(32)
    R = m.AlterUserScramCredentialsRequest
    req = R.new(
        deletions=[],
        upsertions=[
            R.ScramCredentialUpsertion(
                name=name,
                mechanism=mech.code,
                iterations=iterations,
                salt=salt,
                salted_password=salted_password(mech, password, salt, iterations),
            )
        ],
    )
    await _alter_scram(admin, req)


async def delete_scram_user(admin: AsyncAdmin, name: str, mechanism: str) -> None:
    mech = _scram(mechanism)
    R = m.AlterUserScramCredentialsRequest
    await _alter_scram(
        admin, R.new(deletions=[R.ScramCredentialDeletion(name=name, mechanism=mech.code)], upsertions=[])
    )


def _scram(mechanism: str) -> Any:
    from moldau.protocol.sasl_mechanisms import SaslError, scram_mechanism

    try:
        return scram_mechanism(mechanism)
    except SaslError as e:
        raise ValueError(str(e)) from None


async def _alter_scram(admin: AsyncAdmin, req: Any) -> None:
    node = admin._cluster.controller_id
    resp = await _send(admin, node if node in admin._cluster.brokers else None, _ALTER_SCRAM, req)
    for r in resp.results:
        if r.error_code:
            raise broker_error(r.error_code, r.error_message or f"user {r.user!r}")


# ---------------------------------------------------------------------------------------------- quotas
async def client_quotas(admin: AsyncAdmin) -> list[tuple[str, dict[str, float]]]:
    """Every client quota (entity as ``user=alice,client-id=app``, values)."""
    resp = await _send(
        admin, None, _DESCRIBE_QUOTAS, m.DescribeClientQuotasRequest.new(components=[], strict=False)
    )
    if resp.error_code:
        raise broker_error(resp.error_code, resp.error_message or "DescribeClientQuotas")
    out = []
    for e in resp.entries or []:
        entity = ",".join(
            f"{d.entity_type}={d.entity_name if d.entity_name is not None else '<default>'}" for d in e.entity
        )
        out.append((entity, {v.key: v.value for v in e.values}))
    return sorted(out)

"""A broker of a cluster reads its own writes of client quotas and ACLs: AlterClientQuotas (or CreateAcls /
DeleteAcls) then DescribeClientQuotas (DescribeAcls) on the same broker shows the change, also while the
change notifications of the broker's earlier writes are still being processed (each re-reads the entity from
ZooKeeper; one whose read was older than the broker's newer write used to put the old value back until the
next notification).

Quota requests built by kafka-python's protocol classes, ACLs through confluent-kafka's AdminClient, all to
the one broker of a one-broker cluster (the race is between one broker and its own notifications).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

A, D = AlterClientQuotasRequest, DescribeClientQuotasRequest
ROUNDS = 40


class _Conn:
    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.corr = 0

    def call(self, request: Any, response_type: Any) -> Any:
        """Version 1 of the request, header and size prefix by kafka-python."""
        self.corr += 1
        request.with_header(correlation_id=self.corr, client_id="test")
        self.sock.sendall(bytes(request.encode(version=1, header=True, framed=True)))
        size = struct.unpack(">i", self._exact(4))[0]
        resp = response_type.decode(self._exact(size), version=1, header=True)
        assert resp.header.correlation_id == self.corr
        return resp

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf


def _alter(c: _Conn, ip: str, value: float, remove: bool) -> int:
    resp = c.call(A(validate_only=False, entries=[A.EntryData(
        entity=[A.EntryData.EntityData(entity_type="ip", entity_name=ip)],
        ops=[A.EntryData.OpData(key="connection_creation_rate", value=value, remove=remove)])]),
        AlterClientQuotasResponse)
    return int(resp.entries[0].error_code)


def _described(c: _Conn) -> dict[str, float]:
    resp = c.call(D(components=[D.ComponentData(entity_type="ip", match_type=2, match=None)], strict=False),
                  DescribeClientQuotasResponse)
    assert resp.error_code == 0
    return {x.entity[0].entity_name: {v.key: v.value for v in x.values}["connection_creation_rate"]
            for x in resp.entries}


def test_quotas_and_acls_read_back_at_once(cluster_factory: Any) -> None:
    """Client quotas set and removed, then ACLs created and deleted (the resource's znode is created, deleted,
    created again), each read back at once through the broker that made the change."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    c = cluster_factory(1, configs=["authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                                    "super.users=User:ANONYMOUS"])
    conn = _Conn(c.broker(1).address)
    try:
        for i in range(ROUNDS):
            assert _alter(conn, "10.0.0.1", float(i + 1), False) == 0
            assert _described(conn) == {"10.0.0.1": float(i + 1)}, f"round {i}: the set"
            assert _alter(conn, "10.0.0.1", 0.0, True) == 0
            assert _described(conn) == {}, f"round {i}: the removal"
    finally:
        conn.sock.close()

    admin = AdminClient({"bootstrap.servers": c.broker(1).address})
    flt = AclBindingFilter(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    for i in range(ROUNDS // 2):
        binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, f"User:u{i}", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        for f in admin.create_acls([binding]).values():
            f.result(timeout=15)
        assert [b.principal for b in admin.describe_acls(flt).result(timeout=15)] == [f"User:u{i}"], i
        assert len(next(iter(admin.delete_acls([flt]).values())).result(timeout=15)) == 1
        assert admin.describe_acls(flt).result(timeout=15) == [], f"round {i}: the deletion"

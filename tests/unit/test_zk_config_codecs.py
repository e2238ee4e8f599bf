"""The ZooKeeper codecs of cluster-wide configs and ACLs against Kafka's formats (ZkData, Sanitizer,
ScramCredentialUtils, AclAuthorizer's ZkAclStore). Pure: no ZooKeeper."""

from __future__ import annotations

import json

from moldau.broker.cluster import zkacl, zkconfig
from moldau.broker.security import authorizer as az


def test_sanitize_as_kafka_sanitizer() -> None:
    # Kafka's SanitizerTest: "user1@domain.com" -> "user1%40domain.com", "*" -> "%2A", " " -> "%20"
    assert zkconfig.sanitize("user1@domain.com") == "user1%40domain.com"
    assert zkconfig.sanitize("a b*c") == "a%20b%2Ac"
    assert zkconfig.sanitize("CN=x,O=y") == "CN%3Dx%2CO%3Dy"
    assert zkconfig.sanitize("a.b-c_d") == "a.b-c_d"
    assert zkconfig.desanitize(zkconfig.sanitize("ü/x y*")) == "ü/x y*"


def test_entity_paths() -> None:
    assert zkconfig.entity_path("brokers", None) == "brokers/<default>"
    assert zkconfig.entity_path("brokers", "3") == "brokers/3"
    assert zkconfig.quota_entity_path((("user", "a b"),)) == "users/a%20b"
    assert zkconfig.quota_entity_path((("client-id", "c"), ("user", None))) == "users/<default>/clients/c"
    assert zkconfig.quota_entity_path((("client-id", None),)) == "clients/<default>"
    assert zkconfig.quota_entity_path((("ip", "10.0.0.1"),)) == "ips/10.0.0.1"


def test_entity_config_json() -> None:
    data = zkconfig.encode_entity_config({"producer_byte_rate": "1024.0"})
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024.0"}}
    assert zkconfig.decode_entity_config(data) == {"producer_byte_rate": "1024.0"}
    assert zkconfig.decode_entity_config(None) == {}


def test_scram_credential_string() -> None:
    text = zkconfig.scram_to_string(b"\x01\x02", b"\x03", b"\x04", 4096)
    assert text == "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096"
    assert zkconfig.scram_from_string(text) == {"salt": "AQI=", "stored_key": "Aw==", "server_key": "BA==",
                                                "iterations": 4096}


def test_acl_paths_and_json() -> None:
    lit = (az.TOPIC, az.LITERAL, "t")
    pre = (az.TRANSACTIONAL_ID, az.PREFIXED, "tx-")
    assert zkacl.resource_path(lit) == "/kafka-acl/Topic/t"
    assert zkacl.resource_path(pre) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    cluster = (az.CLUSTER, az.LITERAL, "kafka-cluster")
    assert zkacl.resource_path(cluster) == "/kafka-acl/Cluster/kafka-cluster"
    b = az.AclBinding(az.TOPIC, "t", az.LITERAL, "User:alice", "*", az.IDEMPOTENT_WRITE, az.DENY)
    data = zkacl.encode_acls([b])
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Deny", "operation": "IdempotentWrite", "host": "*"}]}
    assert zkacl.decode_acls(lit, data) == {b}
    # Kafka 1.x wrote camel-case literal notifications ("Topic:t"), 2.x+ the enum name ("TOPIC:t")
    assert zkacl.encode_change(lit) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:t")
    assert zkacl.decode_change(zkacl.ACL_CHANGES, b"Topic:t") == lit
    prefix, body = zkacl.encode_change(pre)
    assert prefix == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(body) == {"version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-",
                                "patternType": "PREFIXED"}
    assert zkacl.decode_change(zkacl.EXTENDED_CHANGES, body) == pre


def test_quota_values_as_java_doubles() -> None:
    q = zkconfig._quota_string
    assert [q(1024), q(1048576), q(10485760), q(0.5), q(2.5e-4), q(1e7)] == [
        "1024.0", "1048576.0", "1.048576E7", "0.5", "2.5E-4", "1.0E7"]

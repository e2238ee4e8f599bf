"""Cluster-wide configs, quotas, SCRAM credentials and ACLs in ZooKeeper, and broker.id generation.

One cluster of three brokers, each with a SASL_PLAINTEXT listener beside the plaintext one, the ACL
authorizer on (the plaintext clients and the brokers themselves are ``User:ANONYMOUS``, a super user). Every
change is made through one broker and checked on the others, and the znodes are checked against Kafka's
paths and JSON (``ZkData``, ``AclAuthorizer``, ``ScramCredentialUtils``). Then a fourth broker started
without ``broker.id`` gets 1001 from ``/brokers/seqid`` and keeps it across a kill -9 and restart.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from moldau.broker.cluster.local import LocalBroker, free_port, moldau_command

from harness.clusterutil import QUIET, admin, create_topic, wait_until

ACL_SETTINGS = [
    "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
    "super.users=User:ANONYMOUS",
    "allow.everyone.if.no.acl.found=true",
    "connection.failed.authentication.delay.ms=50",
]
DYNAMIC_BROKER, DYNAMIC_DEFAULT, DYNAMIC_TOPIC = 2, 3, 1


def _zk(c: Any) -> KazooClient:
    kz = KazooClient(hosts=c.zk.connect)
    kz.start(10)
    return kz


def _json(kz: KazooClient, path: str) -> Any:
    return json.loads(kz.get(path)[0].decode())


def _describe(address: str, rtype: Any, name: str) -> dict[str, Any]:
    """{config name: ConfigEntry} as this broker answers (the request goes to ``address`` alone)."""
    a = admin(address)
    res = ConfigResource(rtype, name)
    out = dict(a.describe_configs([res], request_timeout=15)[res].result(20))
    del a
    return out


def _raw_incremental(address: str, name: str, key: str, value: str) -> int:
    """IncrementalAlterConfigs SET on BROKER ``name`` sent to ``address`` itself: the error code."""
    from moldau.client.conn import Connection
    from moldau.protocol import messages as m

    R = m.IncrementalAlterConfigsRequest
    req = R.new(validate_only=False, resources=[R.AlterConfigsResource(
        resource_type=4, resource_name=name,
        configs=[R.AlterableConfig(name=key, config_operation=0, value=value)])])
    host, port = address.split(":")

    async def go() -> Any:
        conn = await Connection.open(host, int(port), client_id="test-zkconfig")
        try:
            return await conn.send(44, req, version=1, timeout_ms=15000)
        finally:
            conn.close()

    return int(asyncio.run(go()).responses[0].error_code)


def _sasl_producer(address: str, user: str, password: str) -> Producer:
    return Producer({"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
                     "logger": QUIET, "message.timeout.ms": 10000, "socket.timeout.ms": 5000,
                     "retries": 0})


def _produce(p: Producer, topic: str, value: bytes) -> str | None:
    """None when acknowledged, else the error's name."""
    out: list[Any] = []
    p.produce(topic, value, on_delivery=lambda err, _msg: out.append(err))
    p.flush(20)
    if not out:
        return "no delivery report"
    return None if out[0] is None else out[0].name()


def _quotas(address: str) -> Any:
    r = subprocess.run(moldau_command() + ["quotas", "describe", "--bootstrap-server", address, "--json"],
                       capture_output=True, text=True, timeout=60, check=True)
    return json.loads(r.stdout)


def test_configs_quotas_scram_acls_are_cluster_wide(cluster_factory: Any) -> None:
    sasl = {i: free_port() for i in (1, 2, 3)}
    c = cluster_factory(3, configs=ACL_SETTINGS, per_broker={
        i: [f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{p}"] for i, p in sasl.items()})
    b1, b2, b3 = (c.broker(i).address for i in (1, 2, 3))
    kz = _zk(c)
    try:
        # ---- dynamic broker configs: the cluster default through broker 1, broker 3's own level through
        # broker 1 too (Kafka's receiving broker validates and writes ZooKeeper)
        create_topic(b1, "sized", partitions=3, rf=3)
        a1 = admin(b1)
        assert _raw_incremental(b1, "", "message.max.bytes", "3000") == 0  # librdkafka refuses the name ""
        assert _raw_incremental(b1, "3", "log.retention.ms", "7200000") == 0
        assert _raw_incremental(b1, "x", "log.retention.ms", "1") == 42  # INVALID_REQUEST
        assert _raw_incremental(b1, "", "no.such.key", "1") == 40  # INVALID_CONFIG, nothing written
        assert _json(kz, "/config/brokers/<default>") == {"version": 1,
                                                          "config": {"message.max.bytes": "3000"}}
        assert _json(kz, "/config/brokers/3") == {"version": 1, "config": {"log.retention.ms": "7200000"}}
        changes = {json.dumps(_json(kz, f"/config/changes/{n}"), sort_keys=True)
                   for n in kz.get_children("/config/changes")}
        assert '{"entity_path": "brokers/<default>", "version": 2}' in changes
        assert '{"entity_path": "brokers/3", "version": 2}' in changes

        def sources(address: str, node: int) -> tuple[Any, ...]:
            e = _describe(address, ResourceType.BROKER, str(node))
            return (e["message.max.bytes"].value, e["message.max.bytes"].source,
                    e["log.retention.ms"].value, e["log.retention.ms"].source)

        wait_until(lambda: sources(b2, 2)[:2] == ("3000", DYNAMIC_DEFAULT), 15, "broker 2 to see the default")
        wait_until(lambda: sources(b3, 3) == ("3000", DYNAMIC_DEFAULT, "7200000", DYNAMIC_BROKER), 15,
                   "broker 3 to see its own level")
        assert sources(b2, 2)[3] != DYNAMIC_BROKER  # broker 3's level is not broker 2's
        # the effect: every leader refuses a batch above the new default (MESSAGE_TOO_LARGE)
        p = Producer({"bootstrap.servers": c.bootstrap, "logger": QUIET, "retries": 0,
                      "message.timeout.ms": 10000, "message.max.bytes": 100000})
        for part in range(3):
            out: list[Any] = []
            p.produce("sized", b"x" * 5000, partition=part, on_delivery=lambda e, _m: out.append(e))
            p.flush(20)
            assert out and out[0] is not None and out[0].name() == "MSG_SIZE_TOO_LARGE", (part, out)
        assert _produce(p, "sized", b"y" * 1000) is None
        # written into ZooKeeper by another tool (kafka-configs --zookeeper): applied by every broker, a value
        # the brokers refuse is left out
        kz.set("/config/brokers/<default>",
               b'{"version":1,"config":{"message.max.bytes":"4000","log.retention.ms":"soon"}}')
        kz.create("/config/changes/config_change_", b'{"version":2,"entity_path":"brokers/<default>"}',
                  sequence=True)
        for node, addr in ((1, b1), (2, b2)):
            wait_until(lambda node=node, addr=addr: sources(addr, node)[:2] == ("4000", DYNAMIC_DEFAULT), 15,
                       f"broker {node} to apply the default written by another tool")
            assert sources(addr, node)[3] != DYNAMIC_DEFAULT

        # ---- a topic config through a non-controller, seen by every broker
        controller = admin(b1).list_topics(timeout=10).controller_id
        other = next(b for b in c.brokers if b.node_id != controller)
        res = ConfigResource(ResourceType.TOPIC, "sized", incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
        a_other = admin(other.address)  # kept alive until the result is in
        a_other.incremental_alter_configs([res], request_timeout=15)[res].result(20)
        for b in c.brokers:
            def seen(b: Any = b) -> bool:
                e = _describe(b.address, ResourceType.TOPIC, "sized")["retention.ms"]
                return (e.value, e.source) == ("86400000", DYNAMIC_TOPIC)

            wait_until(seen, 15, f"broker {b.node_id} to see the topic config")
        assert _json(kz, "/config/topics/sized")["config"]["retention.ms"] == "86400000"

        # ---- SCRAM: a user created through broker 1 authenticates on brokers 2 and 3
        up = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                          b"alice-secret", b"salt-of-alice")
        a1.alter_user_scram_credentials([up], request_timeout=15)["alice"].result(20)
        text = _json(kz, "/config/users/alice")["config"]["SCRAM-SHA-256"]
        fields = dict(f.split("=", 1) for f in text.split(","))
        assert list(fields) == ["salt", "stored_key", "server_key", "iterations"]
        assert fields["iterations"] == "8192"
        a3 = admin(b3)
        desc = a3.describe_user_scram_credentials(request_timeout=15).result(20)
        assert [(i.mechanism, i.iterations) for i in desc["alice"].scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_256, 8192)]
        create_topic(b1, "open", partitions=1, rf=3)
        for node in (2, 3):
            addr = f"127.0.0.1:{sasl[node]}"
            wait_until(lambda addr=addr: _produce(_sasl_producer(addr, "alice", "alice-secret"), "open",
                                                  b"hi") is None, 20, f"alice to log in on broker {node}")
            assert _produce(_sasl_producer(addr, "alice", "wrong"), "open", b"no") is not None

        # ---- ACLs: through broker 1, enforced on broker 2 (denies), then an allow through broker 3
        create_topic(b1, "secret", partitions=1, rf=3)
        bob = AclBinding(ResourceType.TOPIC, "secret", ResourcePatternType.LITERAL, "User:bob", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in a1.create_acls([bob], request_timeout=15).values():
            f.result(20)
        assert _json(kz, "/kafka-acl/Topic/secret") == {"version": 1, "acls": [
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"}]}
        assert b"TOPIC:secret" in {kz.get(f"/kafka-acl-changes/{n}")[0] for n in kz.get_children(
            "/kafka-acl-changes")}
        alice2 = f"127.0.0.1:{sasl[2]}"
        wait_until(lambda: _produce(_sasl_producer(alice2, "alice", "alice-secret"), "secret", b"x")
                   == "TOPIC_AUTHORIZATION_FAILED", 15, "broker 2 to deny alice")
        prefixed = AclBinding(ResourceType.TOPIC, "sec", ResourcePatternType.PREFIXED, "User:alice", "*",
                              AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in a3.create_acls([prefixed], request_timeout=15).values():
            f.result(20)
        assert _json(kz, "/kafka-acl-extended/prefixed/Topic/sec")["acls"][0]["principal"] == "User:alice"
        notes = [_json(kz, f"/kafka-acl-extended-changes/{n}") for n in kz.get_children(
            "/kafka-acl-extended-changes")]
        assert {"version": 1, "resourceType": "TOPIC", "name": "sec", "patternType": "PREFIXED"} in notes
        wait_until(lambda: _produce(_sasl_producer(alice2, "alice", "alice-secret"), "secret", b"x") is None,
                   15, "broker 2 to allow alice")
        a2 = admin(b2)
        described = a2.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY), request_timeout=15).result(20)
        assert {(b.name, b.principal) for b in described} == {("secret", "User:bob"), ("sec", "User:alice")}
        gone = a1.delete_acls([AclBindingFilter(ResourceType.TOPIC, "sec", ResourcePatternType.PREFIXED, None,
                                                None, AclOperation.ANY, AclPermissionType.ANY)],
                              request_timeout=15)
        assert [len(f.result(20)) for f in gone.values()] == [1]
        assert kz.exists("/kafka-acl-extended/prefixed/Topic/sec") is None
        wait_until(lambda: _produce(_sasl_producer(alice2, "alice", "alice-secret"), "secret", b"x")
                   == "TOPIC_AUTHORIZATION_FAILED", 15, "broker 2 to deny alice again")

        # ---- quotas: set through broker 2, described by broker 1, throttling on broker 1
        r = subprocess.run(moldau_command() + ["quotas", "alter", "--bootstrap-server", b2, "--client-id",
                                               "slow", "--set", "producer_byte_rate=20000"],
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        assert _json(kz, "/config/clients/slow") == {"version": 1,
                                                     "config": {"producer_byte_rate": "20000.0"}}
        want = [{"entity": {"client-id": "slow"}, "quotas": {"producer_byte_rate": 20000.0}}]
        wait_until(lambda: _quotas(b1) == want, 15, "broker 1 to describe the quota")
        assert _quotas(b3) == want
        from moldau.client import Admin, NewTopic

        with Admin(bootstrap_servers=b1) as ma:  # on broker 1 only: broker 1 throttles
            ma.create_topics([NewTopic("quota1", replica_assignment={0: [1]})])
        throttle: list[int] = []

        def stats(text: str) -> None:
            for b in json.loads(text).get("brokers", {}).values():
                throttle.append(int(b.get("throttle", {}).get("max", 0)))

        slow = Producer({"bootstrap.servers": c.bootstrap, "client.id": "slow", "logger": QUIET,
                         "linger.ms": 5, "statistics.interval.ms": 200, "stats_cb": stats})
        for _ in range(30):
            slow.produce("quota1", b"q" * 2000)
        slow.flush(30)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3 and not any(throttle):
            slow.poll(0.2)
        assert max(throttle, default=0) > 0  # 60 kB at 20 kB/s: throttled by broker 1, the leader
    finally:
        kz.stop()
        kz.close()

    # ---- broker.id generation: a fourth broker without broker.id gets 1001 and keeps it
    extra = LocalBroker(4, c.folder, free_port(), c.zk.connect,
                        [kv for kv in c.brokers[0].extra if not kv.startswith("listeners=")])
    extra.assign_id = False
    extra.start()
    c.brokers.append(extra)  # stopped with the cluster
    kz = _zk(c)
    try:
        wait_until(lambda: "1001" in kz.get_children("/brokers/ids"), 30, "broker 1001 to register")
        assert kz.exists("/brokers/seqid").version == 1
        with open(os.path.join(extra.data_dir, "meta.properties"), encoding="utf-8") as f:
            assert "node.id=1001" in f.read()
        owner = kz.exists("/brokers/ids/1001").ephemeralOwner
        extra.kill()
        extra.start()
        wait_until(lambda: (kz.exists("/brokers/ids/1001") or owner).ephemeralOwner != owner, 40,
                   "broker 1001 to register again")
        assert sorted(kz.get_children("/brokers/ids")) == ["1", "1001", "2", "3"]
        assert kz.exists("/brokers/seqid").version == 1  # the id came from meta.properties
        # a configured id in the generated range is refused, as Kafka (one line naming it)
        r = subprocess.run([*moldau_command(), "broker", "--port", "0", "--data-dir",
                            os.path.join(c.folder, "x"), "--set", "broker.id=1500",
                            "--set", f"zookeeper.connect={c.zk.connect}"],
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == (
            "moldau broker: error: broker.id 1500 is above reserved.broker.max.id 1000, "
            "the range of generated ids")
    finally:
        kz.stop()
        kz.close()


"""ZooKeeper registration of the 0.7 listener (``kafka07.zookeeper.connect``): brokers and topics in 0.7's
layout under a chroot, followed by ZooKeeper-based franz-kafka (broker discovery, group rebalancing). The
ZooKeeper server is Debian's (``zookeeper`` package, installed by ``scripts/setup.sh --test``)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from moldau.protocol import kafka07 as k07

from .conftest import Broker07, franz, message_payloads, wait_for, walk_all
from harness.brokerproc import free_port

ZK_JARS = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    java = shutil.which("java")
    assert java and Path("/usr/share/java/zookeeper.jar").exists(), \
        "Java and Debian's zookeeper package are missing: scripts/setup.sh --test installs them"
    port = free_port()
    data = tmp_path_factory.mktemp("zookeeper")
    log = open(data / "server.log", "wb")  # noqa: SIM115 - closed below
    main = "org.apache.zookeeper.server.ZooKeeperServerMain"
    proc = subprocess.Popen([java, "-Xmx128m", "-cp", ZK_JARS, main, str(port), str(data / "data")],
                            stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            c = KazooClient(address)
            try:
                c.start(timeout=1)
                c.stop()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if proc.poll() is not None or time.monotonic() > deadline:
                    output = (data / "server.log").read_text()[-2000:]
                    raise AssertionError(f"ZooKeeper did not start: {output}") from None
            finally:
                c.close()
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def zk(zookeeper: str) -> Iterator[KazooClient]:
    c = KazooClient(zookeeper)
    c.start(timeout=10)
    try:
        yield c
    finally:
        c.stop()
        c.close()


def _value(zk: KazooClient, path: str) -> str | None:
    try:
        return zk.get(path)[0].decode()
    except NoNodeError:
        return None


def test_brokers_and_topics_in_the_07_layout_under_a_chroot(broker07_factory, zookeeper: str,
                                                          zk: KazooClient, topic07: str) -> None:
    b: Broker07 = broker07_factory({"kafka07.zookeeper.connect": zookeeper})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic07, 3, 1)])[topic07].result(15)
    reg = _value(zk, "/kafka07/brokers/ids/1")
    assert reg is not None
    creator, host, port = reg.rsplit(":", 2)  # "creator:host:port"; 0.7 clients split on ':'
    assert creator and host == "127.0.0.1" and int(port) == b.legacy_port
    assert wait_for(lambda: _value(zk, f"/kafka07/brokers/topics/{topic07}/1") == "3", what="topic node")
    admin.create_partitions([NewPartitions(topic07, 5)])[topic07].result(15)
    assert wait_for(lambda: _value(zk, f"/kafka07/brokers/topics/{topic07}/1") == "5", what="5 partitions")
    assert "__consumer_offsets" not in zk.get_children("/kafka07/brokers/topics")  # internal topics are not
    admin.delete_topics([topic07])[topic07].result(15)
    del admin  # no client outlives the broker
    assert wait_for(lambda: _value(zk, f"/kafka07/brokers/topics/{topic07}/1") is None, what="node removed")
    assert not zk.exists("/brokers/ids/1")  # nothing outside the chroot
    b.stop()
    # the registration is ephemeral: it goes with the broker's session
    assert wait_for(lambda: not zk.exists("/kafka07/brokers/ids/1"), what="ephemeral node gone")


def test_franz_kafka_finds_the_broker_through_zookeeper(broker07_factory, zookeeper: str, zk: KazooClient,
                                                       topic07: str) -> None:
    """A 0.7 layout at the root of a ZooKeeper of its own: franz-kafka's own ZooKeeper client discovers the
    broker and the topic's partitions, produces, joins a consumer group (registered under /consumers by
    the client) and consumes."""
    b: Broker07 = broker07_factory({"kafka07.zookeeper.connect": zookeeper, "kafka07.zookeeper.chroot": "/"})
    with b.client07() as c:
        c.produce(topic07, 0, k07.encode_message(b"before-1") + k07.encode_message(b"before-2"))
        walk_all(c, topic07, 0, 2)
    assert wait_for(lambda: _value(zk, f"/brokers/topics/{topic07}/1") == "1", what="topic registered")
    payloads = [b"via-zookeeper-%d" % i for i in range(5)]
    lines = franz("zkroundtrip", *zookeeper.split(":"), topic07, f"g-{topic07}", str(2 + len(payloads)),
                  stdin=json.dumps([base64.b64encode(p).decode() for p in payloads]))
    got = [base64.b64decode(x["data"]) for x in lines if "data" in x]
    assert got == [b"before-1", b"before-2", *payloads]
    assert zk.exists(f"/consumers/g-{topic07}/owners/{topic07}")  # the client's group state, left to it
    with b.client07() as c:
        assert message_payloads(walk_all(c, topic07, 0, 7)) == got

"""EmbeddedBroker's options and lifecycle, and ``log.dirs=:memory:`` in ``moldau broker``."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.broker.cluster.local import zookeeper_installed
from moldau.broker.memory import ram_parent
from moldau.testing import BrokerStartError, EmbeddedBroker, expect_records


@pytest.fixture(autouse=True)
def private_ram_parent(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """In-memory log dirs of this module's brokers go under a private directory (on the RAM file system
    when there is one), so that counting them is not disturbed by other brokers of this machine."""
    parent = tempfile.mkdtemp(prefix="test-ram-", dir=ram_parent())
    monkeypatch.setenv("MOLDAU_MEMORY_DIR", parent)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def _ram_dirs() -> set[str]:
    return {n for n in os.listdir(ram_parent()) if n.startswith("moldau-memory-")}


def test_ram_parent_is_the_ram_file_system(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOLDAU_MEMORY_DIR")
    st = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
    if st is None or st.f_bavail * st.f_frsize < 256 << 20:
        assert ram_parent() == tempfile.gettempdir()
    else:
        assert ram_parent() == "/dev/shm"


def test_memory_dir_is_removed_at_stop() -> None:
    before = _ram_dirs()
    with EmbeddedBroker() as broker:
        data = broker.data_dir
        assert data is not None and os.path.basename(data) in _ram_dirs() - before
        broker.create_topic("t", 2)
        with __import__("moldau").Producer(bootstrap_servers=broker.bootstrap_servers) as p:
            p.send("t", b"x", partition=1).result(10)
        assert os.path.getsize(os.path.join(data, "t-1", "00000000000000000000.log")) > 0
    assert not os.path.exists(data)
    assert _ram_dirs() == before
    assert not broker.running
    with pytest.raises(RuntimeError, match="not running"):
        _ = broker.bootstrap_servers


def test_disk_data_dir_is_kept(tmp_path: Path) -> None:
    with EmbeddedBroker(memory=False, data_dir=tmp_path / "data") as broker:
        broker.create_topic("kept")
        broker.admin().list_topics()
    assert (tmp_path / "data" / "kept-0").is_dir()
    # and a second broker on it finds the topic (disk mode is durable)
    with EmbeddedBroker(memory=False, data_dir=tmp_path / "data") as broker:
        assert "kept" in broker.admin().list_topics()


def test_restart_of_the_same_object() -> None:
    broker = EmbeddedBroker(partitions=3)
    for _ in range(2):
        broker.start()
        try:
            assert broker.start_seconds is not None and broker.start_seconds < 30
            topic = broker.create_topic("again")
            assert len(broker.admin().describe_topics([topic])[topic].partitions) == 3
        finally:
            broker.stop()


def test_async_context_manager() -> None:
    async def main() -> list[bytes]:
        from moldau.aio import Producer

        async with EmbeddedBroker() as broker:
            async with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
                await p.send_and_wait("auto-created", b"from asyncio")
            records = await asyncio.to_thread(broker.expect_records, "auto-created", 1)
        return [r.value for r in records]

    assert asyncio.run(main()) == [b"from asyncio"]


def test_sasl_and_tls_listeners() -> None:
    from confluent_kafka import Producer

    with EmbeddedBroker(users={"alice": "alice-secret"}, tls=True) as broker:
        assert broker.ca_location is not None and os.path.isfile(broker.ca_location)
        topic = broker.create_topic("secure")
        for proto in ("SSL", "SASL_SSL"):
            p = Producer(broker.client_config(proto))
            p.produce(topic, value=proto.encode())
            assert p.flush(30) == 0, proto
        wrong = {**broker.client_config("SASL_SSL"), "sasl.password": "wrong"}
        errors: list[str] = []
        p = Producer({**wrong, "error_cb": lambda e: errors.append(str(e))})
        p.produce(topic, value=b"refused")
        assert p.flush(5) == 1  # not delivered
        assert any("Authentication failed" in e or "SASL" in e for e in errors), errors
        del p
        got = broker.expect_records(topic, 2, timeout=20)
        assert sorted(r.value for r in got) == [b"SASL_SSL", b"SSL"]


def test_tls_broker_restarts_with_new_certificates() -> None:
    from confluent_kafka.admin import AdminClient

    broker = EmbeddedBroker(tls=True)
    for _ in range(2):
        with broker:
            md = AdminClient(broker.client_config("SSL")).list_topics(timeout=20)
            assert len(md.brokers) == 1


def test_sasl_plaintext_with_moldau_client() -> None:
    with EmbeddedBroker(users={"bob": "bob-secret"}) as broker:
        cfg = broker.client_config("SASL_PLAINTEXT")
        assert cfg["security.protocol"] == "SASL_PLAINTEXT"
        topic = broker.create_topic("sasl")
        from moldau import Producer

        with Producer(cfg) as p:
            p.send(topic, b"authenticated").result(10)
        got = expect_records(cfg["bootstrap.servers"], topic, 1, 20,
                             **{k.replace(".", "_"): v for k, v in cfg.items() if k != "bootstrap.servers"})
        assert got[0].value == b"authenticated"


def test_failed_start_is_clear_and_leaves_nothing() -> None:
    before = _ram_dirs()
    broker = EmbeddedBroker(config={"num.network.threads": "not-a-number"})
    with pytest.raises(Exception, match="num.network.threads"):
        broker.start()
    assert not broker.running and _ram_dirs() == before
    proc = EmbeddedBroker(process=True, config={"log.segment.bytes": "-5"})
    with pytest.raises(BrokerStartError, match="log.segment.bytes"):
        proc.start()
    assert _ram_dirs() == before


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="data_dir is for memory=False"):
        EmbeddedBroker(data_dir="x")
    with pytest.raises(ValueError, match="brokers"):
        EmbeddedBroker(brokers=0)


@pytest.mark.skipif(not zookeeper_installed(), reason="needs ZooKeeper (Debian's zookeeper) and Java")
def test_cluster_of_three() -> None:
    with EmbeddedBroker(brokers=3) as cluster:
        assert cluster.mode == "cluster/memory"
        assert len(cluster.bootstrap_servers.split(",")) == 3
        topic = cluster.create_topic("replicated", 3)
        desc = cluster.admin().describe_topics([topic])[topic]
        assert all(len(p.replicas) == 3 for p in desc.partitions)
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(9):
            p.produce(topic, key=b"%d" % i, value=b"v%d" % i)
        assert p.flush(30) == 0
        del p
        assert len(cluster.expect_records(topic, 9, timeout=30)) == 9
        folder = cluster.data_dir
    assert folder is not None and not os.path.exists(folder)


# ------------------------------------------------------------------------------ moldau broker --data-dir
def _moldau_broker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "moldau", "broker", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_cli_memory_mode_removes_its_directory() -> None:
    before = _ram_dirs()
    proc = _moldau_broker("--data-dir", ":memory:")
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while "moldau broker ready" not in line:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "broker exited"
            assert time.monotonic() < deadline
        created = _ram_dirs() - before
        assert len(created) == 1 and next(iter(created)) in line  # the ready line names the data dir
        # `moldau broker` installs its SIGTERM handler just after logging that it is ready
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert _ram_dirs() == before


def test_orphans_of_killed_brokers_are_removed(private_ram_parent: str) -> None:
    from moldau.broker.memory import remove_orphans

    proc = _moldau_broker("--data-dir", ":memory:")
    assert proc.stdout is not None
    while "moldau broker ready" not in (line := proc.stdout.readline()):
        assert line, "broker exited"
    (orphan,) = _ram_dirs()
    path = os.path.join(private_ram_parent, orphan)
    # a running broker's directory is never taken, however old
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    assert remove_orphans(private_ram_parent, "moldau-memory-") == []
    proc.kill()
    proc.communicate(timeout=30)
    assert os.path.isdir(path)  # kill -9: nothing could clean up
    with EmbeddedBroker() as broker:  # the next in-memory broker removes it
        assert not os.path.exists(path)
        assert _ram_dirs() == {os.path.basename(broker.data_dir or "")}


def test_cli_memory_cannot_be_mixed(tmp_path: Path) -> None:
    proc = _moldau_broker("--set", f"log.dirs=:memory:,{tmp_path}")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "log.dirs=:memory: cannot be combined with other directories" in out

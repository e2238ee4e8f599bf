"""ZooKeeper unreachable for a while: the broker's ZooKeeper calls wait and are retried (Kafka's
KafkaZkClient.retryRequestsUntilConnected), a broker starting while ZooKeeper is stopped comes up once it is
back, and a broker whose *first* connection cannot be made within zookeeper.connection.timeout.ms exits with
one line, as Kafka's start-up does.

ZooKeeper is stopped with SIGSTOP: its port still accepts connections, nothing answers.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.broker.cluster import zkdata as zd
from moldau.broker.cluster.local import LocalBroker, LocalZooKeeper, free_port

from harness.cluster import require_zookeeper


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    """One ZooKeeper for the module; each test leaves it running (SIGCONT) and its brokers stopped."""
    require_zookeeper()
    zk = LocalZooKeeper(str(tmp_path_factory.mktemp("zk")))
    zk.start()
    try:
        yield zk
    finally:
        if zk.proc is not None and zk.proc.poll() is None:
            zk.proc.send_signal(signal.SIGCONT)
        zk.stop()


def _zk_signal(zk: LocalZooKeeper, sig: int) -> None:
    assert zk.proc is not None
    zk.proc.send_signal(sig)


def test_calls_whose_answers_are_lost_are_retried(zookeeper: LocalZooKeeper) -> None:
    """Calls in flight when the connection breaks (ZooKeeper stopped with the requests in its socket buffer,
    then the client's connection reset: kazoo's ConnectionLoss; ZooKeeper may still apply them when it
    resumes): they wait until the session is connected again and are sent again, in the same session. The
    create that then finds its own ephemeral and the conditional set that finds its own data one version on
    are successes; the set is applied once."""
    from moldau.broker.cluster.zk import ZkClient

    async def main() -> None:
        zk = ZkClient(zookeeper.connect, session_timeout_ms=10000, connection_timeout_ms=10000)
        await zk.start()
        try:
            await zk.create("/lost/base", b"0")
            session = zk.session_id
            _zk_signal(zookeeper, signal.SIGSTOP)
            calls = asyncio.gather(
                zk.create("/lost/eph", b"mine", ephemeral=True),
                zk.set("/lost/base", b"1", 0),
                zk.get("/lost/base"),
            )
            await asyncio.sleep(0.5)  # sent, unanswered
            zk.sync._connection._socket.shutdown(socket.SHUT_RDWR)  # a connection reset
            await asyncio.sleep(1.0)
            assert not calls.done()
            _zk_signal(zookeeper, signal.SIGCONT)
            path, stat, got = await asyncio.wait_for(calls, 30)
            assert zk.session_id == session
            assert path == "/lost/eph"
            assert stat.version == 1
            assert got is not None and got[0] == b"1"
            assert zk.retries >= 1  # the create (calls go one at a time: the others waited behind it)
            eph = await zk.get("/lost/eph")
            assert eph is not None and eph[0] == b"mine"
            assert eph[1].ephemeralOwner == session
            base = await zk.get("/lost/base")
            assert base is not None and base[1].version == 1  # written once
        finally:
            _zk_signal(zookeeper, signal.SIGCONT)
            await zk.close()

    asyncio.run(main())


def test_broker_started_while_zookeeper_is_stopped_registers_when_it_is_back(
    zookeeper: LocalZooKeeper, tmp_path: Path
) -> None:
    from kazoo.client import KazooClient

    broker = LocalBroker(1, str(tmp_path), free_port(), zookeeper.connect,
                         ["zookeeper.session.timeout.ms=4000", "zookeeper.connection.timeout.ms=30000"])
    _zk_signal(zookeeper, signal.SIGSTOP)
    broker.start()
    try:
        time.sleep(4.0)
        assert broker.running, "the broker gave up before zookeeper.connection.timeout.ms"
        _zk_signal(zookeeper, signal.SIGCONT)
        broker.wait_listening(60)
        kz = KazooClient(hosts=zookeeper.connect)
        kz.start(10)
        try:
            deadline = time.monotonic() + 30
            while kz.exists(zd.broker_path(1)) is None:
                assert time.monotonic() < deadline, "broker 1 did not register"
                assert broker.running
                time.sleep(0.2)
        finally:
            kz.stop()
            kz.close()
    finally:
        _zk_signal(zookeeper, signal.SIGCONT)
        broker.stop()


def test_first_connection_bounded_by_connection_timeout(zookeeper: LocalZooKeeper, tmp_path: Path) -> None:
    broker = LocalBroker(1, str(tmp_path), free_port(), zookeeper.connect,
                         ["zookeeper.session.timeout.ms=4000", "zookeeper.connection.timeout.ms=2000"])
    _zk_signal(zookeeper, signal.SIGSTOP)
    t0 = time.monotonic()
    broker.start()
    try:
        assert broker.proc is not None
        code = broker.proc.wait(60)
        took = time.monotonic() - t0
        assert code != 0
        assert took >= 2.0
        out = Path(broker.log_path).read_text()
        assert "cannot connect to ZooKeeper" in out
        assert "Traceback" not in out
    finally:
        _zk_signal(zookeeper, signal.SIGCONT)
        broker.stop()


def test_restarted_broker_cut_off_while_waiting_for_its_old_registration(
    zookeeper: LocalZooKeeper, tmp_path: Path
) -> None:
    """The fault run's case: a broker restarted after kill -9 waits for its old session's ephemeral
    registration to expire; ZooKeeper stops answering meanwhile (ConnectionLoss, then a session expiry).
    The broker keeps waiting and registers once ZooKeeper is back, instead of exiting."""
    from kazoo.client import KazooClient

    port = free_port()
    first = LocalBroker(1, str(tmp_path), port, zookeeper.connect, ["zookeeper.session.timeout.ms=9000"])
    first.start()
    kz = KazooClient(hosts=zookeeper.connect)
    kz.start(10)
    try:
        first.wait_listening(60)
        deadline = time.monotonic() + 30
        while kz.exists(zd.broker_path(1)) is None:
            assert time.monotonic() < deadline, "broker 1 did not register"
            time.sleep(0.1)
        old_owner = kz.exists(zd.broker_path(1)).ephemeralOwner
        first.kill()  # its registration stays until its 9 s session expires
        second = LocalBroker(1, str(tmp_path), port, zookeeper.connect, ["zookeeper.session.timeout.ms=4000"])
        second.start()
        try:
            time.sleep(3.0)  # connected, waiting for the old registration to go
            _zk_signal(zookeeper, signal.SIGSTOP)
            time.sleep(5.0)
            assert second.running, "the restarted broker exited while ZooKeeper was unreachable"
            _zk_signal(zookeeper, signal.SIGCONT)
            deadline = time.monotonic() + 60
            while True:
                stat = kz.exists(zd.broker_path(1))
                if stat is not None and stat.ephemeralOwner != old_owner:
                    break
                assert second.running, "the restarted broker exited"
                assert time.monotonic() < deadline, "the restarted broker did not register"
                time.sleep(0.2)
            second.wait_listening(30)
            assert second.running
            out = Path(second.log_path).read_text()
            assert "retrying when connected" in out  # the ConnectionLoss was met, and waited out
        finally:
            _zk_signal(zookeeper, signal.SIGCONT)
            second.stop()
    finally:
        kz.stop()
        kz.close()
        first.stop()

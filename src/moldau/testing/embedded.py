"""``EmbeddedBroker``: a real moldau broker for tests and notebooks, started from Python.

Three shapes, one interface (``bootstrap_servers``, ``create_topic``, ``delete_topic``, ``client_config``,
``expect_records``, ``stop``):

* in a background thread of the current process (default), with its own asyncio event loop: the quickest to
  start, and the broker's objects are reachable (``broker``) for white-box checks;
* in a child process (``process=True``): ``moldau broker`` run with this interpreter, for tests that must not
  share the GIL or the process with the broker (signals, forks, heavy load);
* a cluster of ``brokers`` (> 1) brokers and a ZooKeeper (``moldau.broker.cluster.local``), each a process;
  needs Java and Debian's ``zookeeper`` package, else ``ZooKeeperUnavailable`` is raised.

Logs live in RAM by default (``memory=True``: ``log.dirs=:memory:``, see ``moldau.broker.memory``), removed at
stop, not durable; ``memory=False`` uses a temporary directory (removed at stop) or ``data_dir`` (kept).
Every listener binds an ephemeral loopback port.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from moldau._ports import free_port

__all__ = ["EmbeddedBroker", "BrokerStartError"]

log = logging.getLogger(__name__)

#: settings every embedded broker gets unless overridden: a new group's first JoinGroup is answered at
#: once, not after Kafka's 3 s group.initial.rebalance.delay.ms (tests start one consumer and wait for it)
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
_READY = re.compile(r"moldau broker ready on (\S+):(\d+) ")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class BrokerStartError(RuntimeError):
    """The broker did not start (its output, when it is a process, is in the message)."""


class EmbeddedBroker:
    """A moldau broker on loopback; ``with EmbeddedBroker() as b:`` or ``async with EmbeddedBroker() as b:``.

    ``partitions``: ``num.partitions`` (new topics' default); ``config``: more broker settings (Kafka's keys,
    values as strings or Python values); ``users``: ``{name: password}`` SASL users (PLAIN and
    SCRAM-SHA-256/512), adds a ``SASL_PLAINTEXT`` (or with ``tls``, ``SASL_SSL``) listener; ``tls``: a
    local CA and broker certificate (``moldau tls init``) and an ``SSL`` listener; ``brokers``: a ZooKeeper
    cluster of that many brokers (processes; topics get replication factor ``min(brokers, 3)``).
    """

    def __init__(
        self,
        *,
        memory: bool = True,
        process: bool = False,
        partitions: int = 1,
        config: Mapping[str, Any] | None = None,
        users: Mapping[str, str] | None = None,
        tls: bool = False,
        brokers: int = 1,
        data_dir: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        start_timeout: float = 60.0,
    ) -> None:
        if brokers < 1:
            raise ValueError("brokers must be at least 1")
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        if data_dir is not None and memory:
            raise ValueError("data_dir is for memory=False")
        self.memory = memory
        self.process = process or brokers > 1
        self.partitions = partitions
        self.users = dict(users or {})
        self.tls = tls
        self.brokers = brokers
        self.host = host
        self.start_timeout = start_timeout
        self.config: dict[str, str] = {**TEST_DEFAULTS, "num.partitions": str(partitions)}
        if brokers > 1:
            rf = str(min(brokers, 3))
            self.config.update({"default.replication.factor": rf, "offsets.topic.replication.factor": rf,
                                "transaction.state.log.replication.factor": rf,
                                "transaction.state.log.min.isr": str(min(brokers, 2))})
        for k, v in (config or {}).items():
            self.config[k] = _to_str(v)
        self._data_dir = os.fspath(data_dir) if data_dir is not None else None
        self._settings: dict[str, str] = {}
        self._work: str | None = None  # our temporary folder (data, certificates, process output)
        self._memory_dir: Any = None
        self._tls_files: Any = None
        self._listeners: dict[str, str] = {}  # security protocol -> host:port
        #: wall time of the last start(): the broker itself (a process: its interpreter too), and before it
        #: the import of moldau's broker modules into this process (thread mode; only the first start pays)
        self.start_seconds: float | None = None
        self.import_seconds = 0.0
        # thread mode
        self.broker: Any = None  # moldau.broker.Broker (thread mode only)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # process mode
        self._proc: subprocess.Popen[bytes] | None = None
        self._cluster: Any = None
        self._admin: Any = None
        self._lock = threading.Lock()

    # ---------------------------------------------------------------------------------------------- facts
    @property
    def mode(self) -> str:
        """``thread`` / ``process`` / ``cluster``, then ``memory`` or ``disk``: e.g. ``thread/memory``."""
        shape = "cluster" if self.brokers > 1 else "process" if self.process else "thread"
        return f"{shape}/{'memory' if self.memory else 'disk'}"

    @property
    def running(self) -> bool:
        return bool(self._listeners)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the PLAINTEXT listener (every broker's, comma-separated, for a cluster)."""
        return self.listener("PLAINTEXT")

    def listener(self, security_protocol: str) -> str:
        """The bootstrap address of the listener speaking ``security_protocol``."""
        if not self._listeners:
            raise RuntimeError("the broker is not running (use start() or `with`)")
        try:
            return self._listeners[security_protocol.upper()]
        except KeyError:
            raise KeyError(f"no {security_protocol} listener (have {', '.join(self._listeners)})") from None

    @property
    def data_dir(self) -> str | None:
        """Where the logs are (the RAM directory in memory mode); None before start."""
        return self._resolved_data_dir

    @property
    def ca_location(self) -> str | None:
        """With ``tls``: the CA certificate clients verify the broker with."""
        return self._tls_files.ca_cert if self._tls_files is not None else None

    def client_config(self, security_protocol: str = "PLAINTEXT", user: str | None = None) -> dict[str, str]:
        """librdkafka-style settings (also taken by moldau's client) to reach the listener of
        ``security_protocol``; SASL ones authenticate as ``user`` (default: the first user) with
        SCRAM-SHA-256."""
        proto = security_protocol.upper()
        out = {"bootstrap.servers": self.listener(proto), "security.protocol": proto}
        if proto.startswith("SASL_"):
            name = user if user is not None else next(iter(self.users))
            out.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": name,
                        "sasl.password": self.users[name]})
        if proto.endswith("SSL") and self.ca_location:
            out["ssl.ca.location"] = self.ca_location
        return out

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self.running else "stopped"
        return f"EmbeddedBroker({self.mode}, {where})"

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> EmbeddedBroker:
        with self._lock:
            if self.running:
                return self
            t0 = time.perf_counter()
            if not self.process:
                _import_broker()
            t1 = time.perf_counter()
            self.import_seconds = t1 - t0
            try:
                self._prepare()
                if self.brokers > 1:
                    self._start_cluster()
                elif self.process:
                    self._start_process()
                else:
                    self._start_thread()
            except BaseException:
                self._teardown()
                raise
            self.start_seconds = time.perf_counter() - t1
            log.info("embedded broker (%s) ready on %s in %.3f s (imports %.3f s)", self.mode,
                     self.bootstrap_servers, self.start_seconds, self.import_seconds)
            return self

    def stop(self) -> None:
        with self._lock:
            self._teardown()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedBroker:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def __del__(self) -> None:  # a broker left running by a notebook cell that was re-run
        if getattr(self, "_listeners", None):
            try:
                self.stop()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass

    # --------------------------------------------------------------------------------------- preparation
    _resolved_data_dir: str | None = None

    def _prepare(self) -> None:
        self._settings = dict(self.config)  # this start's settings: its own certificate paths
        self._work = tempfile.mkdtemp(prefix="moldau-embedded-")
        if self.brokers > 1:
            data = None  # the cluster's folder holds every broker's data dir
        elif self.memory:
            from moldau.broker.memory import MemoryLogDir

            self._memory_dir = MemoryLogDir()
            data = self._memory_dir.create()
        else:
            data = self._data_dir or os.path.join(self._work, "data")
            os.makedirs(data, exist_ok=True)
        self._resolved_data_dir = data
        if self.tls:
            from moldau.broker.security.tls import generate

            self._tls_files = generate(os.path.join(self._work, "tls"), hostnames=[self.host, "localhost"],
                                       clients=[], days=30, reuse_ca=False)
            self._settings.setdefault("ssl.certificate.location", self._tls_files.broker_cert)
            self._settings.setdefault("ssl.key.location", self._tls_files.broker_key)
            self._settings.setdefault("ssl.ca.location", self._tls_files.ca_cert)
        if self.users:
            if data is None:
                raise ValueError("users are stored per broker; a cluster takes them with `moldau users add "
                                 "--bootstrap-server` (SCRAM) after start")
            from moldau.broker.security.credentials import CredentialStore

            store = CredentialStore(data)
            for name, password in self.users.items():
                # few iterations: test credentials, and each start pays for the hashing
                store.add_password(name, password, None, iterations=4096)
            self._settings.setdefault("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")

    def _listener_spec(self, ports: Sequence[int]) -> str:
        names = ["PLAINTEXT"]
        if self.tls:
            names.append("SSL")
        if self.users:
            names.append("SASL_SSL" if self.tls else "SASL_PLAINTEXT")
        h = f"[{self.host}]" if ":" in self.host else self.host
        return ",".join(f"{n}://{h}:{p}" for n, p in zip(names, ports))

    def _listener_count(self) -> int:
        return 1 + int(self.tls) + int(bool(self.users))

    # -------------------------------------------------------------------------------------------- thread
    def _start_thread(self) -> None:
        from moldau.broker.broker import Broker
        from moldau.broker.config import BrokerConfig

        settings = {**self._settings, "log.dirs": self._resolved_data_dir or ""}
        settings.setdefault("listeners", self._listener_spec([0] * self._listener_count()))
        config = BrokerConfig.from_dict(settings)
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            broker: Any = None
            try:
                broker = Broker(config)
                loop.run_until_complete(broker.start())
            except BaseException as e:  # reported to start()'s caller
                failure.append(e)
                try:
                    if broker is not None:
                        loop.run_until_complete(broker.stop())
                except Exception:  # noqa: BLE001 - best effort after a failed start
                    log.debug("stop after a failed start", exc_info=True)
                _close_loop(loop)
                ready.set()
                return
            self.broker = broker
            ready.set()
            try:
                loop.run_forever()
            finally:
                _close_loop(loop)

        self._thread = threading.Thread(target=main, name="moldau-embedded-broker", daemon=True)
        self._thread.start()
        if not ready.wait(self.start_timeout):
            raise BrokerStartError(f"the broker did not start within {self.start_timeout:.0f} s")
        if failure:
            self._thread.join()
            self._thread = None
            raise BrokerStartError(f"the broker did not start: {failure[0]}") from failure[0]
        for lst in self.broker.listeners:
            self._listeners.setdefault(lst.security_protocol, f"{lst.host}:{lst.port}")

    def _stop_thread(self) -> None:
        loop, thread, broker = self._loop, self._thread, self.broker
        self._loop = self._thread = self.broker = None
        if thread is None or loop is None:
            return
        if broker is not None and thread.is_alive():
            fut = asyncio.run_coroutine_threadsafe(broker.stop(), loop)
            try:
                fut.result(30.0)
            except Exception:  # noqa: BLE001 - still stop the loop
                log.exception("error stopping the embedded broker")
            loop.call_soon_threadsafe(loop.stop)
        thread.join(30.0)

    # ------------------------------------------------------------------------------------------- process
    def _start_process(self) -> None:
        assert self._work is not None
        # one listener: port 0, the bound port read from the ready line; more: free ports picked here (the
        # ready line names only the first listener)
        count = self._listener_count()
        ports = [0] if count == 1 else [free_port(self.host) for _ in range(count)]
        cmd = [sys.executable, "-m", "moldau", "broker", "--data-dir", self._resolved_data_dir or "",
               "--set", f"listeners={self._listener_spec(ports)}"]
        for k, v in self._settings.items():
            cmd += ["--set", f"{k}={v}"]
        out_path = os.path.join(self._work, "broker.out")
        with open(out_path, "wb") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while True:
            text = _read_text(out_path)
            ready = _READY.search(text)
            if ready:
                break
            if self._proc.poll() is not None:
                raise BrokerStartError(f"the broker exited with {self._proc.returncode}:\n{text[-4000:]}")
            if time.monotonic() > deadline:
                raise BrokerStartError(f"the broker did not start within {self.start_timeout:.0f} s:\n"
                                       f"{text[-4000:]}")
            time.sleep(0.01)
        if count == 1:
            ports = [int(ready.group(2))]
        spec = self._listener_spec(ports)
        for item in spec.split(","):
            name, addr = item.split("://")
            self._listeners[name] = addr.replace("[", "").replace("]", "") if addr.count(":") == 1 else addr

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10.0)

    def output(self) -> str:
        """What the broker process printed (process mode)."""
        return _read_text(os.path.join(self._work, "broker.out")) if self._work else ""

    # ------------------------------------------------------------------------------------------- cluster
    def _start_cluster(self) -> None:
        from moldau.broker.cluster.local import LocalCluster, ZooKeeperUnavailable, zookeeper_installed
        from moldau.broker.memory import ram_parent

        if not zookeeper_installed():
            raise ZooKeeperUnavailable("a cluster needs ZooKeeper (Debian: apt-get install zookeeper) "
                                       "and Java")
        if self.tls:
            raise ValueError("tls is for a single broker")
        if self.memory:
            folder = tempfile.mkdtemp(prefix="moldau-memory-cluster-", dir=ram_parent())
        else:
            folder = self._data_dir or os.path.join(self._work or ".", "cluster")
        self._resolved_data_dir = folder
        self._cluster = LocalCluster(folder, brokers=self.brokers,
                                     broker_configs=[f"{k}={v}" for k, v in self._settings.items()])
        self._cluster.start(self.start_timeout)
        self._listeners["PLAINTEXT"] = self._cluster.bootstrap
        self._wait_formed()

    def _wait_formed(self) -> None:
        """Until every broker's metadata names all brokers and a controller."""
        from moldau.client import Admin

        deadline = time.monotonic() + self.start_timeout
        for b in self._cluster.brokers:
            while True:
                try:
                    with Admin(bootstrap_servers=b.address) as admin:
                        desc = admin.describe_cluster()
                    if len(desc.brokers) == self.brokers and desc.controller_id is not None \
                            and desc.controller_id >= 0:
                        break
                except Exception:  # noqa: BLE001 - not formed yet
                    pass
                if time.monotonic() > deadline:
                    raise BrokerStartError(f"the cluster did not form within {self.start_timeout:.0f} s")
                time.sleep(0.2)

    # ------------------------------------------------------------------------------------------ teardown
    def _teardown(self) -> None:
        self._listeners = {}
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # noqa: BLE001 - the broker goes anyway
                log.debug("closing the admin client", exc_info=True)
        self._stop_thread()
        self._stop_process()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.stop()
            if self.memory or self._data_dir is None:
                shutil.rmtree(cluster.folder, ignore_errors=True)
        if self._memory_dir is not None:
            self._memory_dir.remove()
            self._memory_dir = None
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None
        self._resolved_data_dir = None
        self._tls_files = None

    # ------------------------------------------------------------------------------------- conveniences
    def admin(self) -> Any:
        """A moldau ``Admin`` client for this broker (kept open until stop)."""
        if self._admin is None:
            from moldau.client import Admin

            self._admin = Admin(bootstrap_servers=self.bootstrap_servers)
        return self._admin

    def create_topic(self, name: str, partitions: int | None = None, *,
                     config: Mapping[str, Any] | None = None, replication_factor: int | None = None,
                     timeout: float = 30.0) -> str:
        """Create ``name`` (``partitions`` default: the broker's ``num.partitions``) and wait until every
        partition has a leader. Returns the name."""
        from moldau.client import NewTopic

        rf = replication_factor if replication_factor is not None else min(self.brokers, 3)
        topic = NewTopic(name, num_partitions=partitions or self.partitions, replication_factor=rf,
                         config={k: _to_str(v) for k, v in (config or {}).items()})
        self.admin().create_topics([topic], timeout=timeout)
        return name

    def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        self.admin().delete_topics([name], timeout=timeout)

    def expect_records(self, topic: str, n: int, timeout: float = 10.0, **kwargs: Any) -> list[Any]:
        """See ``moldau.testing.expect_records``."""
        from .records import expect_records

        return expect_records(self.bootstrap_servers, topic, n, timeout, **kwargs)


def _import_broker() -> None:
    """Load the broker's modules (the first start in a process pays for them; later ones find them)."""
    import moldau.broker.broker  # noqa: F401
    import moldau.broker.server  # noqa: F401
    import moldau.client  # noqa: F401


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on ``loop``, finish async generators and the default executor, close it."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _to_str(v: Any) -> str:
    """A setting's string form, as the broker's config takes it (booleans as true/false, lists joined)."""
    from moldau.broker.config import _to_str as config_str

    return config_str(v)

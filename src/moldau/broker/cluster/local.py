"""A local cluster on loopback for ``moldau cluster up`` and the cluster tests: a ZooKeeper server process
(Debian's ``zookeeper`` package and Java; a zoo.cfg with its data dir under our folder, a free port, the admin
server off) and N ``moldau broker`` processes, each with its own data dir under the same folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from moldau._ports import free_port

ZK_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/*"
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperUnavailable(RuntimeError):
    pass


def zookeeper_installed() -> bool:
    return shutil.which("java") is not None and os.path.exists("/usr/share/java/zookeeper.jar")


class LocalZooKeeper:
    def __init__(self, folder: str, *, port: int = 0, host: str = "127.0.0.1") -> None:
        self.folder = os.path.abspath(folder)
        self.host = host
        self.port = port or free_port(host)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = os.path.join(self.folder, "zookeeper.log")

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        if not zookeeper_installed():
            raise ZooKeeperUnavailable(
                "ZooKeeper is not installed (Debian: apt-get install zookeeper; "
                "scripts/setup.sh --test installs it)"
            )
        data = os.path.join(self.folder, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.folder, "zoo.cfg")
        with open(cfg, "w", encoding="ascii") as f:
            f.write(
                f"tickTime=500\ndataDir={data}\nclientPort={self.port}\nclientPortAddress={self.host}\n"
                "maxSessionTimeout=60000\nadmin.enableServer=false\n"
                "4lw.commands.whitelist=ruok,srvr,stat\n"
            )
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                [
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-Dzookeeper.log.dir=" + self.folder,
                    "-Dzookeeper.root.logger=INFO,CONSOLE",
                    "-cp",
                    ZK_CLASSPATH,
                    ZK_MAIN,
                    cfg,
                ],
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ZooKeeperUnavailable(
                    f"ZooKeeper exited with {self.proc.returncode} (see {self.log_path})"
                )
            if self._ruok():
                return
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperUnavailable(f"ZooKeeper did not start within {timeout:.0f} s (see {self.log_path})")

    def _ruok(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self) -> None:
        p = self.proc
        if p is None:
            return
        self.proc = None
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def moldau_command() -> list[str]:
    """The ``moldau`` console script next to this interpreter, else ``python -m moldau.cli.main``."""
    script = os.path.join(os.path.dirname(sys.executable), "moldau")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "moldau.cli.main"]


class LocalBroker:
    def __init__(self, node_id: int, folder: str, port: int, zk_connect: str, extra: Sequence[str]) -> None:
        self.node_id = node_id
        self.data_dir = os.path.join(folder, f"broker-{node_id}")
        self.port = port
        self.zk_connect = zk_connect
        self.extra = list(extra)
        self.metrics_port: int | None = None  # when a metrics.listener was given (tests)
        #: False: started without node.id, the broker takes a generated id (/brokers/seqid)
        self.assign_id = True
        self.log_path = os.path.join(folder, f"broker-{node_id}.log")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        cmd = [
            *moldau_command(),
            "broker",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            self.data_dir,
            "--set",
            f"zookeeper.connect={self.zk_connect}",
        ]
        if self.assign_id:
            cmd += ["--set", f"node.id={self.node_id}"]
        for kv in self.extra:
            cmd += ["--set", kv]
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )

    def wait_listening(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker {self.node_id} exited with {self.proc.returncode} (see {self.log_path})"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(
            f"broker {self.node_id} did not listen within {timeout:.0f} s (see {self.log_path})"
        )

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9."""
        if self.proc is not None:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown), then SIGKILL after ``timeout``."""
        p = self.proc
        if p is None:
            return None
        self.proc = None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        return p.returncode

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LocalCluster:
    """ZooKeeper and ``brokers`` moldau brokers (ids 1..N) under ``folder``."""

    def __init__(
        self,
        folder: str,
        brokers: int = 3,
        *,
        broker_configs: Sequence[str] = (),
        zk_port: int = 0,
        first_port: int = 0,
    ) -> None:
        self.folder = os.path.abspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.zk = LocalZooKeeper(os.path.join(self.folder, "zookeeper"), port=zk_port)
        self.brokers = [
            LocalBroker(
                i + 1,
                self.folder,
                first_port + i if first_port else free_port(),
                self.zk.connect,
                broker_configs,
            )
            for i in range(brokers)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def broker(self, node_id: int) -> LocalBroker:
        return self.brokers[node_id - 1]

    def start(self, timeout: float = 60.0) -> None:
        self.zk.start()
        for b in self.brokers:
            b.start()
        for b in self.brokers:
            b.wait_listening(timeout)

    def stop(self, *, graceful: bool = True) -> None:
        """SIGTERM to every broker (controlled shutdown), or kill -9 when not ``graceful``; then ZooKeeper."""
        for b in self.brokers:
            b.signal(signal.SIGCONT)  # a test may have left one stopped
            if graceful:
                b.signal(signal.SIGTERM)
            else:
                b.kill()
        for b in self.brokers:
            b.stop(30.0)
        self.zk.stop()

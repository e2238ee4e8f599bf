"""The bench's cluster: a ZooKeeper and N ``moldau broker`` processes, each in its own network namespace with
its own address (:mod:`tests.faults.net`), or, where namespaces cannot be made, all on loopback with process
faults only (the reason is logged and reported). Brokers keep their data dirs across kills and restarts.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence

from moldau.broker.cluster.local import ZK_CLASSPATH, ZK_MAIN, free_port, moldau_command, zookeeper_installed

from .net import NetnsUnavailable, Network, unavailable_reason

log = logging.getLogger(__name__)

BROKER_PORT = 9092
ZK_PORT = 2181


class Proc:
    """One server process: started, signalled, killed and restarted by the nemesis."""

    def __init__(self, name: str, host: str, port: int, cmd: list[str], log_path: str) -> None:
        self.name, self.host, self.port, self.cmd, self.log_path = name, host, port, cmd, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with open(self.log_path, "ab") as logf:
            logf.write(f"=== start {time.strftime('%H:%M:%S')} ===\n".encode())
            logf.flush()
            # ip netns exec execs the command: the pid is the server's own, for kill -9 and SIGSTOP
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.paused = False

    def listening(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def wait_listening(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} (see {self.log_path})")
            if self.listening():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not listen within {timeout:.0f} s (see {self.log_path})")

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            os.kill(self.proc.pid, sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """kill -9."""
        p = self.proc
        if p is not None:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait(20)
        self.proc = None
        self.paused = False

    def terminate(self, timeout: float = 40.0) -> int | None:
        """SIGTERM (a broker's controlled shutdown), kill -9 after ``timeout``."""
        p = self.proc
        if p is None:
            return None
        self.resume()
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s of SIGTERM: kill -9", self.name, timeout)
                p.kill()
                p.wait(20)
        self.proc = None
        return p.returncode


class FaultCluster:
    """ZooKeeper (``zk``) and brokers 1..N (``brokers[i]``), in namespaces when ``netns`` (default: when
    possible)."""

    def __init__(
        self,
        folder: str,
        brokers: int = 3,
        *,
        configs: Sequence[str] = (),
        netns: bool | None = None,
        zk_session_ms: int = 6000,
    ) -> None:
        if not zookeeper_installed():
            raise RuntimeError(
                "ZooKeeper is not installed (scripts/setup.sh --test installs Debian's zookeeper)"
            )
        self.folder = os.path.abspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.n = brokers
        reason = unavailable_reason() if netns is not False else "namespaces switched off"
        if netns and reason:
            raise NetnsUnavailable(reason)
        self.fallback_reason = reason
        if reason:
            log.warning(
                "network namespaces unavailable (%s): process faults only, no network partitions", reason
            )
        hosts = ["zk"] + [f"b{i}" for i in range(1, brokers + 1)]
        self.net: Network | None = None if reason else Network(hosts, "zk")
        self.configs = list(configs)
        self.zk_session_ms = zk_session_ms
        self.zk: Proc | None = None
        self.brokers: list[Proc] = []

    @property
    def netns(self) -> bool:
        return self.net is not None

    def _host(self, name: str) -> tuple[str, list[str], int | None]:
        if self.net is not None:
            return self.net.address(name), self.net.prefix(name), None
        return "127.0.0.1", [], free_port()

    def start(self) -> None:
        try:
            if self.net is not None:
                self.net.open()
            host, prefix, port = self._host("zk")
            zk_port = port or ZK_PORT
            zdir = os.path.join(self.folder, "zookeeper")
            os.makedirs(os.path.join(zdir, "data"), exist_ok=True)
            cfg = os.path.join(zdir, "zoo.cfg")
            with open(cfg, "w", encoding="ascii") as f:
                f.write(
                    f"tickTime=500\ndataDir={zdir}/data\nclientPort={zk_port}\nclientPortAddress={host}\n"
                    "maxSessionTimeout=60000\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n"
                )
            self.zk = Proc(
                "zookeeper",
                host,
                zk_port,
                [
                    *prefix,
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    f"-Dzookeeper.log.dir={zdir}",
                    "-Dzookeeper.root.logger=INFO,CONSOLE",
                    "-cp",
                    ZK_CLASSPATH,
                    ZK_MAIN,
                    cfg,
                ],
                os.path.join(self.folder, "zookeeper.log"),
            )
            self.zk.start()
            self.zk.wait_listening(60)
            for i in range(1, self.n + 1):
                host, prefix, port = self._host(f"b{i}")
                bport = port or BROKER_PORT
                data = os.path.join(self.folder, f"broker-{i}")
                os.makedirs(data, exist_ok=True)
                cmd = [
                    *prefix,
                    *moldau_command(),
                    "broker",
                    "--host",
                    host,
                    "--port",
                    str(bport),
                    "--data-dir",
                    data,
                    "--set",
                    f"node.id={i}",
                    "--set",
                    f"zookeeper.connect={self.zk.address}",
                    "--set",
                    f"zookeeper.session.timeout.ms={self.zk_session_ms}",
                ]
                for kv in self.configs:
                    cmd += ["--set", kv]
                self.brokers.append(
                    Proc(f"broker {i}", host, bport, cmd, os.path.join(self.folder, f"broker-{i}.log"))
                )
            for b in self.brokers:
                b.start()
            for b in self.brokers:
                b.wait_listening(90)
        except BaseException:
            self.stop()
            raise

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def broker(self, node_id: int) -> Proc:
        return self.brokers[node_id - 1]

    def heal_all(self) -> None:
        """Every link up, every paused process continued, every stopped process started."""
        if self.net is not None:
            self.net.heal()
        for p in ([self.zk] if self.zk else []) + self.brokers:
            p.resume()
        if self.zk is not None and not self.zk.running:
            self.zk.start()
            self.zk.wait_listening(60)
        for b in self.brokers:
            if not b.running:
                b.start()
        for b in self.brokers:
            b.wait_listening(90)

    def stop(self) -> None:
        """kill -9 of every process, then the namespaces and links go."""
        try:
            for p in self.brokers + ([self.zk] if self.zk else []):
                try:
                    p.resume()
                    p.kill()
                except Exception:
                    log.exception("stopping %s", p.name)
        finally:
            if self.net is not None:
                self.net.close()

    def log_tails(self, lines: int = 15) -> str:
        out = []
        for p in ([self.zk] if self.zk else []) + self.brokers:
            try:
                with open(p.log_path, errors="replace") as f:
                    tail = f.read().splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {p.name} ---\n" + "\n".join(tail))
        return "\n".join(out)

"""The nemesis: faults against a :class:`~tests.faults.harness.FaultCluster`, each healed before it returns
(also when it fails). Targets are picked from the cluster's own metadata: the leader of partition 0 of the
bench's topic, one of its followers, the controller.

Faults: ``kill-leader`` / ``kill-controller`` (kill -9, restarted after ``down`` seconds),
``hard-bounce-leader`` / ``hard-bounce-controller`` (kill -9 and restarted at once), ``clean-bounce-leader`` /
``clean-bounce-controller`` (SIGTERM: controlled shutdown, then restarted), ``pause-follower`` /
``pause-leader`` (SIGSTOP longer than the ZooKeeper session timeout, then SIGCONT), ``partition-leader`` /
``partition-follower`` (the broker's link down: cut off from the others, ZooKeeper and the clients, longer
than the session timeout), ``partition-zookeeper`` (ZooKeeper cut off from every broker),
``partition-zookeeper-leader`` (ZooKeeper cut off from the leader only, which still reaches the others and the
clients), ``restart-zookeeper`` (kill -9 of ZooKeeper, restarted), and ``unclean-loss`` (both followers paused
until the leader is alone in the ISR, the leader takes writes alone, is killed, the followers come back: with
unclean election the old followers lead and the leader's last writes are gone; without it the partition waits
for the leader).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from .harness import FaultCluster

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Timing:
    session_s: float = 6.0  # zookeeper.session.timeout.ms of the bench's brokers
    lag_s: float = 3.0  # replica.lag.time.max.ms
    down_s: float = 8.0  # how long a killed broker stays down


class Nemesis:
    def __init__(self, cluster: FaultCluster, topic: str, timing: Timing | None = None) -> None:
        self.c = cluster
        self.topic = topic
        self.t = timing or Timing()
        self.log: list[str] = []

    # -- targets -------------------------------------------------------------------------------------------
    def _metadata(self) -> tuple[int, int, list[int]]:
        """(controller, leader of partition 0, its replicas) as a reachable running broker sees it."""
        last: Exception | None = None
        for _ in range(60):
            for b in self.c.brokers:
                cut = self.c.net.isolated if self.c.net else set()
                if not b.running or b.paused or f"b{self.c.brokers.index(b) + 1}" in cut:
                    continue
                try:
                    md = AdminClient({"bootstrap.servers": b.address, "log_level": 2}).list_topics(
                        self.topic, timeout=5
                    )
                    p0 = md.topics[self.topic].partitions[0]
                    if p0.leader > 0 and md.controller_id > 0:
                        return md.controller_id, p0.leader, list(p0.replicas)
                except Exception as e:  # noqa: BLE001 - try the next broker
                    last = e
            time.sleep(0.5)
        raise RuntimeError(f"no leader/controller in the metadata ({last!r})")

    def leader(self) -> int:
        return self._metadata()[1]

    def controller(self) -> int:
        return self._metadata()[0]

    def follower(self) -> int:
        ctl, leader, replicas = self._metadata()
        others = [r for r in replicas if r != leader]
        return next((r for r in others if r != ctl), others[0])

    def fully_replicated(self, timeout: float = 90.0) -> bool:
        """Wait until every partition of the topic has its full ISR again (False after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                md = AdminClient({"bootstrap.servers": self.c.bootstrap, "log_level": 2}).list_topics(
                    self.topic, timeout=5
                )
                ps = md.topics[self.topic].partitions.values()
                if ps and all(p.leader > 0 and len(p.isrs) == len(p.replicas) for p in ps):
                    return True
            except Exception as e:  # noqa: BLE001 - brokers on their way back
                log.debug("metadata: %r", e)
            time.sleep(1.0)
        return False

    # -- faults --------------------------------------------------------------------------------------------
    def run(self, name: str) -> str:
        fault = FAULTS[name]
        t0 = time.monotonic()
        try:
            what = fault(self)
        finally:
            self.c.heal_all()
        line = f"{time.strftime('%H:%M:%S')} {name}: {what} ({time.monotonic() - t0:.0f} s)"
        log.info("nemesis %s", line)
        self.log.append(line)
        return line

    def _kill(self, node: int, down: float) -> None:
        self.c.broker(node).kill()
        time.sleep(down)
        self.c.broker(node).start()
        self.c.broker(node).wait_listening(90)

    def _bounce_clean(self, node: int) -> None:
        self.c.broker(node).terminate(60)
        self.c.broker(node).start()
        self.c.broker(node).wait_listening(90)

    def _pause(self, node: int) -> None:
        self.c.broker(node).pause()
        try:
            time.sleep(self.t.session_s + 3)
        finally:
            self.c.broker(node).resume()

    def _isolate(self, host: str, seconds: float) -> None:
        if self.c.net is None:
            raise Unsupported("network partitions need namespaces")
        self.c.net.isolate(host)
        try:
            time.sleep(seconds)
        finally:
            self.c.net.heal(host)

    def kill_leader(self) -> str:
        n = self.leader()
        self._kill(n, self.t.down_s)
        return f"kill -9 of leader {n}, down {self.t.down_s:.0f} s"

    def kill_controller(self) -> str:
        n = self.controller()
        self._kill(n, self.t.down_s)
        return f"kill -9 of controller {n}, down {self.t.down_s:.0f} s"

    def hard_bounce_leader(self) -> str:
        n = self.leader()
        self._kill(n, 0)
        return f"hard bounce of leader {n}"

    def hard_bounce_controller(self) -> str:
        n = self.controller()
        self._kill(n, 0)
        return f"hard bounce of controller {n}"

    def clean_bounce_leader(self) -> str:
        n = self.leader()
        self._bounce_clean(n)
        return f"clean bounce of leader {n}"

    def clean_bounce_controller(self) -> str:
        n = self.controller()
        self._bounce_clean(n)
        return f"clean bounce of controller {n}"

    def pause_follower(self) -> str:
        n = self.follower()
        self._pause(n)
        return f"SIGSTOP of follower {n} for {self.t.session_s + 3:.0f} s"

    def pause_leader(self) -> str:
        n = self.leader()
        self._pause(n)
        return f"SIGSTOP of leader {n} for {self.t.session_s + 3:.0f} s"

    def partition_leader(self) -> str:
        n = self.leader()
        self._isolate(f"b{n}", self.t.session_s + 4)
        return f"leader {n} cut off for {self.t.session_s + 4:.0f} s"

    def partition_follower(self) -> str:
        n = self.follower()
        self._isolate(f"b{n}", self.t.session_s + 4)
        return f"follower {n} (a minority) cut off for {self.t.session_s + 4:.0f} s"

    def partition_zookeeper(self) -> str:
        self._isolate("zk", self.t.session_s + 2)
        return f"ZooKeeper cut off from every broker for {self.t.session_s + 2:.0f} s"

    def partition_zookeeper_leader(self) -> str:
        if self.c.net is None:
            raise Unsupported("network partitions need namespaces")
        n = self.leader()
        self.c.net.cut_coordination(f"b{n}")
        try:
            time.sleep(self.t.session_s + 4)
        finally:
            self.c.net.heal(f"b{n}")
        return f"ZooKeeper cut off from leader {n} only for {self.t.session_s + 4:.0f} s"

    def restart_zookeeper(self) -> str:
        assert self.c.zk is not None
        self.c.zk.kill()
        time.sleep(3)
        self.c.zk.start()
        self.c.zk.wait_listening(60)
        return "kill -9 of ZooKeeper, restarted after 3 s"

    def unclean_loss(self) -> str:
        _ctl, leader, replicas = self._metadata()
        followers = [r for r in replicas if r != leader]
        for f in followers:
            self.c.broker(f).pause()
        try:
            time.sleep(self.t.lag_s + 4)  # out of the ISR; the leader acknowledges alone (min.insync 1)
            self.c.broker(leader).kill()
        finally:
            for f in followers:
                self.c.broker(f).resume()
        time.sleep(self.t.session_s + 6)  # the leader's session expires: a new leader, if unclean allows
        self.c.broker(leader).start()
        self.c.broker(leader).wait_listening(90)
        return f"followers {followers} paused, leader {leader} alone in the ISR, then killed"


class Unsupported(RuntimeError):
    pass


FAULTS: dict[str, Callable[[Nemesis], str]] = {
    "kill-leader": Nemesis.kill_leader,
    "kill-controller": Nemesis.kill_controller,
    "hard-bounce-leader": Nemesis.hard_bounce_leader,
    "hard-bounce-controller": Nemesis.hard_bounce_controller,
    "clean-bounce-leader": Nemesis.clean_bounce_leader,
    "clean-bounce-controller": Nemesis.clean_bounce_controller,
    "pause-follower": Nemesis.pause_follower,
    "pause-leader": Nemesis.pause_leader,
    "partition-leader": Nemesis.partition_leader,
    "partition-follower": Nemesis.partition_follower,
    "partition-zookeeper": Nemesis.partition_zookeeper,
    "partition-zookeeper-leader": Nemesis.partition_zookeeper_leader,
    "restart-zookeeper": Nemesis.restart_zookeeper,
    "unclean-loss": Nemesis.unclean_loss,
}
NETWORK_FAULTS = {
    "partition-leader",
    "partition-follower",
    "partition-zookeeper",
    "partition-zookeeper-leader",
}
EVERY_FAULT = [f for f in FAULTS if f != "unclean-loss"]

"""Network namespaces for the fault bench: per host (the ZooKeeper and each broker) a namespace with its own
addresses on private /24s that this bench creates and removes, joined by veth pairs to two bridges in the root
namespace:

* the data bridge joins the brokers (and the test process, which stays in the root namespace): client and
  replication traffic;
* the coordination bridge joins ZooKeeper and every broker (a second veth per broker): ZooKeeper sessions.

A network partition takes the root side of veths down (``ip link set ... down``): both links of a broker cut
it off from everyone (``isolate``); ZooKeeper's link cuts it off from every broker; one broker's coordination
link cuts ZooKeeper off from that broker alone (``cut_coordination``). ``tc netem`` (delays, loss) is not
used: kernels without the ``sch_netem`` module, like the one this bench was written on, refuse it.

Everything is removed by :meth:`Network.close`, which the harness calls in ``finally`` and at interpreter
exit; :func:`remove_stale` removes what a killed run of an earlier process left behind (names carry the pid).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import subprocess

log = logging.getLogger(__name__)

PREFIX = "mfl"  # names: mfl<pid>br / mfl<pid>zb (bridges), mfl<pid>v<i> / mfl<pid>z<i> (veths, root side),
# namespaces mfl-<pid>-<host>


class NetnsUnavailable(RuntimeError):
    pass


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=False)
    if check and r.returncode != 0:
        raise NetnsUnavailable(f"ip {' '.join(args)}: {r.stderr.strip() or r.returncode}")
    return r


def unavailable_reason() -> str | None:
    """None where namespaces and veth pairs can be made here, else why not."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"{PREFIX}-{os.getpid()}-probe"
    try:
        _ip("netns", "add", name)
    except NetnsUnavailable as e:
        return f"cannot create a network namespace ({e})"
    try:
        tag = f"{PREFIX}{os.getpid() % 100000}pr"
        r = _ip("link", "add", tag, "type", "veth", "peer", "name", tag + "p", check=False)
        if r.returncode != 0:
            return f"cannot create a veth pair ({r.stderr.strip()})"
        _ip("link", "del", tag, check=False)
        return None
    finally:
        _ip("netns", "del", name, check=False)


def remove_stale() -> None:
    """Namespaces and links of bench runs whose process is gone."""
    r = _ip("netns", "list", check=False)
    for line in r.stdout.splitlines():
        m = re.match(rf"({PREFIX}-(\d+)-\S+)", line)
        if m and not _alive(int(m.group(2))):
            _ip("netns", "del", m.group(1), check=False)
    r = _ip("-o", "link", "show", check=False)
    for m in re.finditer(rf"\d+: ({PREFIX}(\d+)(?:br|zb|[vz]\d+))[@:]", r.stdout):
        # the pid is cut to 5 digits in link names: only links of no live bench process of that tag go
        if not any(_alive(p) for p in _pids_with_tag(int(m.group(2)))):
            _ip("link", "del", m.group(1), check=False)


def _pids_with_tag(tag: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) % 100000 == tag]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _free_subnets() -> tuple[str, str]:
    used = _ip("-4", "-o", "addr", "show", check=False).stdout
    free = [f"10.213.{t}" for t in range(os.getpid() % 100 * 2 + 20, 256) if f" 10.213.{t}." not in used]
    if len(free) < 2:
        raise NetnsUnavailable("no free 10.213.x.0/24 subnets for the bench")
    return free[0], free[1]


class Network:
    """Two bridges and one namespace per named host; ``coordinator`` (ZooKeeper) is on the coordination bridge
    only, the others on both. ``address(host)`` is the host's address on the data bridge (the coordinator's on
    its own)."""

    def __init__(self, hosts: list[str], coordinator: str) -> None:
        self.pid = os.getpid()
        self.tag = f"{PREFIX}{self.pid % 100000}"
        self.bridge = self.tag + "br"
        self.cbridge = self.tag + "zb"
        self.hosts = list(hosts)
        self.coordinator = coordinator
        self.base = ""
        self.cbase = ""
        self._made_ns: list[str] = []
        self._made_links: list[str] = []
        self._down: set[str] = set()
        self._closed = False

    def netns(self, host: str) -> str:
        return f"{PREFIX}-{self.pid}-{host}"

    def veth(self, host: str) -> str:
        """The host's link to the data bridge (the coordinator's to its own bridge)."""
        return f"{self.tag}v{self.hosts.index(host)}"

    def cveth(self, host: str) -> str:
        """A broker's link to the coordination bridge."""
        return f"{self.tag}z{self.hosts.index(host)}"

    def address(self, host: str) -> str:
        base = self.cbase if host == self.coordinator else self.base
        return f"{base}.{self.hosts.index(host) + 2}"

    def prefix(self, host: str) -> list[str]:
        """The command prefix that runs a process inside the host's namespace."""
        return ["ip", "netns", "exec", self.netns(host)]

    def open(self) -> Network:
        remove_stale()
        atexit.register(self.close)
        try:
            self.base, self.cbase = _free_subnets()
            for bridge, base in ((self.bridge, self.base), (self.cbridge, self.cbase)):
                _ip("link", "add", bridge, "type", "bridge")
                self._made_links.append(bridge)
                _ip("addr", "add", f"{base}.1/24", "dev", bridge)
                _ip("link", "set", bridge, "up")
            for host in self.hosts:
                ns = self.netns(host)
                _ip("netns", "add", ns)
                self._made_ns.append(ns)
                _ip("-n", ns, "link", "set", "lo", "up")
                if host == self.coordinator:
                    self._link(ns, self.veth(host), self.cbridge, f"{self.address(host)}/24")
                else:
                    self._link(ns, self.veth(host), self.bridge, f"{self.address(host)}/24")
                    self._link(
                        ns, self.cveth(host), self.cbridge, f"{self.cbase}.{self.hosts.index(host) + 2}/24"
                    )
        except BaseException:
            self.close()
            raise
        log.info("network %s.0/24: %s", self.base, {h: self.address(h) for h in self.hosts})
        return self

    def _link(self, ns: str, veth: str, bridge: str, cidr: str) -> None:
        _ip("link", "add", veth, "type", "veth", "peer", "name", veth + "p")
        self._made_links.append(veth)
        _ip("link", "set", veth + "p", "netns", ns)
        _ip("link", "set", veth, "master", bridge)
        _ip("link", "set", veth, "up")
        _ip("-n", ns, "addr", "add", cidr, "dev", veth + "p")
        _ip("-n", ns, "link", "set", veth + "p", "up")

    def _set(self, link: str, up: bool) -> None:
        _ip("link", "set", link, "up" if up else "down")
        (self._down.discard if up else self._down.add)(link)

    def isolate(self, host: str) -> None:
        """Cut the host off from every other host and from the test process."""
        self._set(self.veth(host), False)
        if host != self.coordinator:
            self._set(self.cveth(host), False)

    def cut_coordination(self, host: str) -> None:
        """Cut ZooKeeper off from this broker only (the broker still reaches the others and the clients)."""
        self._set(self.cveth(host), False)

    def heal(self, host: str | None = None) -> None:
        """Every link of ``host`` (of every host when None) up again."""
        links = (
            sorted(self._down)
            if host is None
            else [self.veth(host)] + ([self.cveth(host)] if host != self.coordinator else [])
        )
        for link in links:
            self._set(link, True)

    @property
    def isolated(self) -> set[str]:
        """Hosts with a link down."""
        return {
            h
            for h in self.hosts
            if self.veth(h) in self._down or (h != self.coordinator and self.cveth(h) in self._down)
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for ns in self._made_ns:
            _ip("netns", "del", ns, check=False)  # takes the namespace's veth ends (and their peers) along
        for link in reversed(self._made_links):
            if _ip("link", "show", link, check=False).returncode == 0:
                _ip("link", "del", link, check=False)
        self._made_ns.clear()
        self._made_links.clear()

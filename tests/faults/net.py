"""Network namespaces for the fault bench: one bridge in the root namespace and, per host (the ZooKeeper and
each broker), a namespace joined to the bridge by a veth pair, with its own address on a private /24 that this
bench creates and removes. The test process stays in the root namespace and reaches every host through the
bridge. A network partition takes the host's end of a veth down (``ip link set ... down``): the host is cut off
from everyone until the link comes up again. ``tc netem`` (delays, loss) is not used: kernels without the
``sch_netem`` module, like the one this bench was written on, refuse it.

Everything is removed by :meth:`Network.close`, which the harness calls in ``finally`` and at interpreter exit;
:func:`remove_stale` removes what a killed run of an earlier process left behind (names carry the pid).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import subprocess

log = logging.getLogger(__name__)

PREFIX = "mfl"     # names: mfl<pid>br (bridge), mfl<pid>v<i> (veth, root side), namespaces mfl-<pid>-<host>


class NetnsUnavailable(RuntimeError):
    pass


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
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
    for m in re.finditer(rf"\d+: ({PREFIX}(\d+)(?:br|v\d+))[@:]", r.stdout):
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


def _free_subnet() -> str:
    used = _ip("-4", "-o", "addr", "show", check=False).stdout
    for third in range(os.getpid() % 200 + 20, 256):
        base = f"10.213.{third}"
        if f" {base}." not in used:
            return base
    raise NetnsUnavailable("no free 10.213.x.0/24 subnet for the bench")


class Network:
    """A bridge and one namespace per named host. ``address(host)`` is the host's address on the bridge."""

    def __init__(self, hosts: list[str]) -> None:
        self.pid = os.getpid()
        self.tag = f"{PREFIX}{self.pid % 100000}"
        self.bridge = self.tag + "br"
        self.hosts = list(hosts)
        self.base = ""
        self._made_ns: list[str] = []
        self._made_links: list[str] = []
        self._down: set[str] = set()
        self._closed = False

    def netns(self, host: str) -> str:
        return f"{PREFIX}-{self.pid}-{host}"

    def veth(self, host: str) -> str:
        return f"{self.tag}v{self.hosts.index(host)}"

    def address(self, host: str) -> str:
        return f"{self.base}.{self.hosts.index(host) + 2}"

    def prefix(self, host: str) -> list[str]:
        """The command prefix that runs a process inside the host's namespace."""
        return ["ip", "netns", "exec", self.netns(host)]

    def open(self) -> Network:
        remove_stale()
        atexit.register(self.close)
        try:
            self.base = _free_subnet()
            _ip("link", "add", self.bridge, "type", "bridge")
            self._made_links.append(self.bridge)
            _ip("addr", "add", f"{self.base}.1/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for host in self.hosts:
                ns, veth = self.netns(host), self.veth(host)
                _ip("netns", "add", ns)
                self._made_ns.append(ns)
                _ip("link", "add", veth, "type", "veth", "peer", "name", veth + "p")
                self._made_links.append(veth)
                _ip("link", "set", veth + "p", "netns", ns)
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", veth + "p")
                _ip("-n", ns, "link", "set", veth + "p", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "route", "add", "default", "via", f"{self.base}.1")
        except BaseException:
            self.close()
            raise
        log.info("network %s.0/24: %s", self.base, {h: self.address(h) for h in self.hosts})
        return self

    def isolate(self, host: str) -> None:
        """Cut the host off from every other host and from the test process."""
        _ip("link", "set", self.veth(host), "down")
        self._down.add(host)

    def heal(self, host: str | None = None) -> None:
        for h in ([host] if host else sorted(self._down)):
            _ip("link", "set", self.veth(h), "up")
            self._down.discard(h)

    @property
    def isolated(self) -> set[str]:
        return set(self._down)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for ns in self._made_ns:
            _ip("netns", "del", ns, check=False)   # takes the namespace's veth ends (and their peers) along
        for link in reversed(self._made_links):
            if _ip("link", "show", link, check=False).returncode == 0:
                _ip("link", "del", link, check=False)
        self._made_ns.clear()
        self._made_links.clear()

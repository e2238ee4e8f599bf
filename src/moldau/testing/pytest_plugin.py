"""The moldau pytest plugin: a real broker for a project's tests (registered through the ``pytest11`` entry
point as ``moldau``, so it is on wherever moldau is installed; ``-p no:moldau`` turns it off).

Fixtures (nothing starts unless a test asks for one of them):

* ``moldau_broker`` (session): an ``EmbeddedBroker``; ``.bootstrap_servers``, ``.create_topic()``,
  ``.expect_records(topic, n, timeout)``.
* ``moldau_topic``: a fresh topic per test (``@pytest.mark.moldau_topic(partitions=3, config={...})``),
  deleted after the test.
* ``moldau_admin``, ``moldau_producer``, ``moldau_consumer``: moldau's own clients for that broker, closed
  after the test (the consumer: a group of its own, ``auto.offset.reset=earliest``, not subscribed).

Options: ``--moldau-storage=memory|disk`` (default memory), ``--moldau-process`` (the broker in a child
process instead of a thread), ``--moldau-config KEY=VALUE`` (repeatable; also the ``moldau_config`` ini
option, one per line). With ``-v`` the terminal summary reports the broker's start cost: the total, then its
two parts (importing moldau's broker modules, which only the first start in a process pays, and the broker's
own start).

moldau's own modules (the broker, the client) are imported by Python's path finder, not through pytest's
assertion rewriter: pytest marks the whole package of a ``pytest11`` plugin for rewriting, which would parse
and rewrite some 200 modules of broker code that holds no test assertions (twice the plain import's cost,
paid on every run where bytecode is not cached). ``moldau.testing`` itself is still rewritten.

pytest-xdist: every worker is a process with its own session, so it starts its own broker (on its own free
port, with its own in-memory logs); topic names carry the worker's id. No state is shared between workers.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
import uuid
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import pytest

from .embedded import EmbeddedBroker

_STARTS = pytest.StashKey[list[str]]()
_PLAIN_IMPORTS = pytest.StashKey[bool]()


class _PlainImports:
    """A ``sys.meta_path`` finder placed before pytest's assertion rewriter: ``moldau.*`` modules other than
    ``moldau.testing`` get the spec Python's own path finder gives (what they get outside pytest)."""

    @staticmethod
    def find_spec(name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith("moldau.") or name.startswith("moldau.testing"):
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("moldau", "moldau broker fixtures (moldau.testing)")
    group.addoption("--moldau-storage", choices=("memory", "disk"), default=None,
                    help="where the moldau_broker fixture keeps its logs: memory (default; not durable) or "
                         "disk (a temporary directory)")
    group.addoption("--moldau-process", action="store_true", default=None,
                    help="run the moldau_broker fixture's broker in a child process instead of a thread")
    group.addoption("--moldau-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for moldau_broker (Kafka's keys; repeatable)")
    parser.addini("moldau_config", type="linelist", default=[],
                  help="broker settings for moldau_broker, KEY=VALUE per line")
    parser.addini("moldau_storage", default="memory", help="memory (default) or disk")
    parser.addini("moldau_process", type="bool", default=False, help="broker in a child process")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "moldau_topic(partitions=1, config=None): the partitions and topic configs of this test's "
        "moldau_topic fixture",
    )
    config.stash[_STARTS] = []
    # only where pytest rewrites assertions (not with --assert=plain), once per process (pytester's inline
    # runs configure again)
    add = config.getoption("assertmode", "rewrite") == "rewrite" and _PlainImports not in sys.meta_path
    if add:
        sys.meta_path.insert(0, _PlainImports)
    config.stash[_PLAIN_IMPORTS] = add


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_PLAIN_IMPORTS, False) and _PlainImports in sys.meta_path:
        sys.meta_path.remove(_PlainImports)


def _settings(config: pytest.Config) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in [*config.getini("moldau_config"), *config.getoption("moldau_config")]:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"moldau: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope="session")
def moldau_broker(pytestconfig: pytest.Config) -> Iterator[EmbeddedBroker]:
    """A moldau broker for the whole session (one per xdist worker)."""
    storage = pytestconfig.getoption("moldau_storage") or pytestconfig.getini("moldau_storage")
    if storage not in ("memory", "disk"):
        raise pytest.UsageError(f"moldau_storage: expected memory or disk, got {storage!r}")
    process = pytestconfig.getoption("moldau_process") or pytestconfig.getini("moldau_process")
    broker = EmbeddedBroker(memory=storage == "memory", process=bool(process), config=_settings(pytestconfig))
    broker.start()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    start = broker.start_seconds or 0.0
    parts = (f" (importing moldau's broker modules {broker.import_seconds:.3f} s, the broker's start "
             f"{start:.3f} s)" if broker.import_seconds >= 0.001 else "")
    pytestconfig.stash[_STARTS].append(
        f"moldau: broker ({broker.mode}) at {broker.bootstrap_servers} started in "
        f"{broker.import_seconds + start:.3f} s{parts}{f' (worker {worker})' if worker else ''}")
    try:
        yield broker
    finally:
        broker.stop()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = config.stash.get(_STARTS, [])
    if lines and config.getoption("verbose") > 0:
        for line in lines:
            terminalreporter.write_line(line)


def unique_name(request: pytest.FixtureRequest, prefix: str = "") -> str:
    """A topic or group name from the test's name, this xdist worker and a random suffix (<= 249 chars)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-.")[:120] or "test"
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return "-".join(p for p in (prefix, base, worker, uuid.uuid4().hex[:8]) if p)


@pytest.fixture
def moldau_topic(moldau_broker: EmbeddedBroker, request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of a topic created for this test (``@pytest.mark.moldau_topic(partitions=, config=)``),
    deleted after it."""
    marker = request.node.get_closest_marker("moldau_topic")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        kwargs.setdefault("partitions", marker.args[0])
    name = moldau_broker.create_topic(unique_name(request), kwargs.pop("partitions", None),
                                      config=kwargs.pop("config", None))
    if kwargs:
        raise pytest.UsageError(f"moldau_topic marker: unknown arguments {sorted(kwargs)}")
    try:
        yield name
    finally:
        if moldau_broker.running:
            moldau_broker.admin().delete_topics([name], raise_errors=False)


@pytest.fixture
def moldau_admin(moldau_broker: EmbeddedBroker) -> Iterator[Any]:
    """A ``moldau.Admin`` for the session's broker, closed after the test."""
    from moldau.client import Admin

    with Admin(bootstrap_servers=moldau_broker.bootstrap_servers) as admin:
        yield admin


@pytest.fixture
def moldau_producer(moldau_broker: EmbeddedBroker) -> Iterator[Any]:
    """A ``moldau.Producer`` (acks=all) for the session's broker, flushed and closed after the test."""
    from moldau.client import Producer

    with Producer(bootstrap_servers=moldau_broker.bootstrap_servers, acks="all") as producer:
        yield producer


@pytest.fixture
def moldau_consumer(moldau_broker: EmbeddedBroker, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A ``moldau.Consumer`` in a group of its own (``auto.offset.reset=earliest``), not yet subscribed;
    closed after the test."""
    from moldau.client import Consumer

    with Consumer(bootstrap_servers=moldau_broker.bootstrap_servers, group_id=unique_name(request, "group"),
                  auto_offset_reset="earliest") as consumer:
        yield consumer

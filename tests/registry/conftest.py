"""Schema registry tests: moldau's registry (moldau.registry) against a real broker process (the harness's
session broker, tests/harness/fixtures.py), driven over HTTP and by confluent-kafka's SchemaRegistryClient
and serializers.

The registry runs in a thread of the test process with its own event loop (``RegistryThread``), as
``moldau registry`` would run it; each module's registry keeps its state in a topic of its own so that the
modules do not see each other's subjects. ``test_registry_embedded.py`` starts the broker with
``schema.registry.listener`` and the default ``_schemas`` topic.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.fixtures import (  # the fixtures of this directory
    _session_broker_health,
    broker,
    broker_factory,
    kind,
    make_topic,
    module_broker_factory,
    topic,
)
from harness.registryutil import RegistryThread

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [i for i in items if _HERE in Path(str(i.fspath)).resolve().parents]
    if not os.environ.get("MOLDAU_REGISTRY_FULL"):
        skip = pytest.mark.skip(reason="a longer registry test: run with MOLDAU_REGISTRY_FULL=1")
        for item in mine:
            if item.get_closest_marker("registry_full"):
                item.add_marker(skip)


@pytest.fixture(scope="module")
def schemas_topic() -> str:
    return f"_schemas-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def registry(broker: Any, schemas_topic: str) -> Iterator[RegistryThread]:
    r = RegistryThread(broker.bootstrap, topic=schemas_topic).start()
    try:
        yield r
    finally:
        r.stop()

"""Schema registry tests: moldau's registry (moldau.registry) against a real broker process (the integration
harness's session broker), driven over HTTP and by confluent-kafka's SchemaRegistryClient and serializers.

The registry runs in a thread of the test process with its own event loop (``RegistryThread``), as
``moldau registry`` would run it; each module's registry keeps its state in a topic of its own so that the
modules do not see each other's subjects. ``test_registry_embedded.py`` starts the broker with
``schema.registry.listener`` and the default ``_schemas`` topic.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
if str(_INTEGRATION) not in sys.path:
    sys.path.insert(0, str(_INTEGRATION))

_spec = importlib.util.spec_from_file_location(
    "_moldau_integration_conftest_registry", _INTEGRATION / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_harness)

kind = _harness.kind
broker = _harness.broker
make_topic = _harness.make_topic
topic = _harness.topic
broker_factory = _harness.broker_factory
module_broker_factory = _harness.module_broker_factory
_session_broker_health = _harness._session_broker_health

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from registryutil import RegistryThread  # noqa: E402 - found through the sys.path entry above


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [i for i in items if _HERE in Path(str(i.fspath)).resolve().parents]
    _harness.pytest_collection_modifyitems(config, mine)
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

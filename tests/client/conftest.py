"""moldau client tests against a real broker process.

Reuses the integration harness (tests/integration/conftest.py: the ``broker`` fixture parametrized by
``MOLDAU_TEST_BROKER=moldau|tansu``, ``make_topic``, markers) instead of starting brokers another way.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

_INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
if str(_INTEGRATION) not in sys.path:
    sys.path.insert(0, str(_INTEGRATION))

_spec = importlib.util.spec_from_file_location("_moldau_integration_conftest", _INTEGRATION / "conftest.py")
assert _spec is not None and _spec.loader is not None
_harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_harness)

# fixtures of the harness, available to the tests in this directory
kind = _harness.kind
broker = _harness.broker
broker_factory = _harness.broker_factory
fresh_broker = _harness.fresh_broker
module_broker_factory = _harness.module_broker_factory
topic = _harness.topic
make_topic = _harness.make_topic

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # apply the harness's moldau_only / tansu_gap handling to this directory's tests only (the
    # integration directory's own conftest handles its tests when both run in one session)
    mine = [i for i in items if _HERE in Path(str(i.fspath)).resolve().parents]
    _harness.pytest_collection_modifyitems(config, mine)


@pytest.fixture
def group_id(request: pytest.FixtureRequest) -> str:
    return f"g-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def conf(broker: Any) -> dict[str, Any]:
    """Base client configuration for the broker under test (quick group timeouts)."""
    return {"bootstrap.servers": broker.bootstrap}


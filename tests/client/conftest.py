"""moldau client tests against a real broker process.

Reuses the harness's broker fixtures (tests/harness/fixtures.py: the ``broker`` fixture of the broker under
test, ``MOLDAU_TEST_BROKER=moldau|tansu|...``, ``make_topic``) instead of starting brokers another way.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from harness.fixtures import (  # the fixtures of this directory
    broker,
    broker_factory,
    fresh_broker,
    kind,
    make_topic,
    module_broker_factory,
    topic,
)


@pytest.fixture
def group_id(request: pytest.FixtureRequest) -> str:
    return f"g-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def conf(broker: Any) -> dict[str, Any]:
    """Base client configuration for the broker under test (quick group timeouts)."""
    return {"bootstrap.servers": broker.bootstrap}


"""Integration tests: a real broker process (``MOLDAU_TEST_BROKER=moldau|tansu|cluster|memory|kafka``)
driven by real clients. The fixtures are the harness's (tests/harness/fixtures.py says what each does)."""

from __future__ import annotations

from harness.fixtures import (  # the fixtures of this directory
    _session_broker_health,
    broker,
    broker_factory,
    fresh_broker,
    kcat,
    kind,
    make_topic,
    module_broker_factory,
    topic,
)

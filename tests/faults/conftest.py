"""The fault bench's CI tests: skipped (with the reason) where ZooKeeper is not installed; in network
namespaces where this process may make them (root, iproute2), else on loopback with process faults only."""

from __future__ import annotations

import pytest

from moldau.broker.cluster.local import zookeeper_installed


@pytest.fixture
def need_zookeeper() -> None:
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed (scripts/setup.sh --test installs Debian's zookeeper)")

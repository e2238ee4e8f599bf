"""The fuzz tests' broker: one per module (a crash must not take other modules' tests along)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import FuzzBroker


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzBroker]:
    broker = FuzzBroker(tmp_path_factory.mktemp("fuzz"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()

"""JVM peer tests: Kafka's Java clients and command-line tools against moldau, run with ``java -cp``. The
fixtures (``target``, ``jtopic``, ``jrun``, ``jstart``) are the harness's (tests/harness/jvmtarget.py).

The whole matrix (every row against every target) is behind ``MOLDAU_JVM_FULL=1``::

    MOLDAU_JVM_FULL=1 .venv/bin/python -m pytest -q tests/jvm
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.jvmtarget import jrun, jstart, jtopic, target  # the fixtures of this directory

FULL = bool(os.environ.get("MOLDAU_JVM_FULL"))

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    skip = pytest.mark.skip(reason="whole JVM matrix only: MOLDAU_JVM_FULL=1 runs it")
    for item in items:
        if item.get_closest_marker("jvm_full") is not None and str(_HERE) in str(item.fspath):
            item.add_marker(skip)

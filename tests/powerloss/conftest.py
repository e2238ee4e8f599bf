"""Power-loss tests: skipped, with the reason, only where a FUSE file system cannot be mounted here."""

from __future__ import annotations

import pytest

from .lazyfs import fuse_unavailable


@pytest.fixture
def require_fuse() -> None:
    reason = fuse_unavailable()
    if reason:
        pytest.skip(f"no lazy file system: {reason}")

"""examples/pytest-project's own tests, run by pytest as its README says (the plugin from this install);
tests/testing/test_wheel.py runs them again from a clean virtualenv with the built wheel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "pytest-project"


def test_example_project_tests_pass() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"], cwd=PROJECT,
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-2000:]
    assert "4 passed" in res.stdout
    assert "moldau: broker (thread/memory)" in res.stdout

"""The code of docs/testing.md runs as written: its pytest examples as a new project's test file, its
unittest example with ``python -m unittest``, its notebook example (without Spark: tests/testing/test_wheel.py
runs the Spark part) as a script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def _block(marker: str) -> str:
    (found,) = [b for b in _blocks() if marker in b]
    return found


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_pytest_examples(tmp_path: Path) -> None:
    sync = _block("def test_orders_are_published")
    async_ = _block("def test_async_producer")
    (tmp_path / "test_doc.py").write_text(sync + "\n\n" + async_)
    res = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], tmp_path)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "2 passed" in res.stdout


def test_unittest_example(tmp_path: Path) -> None:
    (tmp_path / "test_orders.py").write_text(_block("class OrdersTest(unittest.TestCase)"))
    res = _run([sys.executable, "-W", "ignore::DeprecationWarning", "-m", "unittest", "-v", "test_orders"],
               tmp_path)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "test_round_trip" in res.stderr and "OK" in res.stderr


def test_notebook_example(tmp_path: Path) -> None:
    code = _block("broker.create_topic(\"clicks\", 3)")
    script = code + "\nassert len(records) == 100, len(records)\nbroker.stop()\nprint('notebook ok')\n"
    (tmp_path / "notebook.py").write_text(script)
    res = _run([sys.executable, "notebook.py"], tmp_path)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "notebook ok" in res.stdout

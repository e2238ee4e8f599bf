"""moldau as its users get it: the wheel and the sdist built by the standard build backend
(``python -m build``), the wheel installed with its ``spark`` extra into a clean virtualenv (no system site
packages, not this checkout), then from there: ``moldau broker --help``, ``moldau console --help``, the Spark
data source imported, and the pytest plugin's own tests and the example project's tests run by that venv's
pytest, in directories outside this checkout.

pip's cache makes the installs quick after the first run; ``MOLDAU_TEST_SKIP_WHEEL=1`` skips the module (no
network and no cache)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(bool(os.environ.get("MOLDAU_TEST_SKIP_WHEEL")),
                                reason="MOLDAU_TEST_SKIP_WHEEL is set")


def _run(cmd: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> str:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHONPATH"))}
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env={**base, **(env or {})})
    assert res.returncode == 0, f"{' '.join(cmd)} exited with {res.returncode}:\n" \
                                f"{res.stdout[-5000:]}\n{res.stderr[-5000:]}"
    return res.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (w,) = dist.glob("moldau-*.whl")
    return w


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Path]:
    venv = tmp_path_factory.mktemp("clean") / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # what a user installs: the wheel with the Spark extra, pytest, and the clients of their application
    _run([*pip, f"{wheel}[spark]", "pytest", "confluent-kafka", "kafka-python", "aiokafka"], cwd=venv.parent)
    yield venv
    shutil.rmtree(venv, ignore_errors=True)


def test_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        ep = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = z.read(ep).decode()
    for wanted in ("moldau/testing/pytest_plugin.py", "moldau/testing/embedded.py", "moldau/broker/memory.py",
                   "moldau/py.typed", "moldau/console/templates/base.html"):
        assert wanted in names, wanted
    assert "[pytest11]\nmoldau = moldau.testing.pytest_plugin" in entry_points
    assert "[console_scripts]\nmoldau = moldau.cli.main:main" in entry_points
    assert not [n for n in names if n.startswith(("tests/", "examples/"))]


def test_sdist_contents(dist: Path) -> None:
    (sdist,) = dist.glob("moldau-*.tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for wanted in ("pyproject.toml", "README.md", "src/moldau/testing/pytest_plugin.py",
                   "src/moldau/console/templates/base.html"):
        assert wanted in names, wanted


def test_commands_from_the_clean_venv(clean_venv: Path, tmp_path: Path) -> None:
    moldau = str(clean_venv / "bin" / "moldau")
    assert "--data-dir" in _run([moldau, "broker", "--help"], cwd=tmp_path)
    assert "console" in _run([moldau, "console", "--help"], cwd=tmp_path)
    where = _run([str(clean_venv / "bin" / "python"), "-c",
                  "import moldau, moldau.spark, pyspark, pyarrow; print(moldau.__file__)"], cwd=tmp_path)
    assert where.strip().startswith(str(clean_venv)), where  # the wheel's copy, not this checkout


def test_plugin_tests_from_the_clean_venv(clean_venv: Path, tmp_path: Path) -> None:
    shutil.copy(HERE / "test_plugin.py", tmp_path / "test_plugin.py")
    out = _run([str(clean_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "--rootdir", str(tmp_path), "-W", "ignore::DeprecationWarning", "test_plugin.py"],
               cwd=tmp_path, timeout=900)
    assert " passed" in out and "failed" not in out, out[-3000:]


def test_example_project_from_the_clean_venv(clean_venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "pytest-project"
    shutil.copytree(ROOT / "examples" / "pytest-project", project)
    out = _run([str(clean_venv / "bin" / "python"), "-m", "pytest", "-v", "-p", "no:cacheprovider"],
               cwd=project, timeout=600)
    assert "4 passed" in out, out[-3000:]
    assert "moldau: broker (thread/memory)" in out

"""moldau as its users get it: the wheel and the sdist built by the standard build backend
(``python -m build``), the wheel installed into a clean virtualenv (no system site packages, not this
checkout), then from there: ``moldau broker --help``, ``moldau console --help``, and the pytest plugin's own
tests and the example project's tests run by that venv's pytest, in directories outside this checkout.

``MOLDAU_TEST_WHEEL_SPARK=1`` installs the wheel with its ``spark`` extra (``pip install 'moldau[spark]'``)
and imports the Spark data source from there too: pyspark is a large download and unpack (about 4 minutes
more on a loaded 2-core machine even from pip's cache), so it is not in the default run. pip's cache makes
the installs quick after the first run; ``MOLDAU_TEST_SKIP_WHEEL=1`` skips the module (no network and no
cache)."""

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

pytestmark = [
    pytest.mark.skipif(bool(os.environ.get("MOLDAU_TEST_SKIP_WHEEL")),
                       reason="MOLDAU_TEST_SKIP_WHEEL is set"),
    # the build and the clean venv's installs are module fixtures, paid by the first test; on a loaded
    # 2-core machine they took 72 s and 252 s (pyspark: more), beyond the suite's 300 s default
    pytest.mark.timeout(1800),
]
WITH_SPARK = bool(os.environ.get("MOLDAU_TEST_WHEEL_SPARK"))


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
    # what a user installs: the wheel (the Spark extra when asked), pytest, their application's clients
    target = f"{wheel}[spark]" if WITH_SPARK else str(wheel)
    _run([*pip, target, "pytest", "confluent-kafka", "kafka-python", "aiokafka"], cwd=venv.parent)
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
    where = _run([str(clean_venv / "bin" / "python"), "-c", "import moldau; print(moldau.__file__)"],
                 cwd=tmp_path)
    assert where.strip().startswith(str(clean_venv)), where  # the wheel's copy, not this checkout


@pytest.mark.skipif(not WITH_SPARK, reason="the spark extra: MOLDAU_TEST_WHEEL_SPARK=1 (a large install)")
def test_spark_extra_from_the_clean_venv(clean_venv: Path, tmp_path: Path) -> None:
    """docs/testing.md's notebook example: an embedded broker, moldau's producer, a Spark batch read."""
    script = tmp_path / "notebook.py"
    script.write_text(SPARK_NOTEBOOK)
    out = _run([str(clean_venv / "bin" / "python"), str(script)], cwd=tmp_path)
    assert "rows 10 from " + str(clean_venv) in out, out[-3000:]


SPARK_NOTEBOOK = """
import moldau
import moldau.spark
from moldau.testing import EmbeddedBroker
from pyspark.sql import SparkSession

with EmbeddedBroker() as broker:
    broker.create_topic("clicks", 2)
    with moldau.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        for i in range(10):
            p.send("clicks", b"page-%d" % (i % 3), key=b"user-%d" % i)
        p.flush()
    spark = (SparkSession.builder.master("local[1]").config("spark.driver.memory", "512m")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        moldau.spark.register(spark)
        df = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", "clicks").load())
        print("rows", df.count(), "from", moldau.spark.__file__)
    finally:
        spark.stop()
"""


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

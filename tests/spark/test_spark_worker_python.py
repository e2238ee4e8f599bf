"""PySpark's workers run an interpreter that can import moldau, whatever interpreter the user runs.

Without PYSPARK_PYTHON, PySpark starts its Python workers with ``python3`` from PATH. After the README's
setup without activating the virtualenv, that is an interpreter without moldau: these tests put such an
interpreter first on PATH (a bare virtualenv's ``python3``), drop PYSPARK_PYTHON, and run the example
pipeline and a batch read from the project's interpreter in a fresh process (a fresh local session).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path
from typing import Any

import pytest

import moldau.spark
from moldau.spark.workers import WorkerPythonError, ensure_worker_python, is_local_master

_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare virtualenv's bin directory: its python3 cannot import moldau (checked)."""
    d = tmp_path_factory.mktemp("bare-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True, system_site_packages=False).create(d)
    bindir = d / "bin"
    r = subprocess.run([str(bindir / "python3"), "-c", "import moldau"], capture_output=True, text=True, check=False)
    assert r.returncode != 0 and "No module named 'moldau'" in r.stderr, r
    return bindir


def _user_env(bare_bin: Path) -> dict[str, str]:
    """The environment of a user who did not activate the virtualenv: PATH's python3 lacks moldau."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(Path(sys.executable).parent)
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != venv_bin]
    env["PATH"] = os.pathsep.join([str(bare_bin), *rest])
    return env


def test_is_local_master():
    for m in ("local", "local[2]", "local[*]", "local[2,3]", "local-cluster[2,1,1024]"):
        assert is_local_master(m), m
    for m in ("spark://host:7077", "yarn", "k8s://https://k:443", "localhost", "locally"):
        assert not is_local_master(m), m


def test_unset_interpreter_becomes_the_drivers(spark: Any, monkeypatch: pytest.MonkeyPatch):
    sc = spark.sparkContext
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(sc, "pythonExec", "python3")  # what a context started without PYSPARK_PYTHON has
    assert ensure_worker_python(spark) == sys.executable
    assert sc.pythonExec == sys.executable


def test_explicit_interpreter_without_moldau_is_refused_in_one_line(spark: Any, bare_python: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    sc = spark.sparkContext
    bad = str(bare_python / "python3")
    monkeypatch.setenv("PYSPARK_PYTHON", bad)
    monkeypatch.setattr(sc, "pythonExec", bad)
    with pytest.raises(WorkerPythonError) as ei:
        moldau.spark.register(spark)
    msg = str(ei.value)
    assert "\n" not in msg
    assert bad in msg and "No module named 'moldau'" in msg and f"PYSPARK_PYTHON={sys.executable}" in msg
    assert sc.pythonExec == bad  # an explicit choice is reported, not overridden
    monkeypatch.setenv("PYSPARK_PYTHON", "no-such-python-here")
    monkeypatch.setattr(sc, "pythonExec", "no-such-python-here")
    with pytest.raises(WorkerPythonError, match="not an executable"):
        moldau.spark.register(spark)


def test_clickstream_demo_runs_with_a_python3_on_path_that_lacks_moldau(bare_python: Path, tmp_path: Path):
    env = _user_env(bare_python)
    r = subprocess.run([sys.executable, str(_ROOT / "examples" / "clickstream.py"), "demo", "--events", "3000",
                        "--workdir", str(tmp_path / "demo")],
                       env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=280, check=False)
    assert r.returncode == 0, r.stderr[-4000:]
    report = json.loads(r.stdout[r.stdout.index("{"):])
    assert report["events"] == 3000 and report["windows"] > 5, report
    assert report["parquet_matches"] and report["topic_matches"], report


_BATCH_READ = textwrap.dedent("""
    import json, os, sys
    assert "PYSPARK_PYTHON" not in os.environ
    from pyspark.sql import SparkSession
    import moldau.spark
    spark = (SparkSession.builder.master("local[2]").appName("fresh")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    moldau.spark.register(spark)
    df = (spark.read.format("moldau").option("kafka.bootstrap.servers", sys.argv[1])
          .option("subscribe", sys.argv[2]).load())
    rows = df.selectExpr("cast(value as string) v", "partition").collect()
    print(json.dumps({"values": sorted(r.v for r in rows), "partitions": sorted({r.partition for r in rows}),
                      "worker_python": spark.sparkContext.pythonExec}))
    spark.stop()
""")


def test_batch_read_in_a_fresh_local_session_without_pyspark_python(broker: Any, make_topic: Any,
                                                                     bare_python: Path, tmp_path: Path):
    from moldau.client import Producer

    name = make_topic(partitions=3)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(300):
            p.send(name, f"v{i:03d}".encode(), key=str(i).encode())
        p.flush()
    script = tmp_path / "read.py"
    script.write_text(_BATCH_READ)
    r = subprocess.run([sys.executable, str(script), broker.bootstrap, name], env=_user_env(bare_python),
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["values"] == [f"v{i:03d}" for i in range(300)]
    assert out["partitions"] == [0, 1, 2]
    assert out["worker_python"] == sys.executable

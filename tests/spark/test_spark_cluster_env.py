"""Shipping moldau to executors: ``moldau.spark.pack`` and a Spark standalone cluster using it.

The pack tests run in the default suite (no Spark). The cluster test starts a standalone master and worker
(pyspark's own launch classes, loopback) whose ``python3`` on PATH lacks moldau, packs this environment,
and runs a batch read and write through ``format("moldau")`` with ``spark.archives`` and
``PYSPARK_PYTHON=./environment/bin/python``, as docs/spark.md ("On a cluster") says. It takes about two
minutes on two cores, so it runs only with ``MOLDAU_SPARK_CLUSTER_TESTS=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
import venv
from pathlib import Path
from typing import Any

import pytest

from moldau.spark import pack
from moldau.spark.workers import WorkerPythonError, ensure_worker_python

_HERE = Path(__file__).resolve().parent


def _bare_env(tmp: Path) -> dict[str, str]:
    d = tmp / "bare-venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(d)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(Path(sys.executable).parent)
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != venv_bin]
    env["PATH"] = os.pathsep.join([str(d / "bin"), *rest])
    return env


def test_distributions_follow_the_requirements_and_leave_out_spark_itself():
    names = set(pack.distributions("moldau", ("spark",)))
    assert {"moldau", "crc32c", "cramjam", "pyarrow", "numpy", "pandas"} <= names
    assert "pyspark" not in names and "py4j" not in names
    assert "pytest" not in names and "confluent-kafka" not in names  # the test extra was not asked for
    assert {"moldau", "crc32c", "cramjam"} <= set(pack.distributions("moldau", ()))
    assert "pyarrow" not in set(pack.distributions("moldau", ()))


def test_packed_environment_imports_moldau_elsewhere(tmp_path: Path):
    out = pack.pack_environment(tmp_path / "env.tar.gz", extras=())  # runtime deps only: quick
    with tarfile.open(out) as t:
        names = set(t.getnames())
    assert "pyvenv.cfg" in names and "bin/python" in names
    site = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    assert f"{site}/moldau/__init__.py" in names
    assert not any("__pycache__" in n for n in names)
    env_dir = pack.unpack(out, tmp_path / "x" / "environment")
    code = ("import moldau, moldau.protocol, crc32c, cramjam, sys; "
            "print(moldau.__file__); print(sys.prefix)")
    r = subprocess.run([str(env_dir / "bin" / "python"), "-c", code], env=_bare_env(tmp_path),
                       cwd=str(tmp_path / "x"), capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    mod, prefix = r.stdout.split()
    assert Path(mod).is_relative_to(env_dir) and Path(prefix) == env_dir


def test_relative_worker_python_missing_on_the_driver_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path):
    class _Conf:
        def get(self, key: str, default: Any = None) -> Any:
            return default

    class _Sc:
        master = "spark://127.0.0.1:7077"
        pythonExec = "./environment/bin/python"

        def getConf(self) -> _Conf:  # PySpark's name
            return _Conf()

    class _Session:
        sparkContext = _Sc()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYSPARK_PYTHON", "./environment/bin/python")
    with pytest.raises(WorkerPythonError) as ei:
        ensure_worker_python(_Session())
    assert "\n" not in str(ei.value) and "--unpack environment" in str(ei.value)
    (tmp_path / "environment" / "bin").mkdir(parents=True)
    (tmp_path / "environment" / "bin" / "python").symlink_to(sys.executable)
    assert ensure_worker_python(_Session()) == "./environment/bin/python"


_DRIVER = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    import moldau.spark
    master, archive, bootstrap, src, dst = sys.argv[1:6]
    spark = (SparkSession.builder.master(master).appName("moldau-cluster-env")
             .config("spark.archives", archive + "#environment")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m").config("spark.cores.max", "2")
             .config("spark.ui.enabled", "false").getOrCreate())
    moldau.spark.register(spark)
    df = (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", src).load())
    values = sorted(r.v for r in df.selectExpr("cast(value as string) v").collect())
    df.selectExpr("key", "value").write.format("moldau").mode("append") \\
        .option("kafka.bootstrap.servers", bootstrap) \\
        .option("topic", dst).save()

    def where(_):
        import moldau, sys
        yield (moldau.__file__, sys.prefix)

    places = sorted(set(spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()))
    print(json.dumps({"values": values, "places": places}))
    spark.stop()
""")


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MOLDAU_SPARK_CLUSTER_TESTS"),
                    reason="a standalone Spark cluster, about 2 minutes: MOLDAU_SPARK_CLUSTER_TESTS=1")
def test_standalone_cluster_with_the_packed_environment(broker: Any, make_topic: Any, tmp_path: Path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    from harness.spark_cluster import StandaloneCluster

    src, dst = make_topic(partitions=3), make_topic(partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(500):
        p.produce(src, f"v{i:03d}".encode(), key=str(i).encode())
    p.flush(30)
    env = _bare_env(tmp_path)
    drv = tmp_path / "driver"
    drv.mkdir()
    r = subprocess.run([sys.executable, "-m", "moldau.spark.pack", "moldau-env.tar.gz", "--unpack",
                        "environment"],
                       cwd=str(drv), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    (drv / "app.py").write_text(_DRIVER)
    with StandaloneCluster(tmp_path / "cluster", env=env) as cluster:
        r = subprocess.run([sys.executable, "app.py", cluster.master_url, "moldau-env.tar.gz",
                            broker.bootstrap, src, dst], cwd=str(drv),
                           env=dict(env, PYSPARK_PYTHON="./environment/bin/python"), capture_output=True,
                           text=True, timeout=400, check=False)
    assert r.returncode == 0, r.stderr[-5000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["values"] == [f"v{i:03d}" for i in range(500)]
    work = str(tmp_path / "cluster" / "work")
    for mod, prefix in out["places"]:  # executors: moldau from the archive unpacked in their work directory
        assert mod.startswith(work) and "/environment/" in mod and prefix.endswith("/environment"), out
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cluster-env-check",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(dst, i, 0) for i in range(2)])
    got: list[str] = []
    for _ in range(60):
        got += [m.value().decode() for m in c.consume(500, 1.0) if m.error() is None]
        if len(got) >= 500:
            break
    c.close()
    assert sorted(got) == [f"v{i:03d}" for i in range(500)]

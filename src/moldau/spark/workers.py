"""Which Python interpreter PySpark's workers run, and whether it can import moldau.

PySpark starts the Python workers that run a data source's planning, reading and writing with the
interpreter in the Python function it was given when the data source was registered: the SparkContext's
``pythonExec``, taken from ``PYSPARK_PYTHON`` when the context started, ``python3`` from PATH otherwise (not
the interpreter of the driver). A user who runs ``.venv/bin/python app.py`` without activating the virtualenv
gets workers in the system's ``python3``, which cannot import moldau, and a ``ModuleNotFoundError`` from
every task. In local mode the workers run on this machine, so the driver's interpreter is the right one.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["WorkerPythonError", "ensure_worker_python", "is_local_master"]

_CHECK = "import sys, moldau; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"


class WorkerPythonError(RuntimeError):
    """The interpreter configured for PySpark's workers cannot run the moldau data source."""


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[N,F]``, ``local[*]`` and ``local-cluster[...]``: workers on this host."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def ensure_worker_python(spark: Any) -> str | None:
    """Make the session's Python workers able to import moldau; returns the interpreter they will run.

    Local master, nothing configured: the SparkContext's ``pythonExec`` becomes ``sys.executable`` (every
    Python function created from now on, the data source registered next included, runs there). Local
    master, an interpreter configured (``PYSPARK_PYTHON`` or ``spark.pyspark.python``) that is not this one:
    it is started once to check that it imports moldau with the driver's Python version, else
    :class:`WorkerPythonError` names what to set. Other masters are left alone (the executors' Python is
    the cluster's business: docs/spark.md, "On a cluster"). Spark Connect sessions have no SparkContext
    here and are left alone too. Returns None when nothing could be decided.
    """
    try:
        sc = spark.sparkContext
        master = str(sc.master)
    except Exception:  # noqa: BLE001 - Spark Connect (no SparkContext): the workers belong to the server
        return None
    configured_env = os.environ.get("PYSPARK_PYTHON")
    configured_conf = sc.getConf().get("spark.pyspark.python")
    current = getattr(sc, "pythonExec", None) or "python3"
    if not is_local_master(master):
        if not configured_env and not configured_conf:
            log.info("master %s: executors run %r (PYSPARK_PYTHON unset); it must import moldau "
                     "(docs/spark.md, 'On a cluster')", master, current)
        elif _is_relative_path(current) and not os.path.exists(current):
            # executors find it in the archive unpacked in their working directory; the driver's own
            # Python workers (a data source's planning) look for it in the driver's working directory
            raise WorkerPythonError(
                f"PySpark's workers are set to run {current!r}, which does not exist in the driver's working "
                f"directory {os.getcwd()}: the driver runs the data source's planning with it too; unpack "
                f"the archive given to spark.archives there (python -m moldau.spark.pack ARCHIVE --unpack "
                f"{Path(current).parts[0]})")
        return current
    if not configured_env and not configured_conf:
        if current != sys.executable:
            log.info("local master %s: PySpark's workers will run %s (the driver's interpreter) instead of "
                     "%r from PATH", master, sys.executable, current)
            sc.pythonExec = sys.executable
        return sys.executable
    source = "PYSPARK_PYTHON" if configured_env else "spark.pyspark.python"
    if configured_conf and not configured_env and current != configured_conf:
        # set on the session builder: spark-submit would have exported it as PYSPARK_PYTHON, a session
        # started from plain Python leaves it to the JVM's own launcher and runs python3 from PATH
        sc.pythonExec = current = configured_conf
    _check_interpreter(current, source)
    return current


def _check_interpreter(exe: str, source: str) -> None:
    if _same_file(exe, sys.executable):
        return
    path = shutil.which(exe)
    if path is None:
        raise WorkerPythonError(
            f"PySpark's workers are set to run {exe!r} ({source}), which is not an executable here: "
            f"set PYSPARK_PYTHON={sys.executable} before the session starts")
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    try:
        r = subprocess.run([path, "-c", _CHECK], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkerPythonError(
            f"PySpark's workers are set to run {exe!r} ({source}), which could not be started ({exc}): "
            f"set PYSPARK_PYTHON={sys.executable} before the session starts") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise WorkerPythonError(
            f"PySpark's workers are set to run {exe!r} ({source}), which cannot import moldau ({last}): "
            f"set PYSPARK_PYTHON={sys.executable} before the session starts, or install 'moldau[spark]' "
            f"into that interpreter")
    got = r.stdout.strip()
    if got != want:
        raise WorkerPythonError(
            f"PySpark's workers are set to run {exe!r} ({source}), Python {got}, but the driver runs Python "
            f"{want}: set PYSPARK_PYTHON={sys.executable} before the session starts")


def _is_relative_path(exe: str) -> bool:
    return os.sep in exe and not os.path.isabs(exe)


def _same_file(a: str, b: str) -> bool:
    # not os.path.samefile: a virtualenv's python is a symlink to the base interpreter, another environment
    return os.path.abspath(shutil.which(a) or a) == os.path.abspath(b)

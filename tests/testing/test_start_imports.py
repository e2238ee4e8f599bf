"""What a first broker start imports into a fresh interpreter (its cost is the session's start cost the
plugin reports; bench/embedded_broker.py --first-start measures it): the broker and moldau's client, not
the Spark source, the console, the CLI, pytest or a handler module before its API's first request; and inside
pytest, moldau's broker modules through Python's own loader, not pytest's assertion rewriter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

FIRST_START = textwrap.dedent("""
    import json, sys
    from moldau.testing import EmbeddedBroker

    with EmbeddedBroker() as b:
        started = sorted(sys.modules)
        b.create_topic("t")
        after_topic = sorted(sys.modules)
    print(json.dumps({"started": started, "after_topic": after_topic}))
""")

NOT_AT_START = ("pyspark", "py4j", "moldau.spark", "moldau.console", "moldau.cli", "moldau.aio", "uvloop",
                "pytest", "moldau.broker.cluster", "moldau.broker.kafka07", "moldau.broker.handlers.k")


def _imported(names: list[str], prefix: str) -> list[str]:
    start = prefix if prefix.endswith(".k") else prefix + "."  # ".k": the handler modules kNN_*
    return [n for n in names if n == prefix or n.startswith(start)]


def test_first_start_imports_only_what_it_needs() -> None:
    res = subprocess.run([sys.executable, "-c", FIRST_START], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    mods = json.loads(res.stdout.strip().splitlines()[-1])
    started, after = mods["started"], mods["after_topic"]
    assert "moldau.broker.broker" in started and "moldau.client" in started
    for prefix in NOT_AT_START:
        assert _imported(started, prefix) == [], prefix
    # the admin client's requests loaded their APIs' handlers, and only those
    handlers = {n.rsplit(".", 1)[1] for n in _imported(after, "moldau.broker.handlers.k")}
    assert {"k18_api_versions", "k19_create_topics", "k03_metadata"} <= handlers
    assert not handlers & {"k00_produce", "k04_leader_and_isr", "k27_write_txn_markers",
                           "k56_alter_partition"}


def test_plugin_imports_broker_modules_without_assertion_rewriting(tmp_path: Path) -> None:
    (tmp_path / "test_loaders.py").write_text(textwrap.dedent("""
        import sys

        def test_loaders(moldau_broker):
            loader = lambda name: type(sys.modules[name].__loader__).__name__
            assert loader("moldau.broker.broker") == "SourceFileLoader"
            assert loader("moldau.broker.router") == "SourceFileLoader"
            assert loader("moldau.client.admin") == "SourceFileLoader"
            assert loader("moldau.testing.pytest_plugin") == "AssertionRewritingHook"
        """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "moldau: broker (thread/memory)" in res.stdout

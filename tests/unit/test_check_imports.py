"""tools/check_imports.py: no import cycle anywhere in moldau (and the checker finds cycles, including
type-only and function-level imports, in any subpackage)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_imports.py"


def _tool():
    spec = importlib.util.spec_from_file_location("check_imports", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_imports"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_moldau_has_no_import_cycle():
    r = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "no import cycle" in r.stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_detects_a_type_checking_cycle_in_broker(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/broker/__init__.py": "",
        "pkg/broker/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        "pkg/broker/b.py": "def f():\n    from pkg.broker import a\n",
        "pkg/broker/c.py": "from . import a\n",
    })
    r = subprocess.run([sys.executable, str(TOOL), str(tmp_path), "--package", "pkg"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert "import cycle: pkg.broker.a <-> pkg.broker.b" in r.stderr
    assert "pkg.broker.c" not in r.stderr


def test_graph_resolves_relative_imports_and_reports_cycles_outside_broker_log_client(tmp_path):
    """A cycle in any subpackage (here ``pkg.x`` with the top-level ``pkg.z``) fails: no waivers."""
    tool = _tool()
    _write(tmp_path, {
        "pkg/__init__.py": "from .x import y\n",
        "pkg/x/__init__.py": "",
        "pkg/x/y.py": "from .. import z\n",
        "pkg/z.py": "import pkg.x.y as yy\n",
        "pkg/log/__init__.py": "from .m import M\n",
        "pkg/log/m.py": "X = 1\n",
    })
    graph = tool.build_graph(tmp_path, "pkg")
    assert graph["pkg"] == {"pkg.x.y"}
    assert graph["pkg.x.y"] == {"pkg.z"}
    assert graph["pkg.z"] == {"pkg.x.y"}
    assert graph["pkg.log"] == {"pkg.log.m"}
    assert tool.problems(graph) == ["import cycle: pkg.x.y <-> pkg.z"]
    r = subprocess.run([sys.executable, str(TOOL), str(tmp_path), "--package", "pkg"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert "import cycle: pkg.x.y <-> pkg.z" in r.stderr


def test_the_client_and_the_record_codecs_have_no_cycle():
    """No waivers: membership and the transaction manager talk to the consumer and the producer through
    narrow interfaces (client/subscription.py, transactions.ProducerHooks); the v2 and legacy record codecs
    share ``records.record`` and their conversions live in ``records.convert``, which neither imports."""
    tool = _tool()
    assert not hasattr(tool, "ACCEPTED")
    graph = tool.build_graph(ROOT / "src", "moldau")
    assert "moldau.client.consumer" not in graph["moldau.client.group"]
    assert "moldau.client.producer" not in graph["moldau.client.transactions"]
    assert "moldau.protocol.records.batch" not in graph["moldau.protocol.records.legacy"]
    assert "moldau.protocol.records.convert" not in graph["moldau.protocol.records.batch"]
    assert "moldau.protocol.records.convert" not in graph["moldau.protocol.records.legacy"]
    assert tool.problems(graph) == []

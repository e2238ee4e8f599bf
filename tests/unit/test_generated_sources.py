"""The generated hot loops (tools/gen_hot_paths.py) are the committed files, and they are what runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gen_hot_paths.py"


def _tool():
    spec = importlib.util.spec_from_file_location("gen_hot_paths", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_hot_paths"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_generated_files_match_their_templates():
    tool = _tool()
    assert tool.generate(check=True) == 0, "run tools/gen_hot_paths.py"


def test_the_generated_code_is_what_runs():
    from moldau.client import _send
    from moldau.client.producer import AsyncProducer
    from moldau.protocol.records import _section_loops, batch

    assert AsyncProducer.send is _send.send and AsyncProducer.send_blocking is _send.send_blocking
    assert batch._records_some.__code__.co_filename == _section_loops.__file__
    assert batch._tuples_some.__code__.co_filename == _section_loops.__file__


def test_check_fails_on_drift(tmp_path, monkeypatch):
    tool = _tool()
    target = tmp_path / "_send.py"
    target.write_text(tool.send_source().replace("raise _Slow", "pass", 1), encoding="utf-8")
    monkeypatch.setattr(tool, "outputs", lambda: {target: tool.send_source()})
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.generate(check=True) == 1
    assert tool.generate(check=False) == 1 and target.read_text(encoding="utf-8") == tool.send_source()

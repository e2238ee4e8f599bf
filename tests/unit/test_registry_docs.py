"""docs/schema-registry.md's API coverage table: every moldau row names the tests that cover it, and each
named test exists under tests/registry/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _coverage_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "schema-registry.md").read_text()
    section = text[text.index("## API coverage") :]
    section = section[: section.index("\n## ")]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header == ["endpoint", "parameters (Confluent's)", "moldau", "Redpanda", "tested by (moldau)"]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]  # after the --- line


def _tests(file: str) -> set[str]:
    tree = ast.parse((ROOT / "tests" / "registry" / file).read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_row_names_existing_tests() -> None:
    rows = _coverage_rows()
    assert len(rows) >= 20
    for endpoint, _params, moldau, redpanda, tested in rows:
        assert moldau and redpanda, endpoint
        named = re.findall(r"(test_\w+\.py)::(test_\w+)", tested)
        assert named, f"{endpoint}: no test named"
        for file, func in named:
            assert func in _tests(file), f"{endpoint}: {file}::{func} does not exist"

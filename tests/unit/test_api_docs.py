"""docs/apis.md must list exactly what the broker's registry serves (regenerate: python
tools/gen_api_docs.py)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_api_docs_current():
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "tools" / "gen_api_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (ROOT / "docs" / "apis.md").read_text() == mod.render(), "run: python tools/gen_api_docs.py"


def test_served_ranges_within_declared():
    from moldau.broker.registry import load_all
    from moldau.protocol import messages as m

    for key, spec in load_all().items():
        req = m.REQUESTS[key]
        assert req.min_version <= spec.min_version <= spec.max_version <= req.max_version, key

"""The test harness is one package, ``harness`` (tests/harness; CONTRIBUTING.md, "The test harness"): no test,
conftest or bench script imports its modules by a bare name, puts a test directory on sys.path or loads a
conftest by path."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "harness"
MODULES = sorted(p.stem for p in HARNESS.glob("*.py") if p.stem != "__init__")
BARE = re.compile(rf"^\s*(?:from|import)\s+({'|'.join(map(re.escape, MODULES))})\b", re.M)
# a test folder (not tests/ itself, not examples/ or tools/) put on sys.path
TEST_DIR_ON_PATH = re.compile(r"sys\.path\.(?:insert|append)\([^\n]*[\"'](?:integration|cluster|client|"
                              r"console|registry|spark|jvm|go|unit|kafka07)[\"']")
CONFTEST_BY_PATH = re.compile(r"spec_from_file_location\([^\n]*conftest")


def _sources() -> list[Path]:
    files = [p for p in (ROOT / "tests").rglob("*.py") if HARNESS not in p.parents]
    return sorted(files + list((ROOT / "bench").glob("*.py")))


def test_the_harness_has_the_shared_modules() -> None:
    for name in ("brokerproc", "fixtures", "kafkautil", "clients", "rawkafka", "faultproxy", "cluster",
                 "jvm"):
        assert name in MODULES


def test_no_bare_imports_of_harness_modules_and_no_test_folders_on_sys_path() -> None:
    found = []
    for path in _sources():
        text = path.read_text()
        rel = path.relative_to(ROOT)
        for m in BARE.finditer(text):
            found.append(f"{rel}: `{m.group(0).strip()}` (import it as harness.{m.group(1)})")
        for rx, what in ((TEST_DIR_ON_PATH, "puts a test folder on sys.path"),
                         (CONFTEST_BY_PATH, "loads a conftest by path")):
            for m in rx.finditer(text):
                found.append(f"{rel}: {what}: `{m.group(0)}`")
    assert not found, "use the harness package (CONTRIBUTING.md, 'The test harness'):\n" + "\n".join(found)

"""The fuzzers' CI subset (seeded: the same frames every run): the structure-aware fuzzer over every (api key,
version) the broker advertises, the byte-mutation fuzzer, both on the SASL listener before and after
authentication, and the Kafka 0.7 listener; after each, the broker passes every after-run check
(harness.FuzzBroker.check). The long runs are ``python -m tests.fuzz`` (CONTRIBUTING.md, "Fuzzing")."""

from __future__ import annotations

import json

import pytest

from .__main__ import run_modes
from .harness import FuzzBroker
from .run import Stats

pytestmark = pytest.mark.timeout(240)

SEED = 22


def _assert_clean(broker: FuzzBroker, stats: dict[str, Stats]) -> None:
    for mode, s in stats.items():
        assert not s.findings, f"{mode}: " + json.dumps([f.as_dict() for f in s.findings[:5]], indent=1)
        assert s.sent > 0 and s.answered > 0, (mode, s.as_dict())
    report = broker.check(roundtrip_records=100)
    assert not report.problems, "\n".join(report.problems)


def test_structure_and_mutation_cover_every_pair(fuzz_broker: FuzzBroker) -> None:
    pairs = set(fuzz_broker.api_versions())
    n = 6 * len(pairs)
    stats = run_modes(fuzz_broker, ["structure", "mutation"], n, connections=4, seed=SEED)
    for mode in ("structure", "mutation"):
        missing = pairs - set(stats[mode].per_pair)
        assert not missing, f"{mode}: pairs never sent: {sorted(missing)}"
    _assert_clean(fuzz_broker, stats)
    print({mode: {k: v for k, v in s.as_dict().items() if k != "findings"} for mode, s in stats.items()})


def test_sasl_listener(fuzz_broker: FuzzBroker) -> None:
    stats = run_modes(fuzz_broker, ["sasl"], 1200, connections=4, seed=SEED)
    # before authentication the gate closes the connection on everything but ApiVersions and SASL
    pre = stats["sasl-unauthenticated"]
    assert pre.closed > pre.sent // 2, pre.as_dict()
    _assert_clean(fuzz_broker, stats)
    print({mode: {k: v for k, v in s.as_dict().items() if k != "findings"} for mode, s in stats.items()})


def test_legacy_listener(fuzz_broker: FuzzBroker) -> None:
    stats = run_modes(fuzz_broker, ["legacy"], 1600, connections=4, seed=SEED)
    assert len(stats["legacy"].per_pair) >= 5, stats["legacy"].as_dict()  # all five 0.7 request types
    _assert_clean(fuzz_broker, stats)
    print({mode: {k: v for k, v in s.as_dict().items() if k != "findings"} for mode, s in stats.items()})

"""The fuzzers' CI subset (seeded: the same frames every run): the structure-aware fuzzer over every (api key,
version) the broker advertises, the byte-mutation fuzzer, both on the SASL listener before and after
authentication, and the Kafka 0.7 listener; after each, the broker passes every after-run check
(harness.FuzzBroker.check). The long runs are ``python -m tests.fuzz`` (CONTRIBUTING.md, "Fuzzing")."""

from __future__ import annotations

import json

import pytest

from .__main__ import run_modes
from .harness import FuzzBroker, Raw
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


def test_unguarded_creations_are_held_by_the_broker(fuzz_broker: FuzzBroker) -> None:
    """An unguarded run (``--unguarded``) sends creations at and beyond 10,000 partitions and holds the broker
    to its bound: CreateTopics of 10,001 and 9,568,257 partitions (one topic, or two topics of 5,001) are
    counted as over the cap and must be refused whole; one within the bound is created."""
    import asyncio
    import random

    from moldau.protocol import frame as _frame
    from moldau.protocol import messages as m

    from .run import CREATE_TOPICS, Fuzzer

    C = m.CreateTopicsRequest
    asks = [[10_001], [9_568_257], [5_001, 5_000], [3]]
    frames = [_frame.encode_request(CREATE_TOPICS, 7, i + 1, "fuzz", C.new(topics=[
        C.CreatableTopic(name=f"fuzz-cap-{i}-{j}", num_partitions=n, replication_factor=1)
        for j, n in enumerate(ask)], timeout_ms=5000, validate_only=False)) for i, ask in enumerate(asks)]
    it = iter(frames)

    def source(_rng: random.Random, _corr: int) -> tuple[int, int, bytes, bool]:
        return CREATE_TOPICS, 7, next(it), True

    fuzz_broker.guarded = False
    try:
        f = Fuzzer(fuzz_broker, port=fuzz_broker.port, source=source, requests=len(frames), connections=1,
                   seed=SEED, janitor_every=1 << 62)
        stats = asyncio.run(f.run())
    finally:
        fuzz_broker.guarded = True
    assert not stats.findings, [x.as_dict() for x in stats.findings]
    assert (stats.over_cap, stats.created_max, stats.guarded) == (3, 3, 0), stats.as_dict()
    with Raw(fuzz_broker.port) as r:
        md = fuzz_broker.metadata(r)
        made = {t.name for t in md.topics if t.name.startswith("fuzz-cap-")}
        assert made == {"fuzz-cap-3-0"}, made
        r.call(20, 6, m.DeleteTopicsRequest.new(topics=[m.DeleteTopicsRequest.DeleteTopicState(
            name="fuzz-cap-3-0")], timeout_ms=30000))

"""The fuzzers' command for long runs (from the repository root):

    python -m tests.fuzz --mode structure --requests 1000000 --connections 8
    python -m tests.fuzz --mode mutation --requests 1000000 --connections 8
    python -m tests.fuzz --mode sasl --requests 100000      # SASL: unauthenticated, then authenticated
    python -m tests.fuzz --mode legacy --requests 100000    # the Kafka 0.7 listener
    python -m tests.fuzz --mode all --requests 20000        # every mode in turn, one broker

Each run starts its own broker (in ``--dir``, a new temporary directory by default), fuzzes it, makes the
after-run checks (harness.FuzzBroker.check) and prints one JSON document; the exit status is 1 when any
check failed or anything was found.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .gen import NamePool
from .harness import FuzzBroker
from .run import STOP, Fuzzer, LegacyFuzzer, Stats, mutation_source, structure_source

MODES = ("structure", "mutation", "sasl", "legacy")


def run_modes(broker: FuzzBroker, modes: list[str], requests: int, connections: int, seed: int,
              hostility: float = 0.05, keys: set[int] | None = None,
              duration_s: float | None = None) -> dict[str, Stats]:
    """Run each mode on ``broker``; the broker's start RSS is taken after one valid request of every
    (api key, version) has been answered (each message version's codec is compiled on first use)."""
    names = NamePool()
    pairs = [p for p in broker.api_versions() if keys is None or p[0] in keys]
    janitor_every = max(2000, requests // 50)
    warm = Fuzzer(broker, port=broker.port, source=structure_source(pairs, names, 0.0), requests=len(pairs),
                  connections=1, seed=seed, keep_topics=names.topics, janitor_every=1 << 62)
    asyncio.run(warm.run())
    broker.janitor(names.topics)
    if not broker.rss_start_kb:
        broker.mark_rss()
    out: dict[str, Stats] = {}
    for mode in modes:
        if mode == "structure":
            f = Fuzzer(broker, port=broker.port, source=structure_source(pairs, names, hostility),
                       requests=requests, connections=connections, seed=seed, keep_topics=names.topics,
                       janitor_every=janitor_every, duration_s=duration_s)
            out[mode] = asyncio.run(f.run())
        elif mode == "mutation":
            f = Fuzzer(broker, port=broker.port, source=mutation_source(pairs, names), requests=requests,
                       connections=connections, seed=seed + 1, keep_topics=names.topics,
                       janitor_every=janitor_every, duration_s=duration_s)
            out[mode] = asyncio.run(f.run())
        elif mode == "sasl":
            # before authentication: every frame is a stranger's (only ApiVersions and SASL pass the gate)
            pre = Fuzzer(broker, port=broker.sasl_port, source=structure_source(pairs, names, hostility),
                         requests=requests // 2, connections=connections, seed=seed + 2,
                         keep_topics=names.topics, janitor_every=janitor_every, closes_expected=True,
                         duration_s=duration_s)
            out["sasl-unauthenticated"] = asyncio.run(pre.run())
            post = Fuzzer(broker, port=broker.sasl_port, source=structure_source(pairs, names, hostility),
                          requests=requests - requests // 2, connections=connections, seed=seed + 3,
                          sasl=True, keep_topics=names.topics, janitor_every=janitor_every,
                          duration_s=duration_s)
            out["sasl-authenticated"] = asyncio.run(post.run())
        elif mode == "legacy":
            lf = LegacyFuzzer(broker, names, requests=requests, connections=connections, seed=seed + 4,
                              duration_s=duration_s)
            out[mode] = asyncio.run(lf.run())
        else:
            raise ValueError(mode)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description="moldau's protocol fuzzers")
    ap.add_argument("--mode", choices=(*MODES, "all"), default="all")
    ap.add_argument("--requests", type=int, default=20000, help="requests (frames) per mode")
    ap.add_argument("--connections", type=int, default=8, help="connections at once")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hostility", type=float, default=0.05, help="share of values drawn hostile")
    ap.add_argument("--max-partitions", type=int, default=64,
                    help="creation bound: CreateTopics/CreatePartitions asking for more are not sent")
    ap.add_argument("--unguarded", action="store_true",
                    help="send every creation (up to and beyond the 10,000 partitions per request) and check "
                         "the broker's own bounds instead of --max-partitions")
    ap.add_argument("--duration", type=float, default=None,
                    help="seconds per mode at most (then the checks and the report, as after --requests)")
    ap.add_argument("--keys", default=None, help="only these api keys (comma separated)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="the broker's directory (default: a temporary one)")
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker setting")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())  # end the run, still check and report
    try:
        import uvloop  # the fuzzer's own event loop: less of a shared machine's CPU per request

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover - uvloop is optional
        pass
    modes = list(MODES) if args.mode == "all" else [args.mode]
    settings = dict(kv.split("=", 1) for kv in args.set)
    root = args.dir or Path(tempfile.mkdtemp(prefix="moldau-fuzz-"))
    t0 = time.monotonic()
    with FuzzBroker(root, settings, max_partitions=args.max_partitions,
                    guarded=not args.unguarded) as broker:
        rss_before_warmup = broker.rss()
        stats = run_modes(broker, modes, args.requests, args.connections, args.seed, args.hostility,
                           {int(k) for k in args.keys.split(",")} if args.keys else None, args.duration)
        if args.unguarded:  # the state of the start again (pool topics of their size): RSS compares like
            broker.janitor(NamePool().topics)  # with like, and deleting 10,000s of partitions gives back
        report = broker.check()
    result: dict[str, Any] = {
        "modes": {k: v.as_dict() for k, v in stats.items()},
        "check": report.as_dict(),
        "rss_before_warmup_kb": rss_before_warmup,
        "seconds": round(time.monotonic() - t0, 1),
        "dir": str(root),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    failed = bool(report.problems) or any(s.findings for s in stats.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

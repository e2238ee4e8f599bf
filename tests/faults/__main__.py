"""The fault bench's command for long runs (run from the repository root, as root for the namespaces):

    python -m tests.faults cluster --duration 1800                 # every fault in turn for 30 minutes
    python -m tests.faults cluster --unclean --faults unclean-loss  # unclean election: shows the loss
    python -m tests.faults single --cycles 20                       # kill -9 cycles, fsync per message
    python -m tests.faults single --cycles 20 --no-fsync

Each run prints its table (markdown) and writes its JSON (``--json``); the exit status is 1 when the checker
found anything acknowledged lost (or any other violation), 0 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile

from .checker import Result, table
from .nemesis import EVERY_FAULT, FAULTS, Timing
from .run import Plan, run
from .single import kill_cycles


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.faults", description="moldau's fault-injection bench")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cluster", help="ZooKeeper + brokers under the nemesis")
    c.add_argument(
        "--faults",
        default=",".join(EVERY_FAULT),
        help=f"comma-separated, in order (default: every fault). Known: {', '.join(FAULTS)}",
    )
    c.add_argument(
        "--duration",
        type=float,
        default=0.0,
        help="seconds: cycle through the faults until this much time has passed (0: each once)",
    )
    c.add_argument("--brokers", type=int, default=3)
    c.add_argument("--min-insync", type=int, default=2)
    c.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
    c.add_argument("--rate", type=float, default=100.0, help="records/s per producer (two producers)")
    c.add_argument("--rest", type=float, default=5.0, help="seconds between faults")
    c.add_argument("--no-netns", action="store_true", help="loopback only, process faults only")
    c.add_argument("--name", default="")
    s = sub.add_parser("single", help="one broker, kill -9 cycles")
    s.add_argument("--cycles", type=int, default=20)
    s.add_argument("--no-fsync", action="store_true", help="without log.flush.interval.messages=1")
    for p in (c, s):
        p.add_argument("--folder", default="", help="where the data and server logs go (default: a temp dir)")
        p.add_argument("--json", default="", help="write the result as JSON to this file")
        p.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    folder = args.folder or tempfile.mkdtemp(prefix="moldau-faults-")
    result: Result
    if args.cmd == "cluster":
        faults = [f.strip() for f in args.faults.split(",") if f.strip()]
        unknown = [f for f in faults if f not in FAULTS]
        if unknown or not faults:
            ap.error(f"unknown fault(s) {unknown}; known: {', '.join(FAULTS)}")
        min_isr = args.min_insync
        if "unclean-loss" in faults and args.min_insync == 2 and args.unclean:
            min_isr = 1  # the leader must acknowledge alone for unclean election to lose anything
        name = args.name or (
            f"{args.brokers} brokers, {'unclean' if args.unclean else 'clean'} election, min.insync {min_isr}"
        )
        plan = Plan(
            name,
            faults,
            duration_s=args.duration,
            rest_s=args.rest,
            brokers=args.brokers,
            min_insync=min_isr,
            unclean=args.unclean,
            rate=args.rate,
            netns=False if args.no_netns else None,
        )
        result = run(plan, folder, Timing())
    else:
        result = kill_cycles(folder, cycles=args.cycles, fsync=not args.no_fsync)
    print(table([result]))
    for kind, ex in result.examples.items():
        print(f"{kind}: {'; '.join(ex)}")
    for line in result.faults:
        print(f"  fault {line}")
    for note in result.notes:
        print(f"  note: {note}")
    print(f"data and server logs: {folder}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(result.to_json() + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

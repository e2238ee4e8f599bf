"""Power-loss runs longer than the CI ones (run from the repository root, as root: FUSE mounts):

    python -m tests.powerloss single --cycles 10                      # fsync per message: must lose nothing
    python -m tests.powerloss single --cycles 10 --during-write --tear --segment-bytes 16384
    python -m tests.powerloss single --cycles 5 --no-fsync            # no fsync per message: loss measured
    python -m tests.powerloss files                                   # a loss while writing each file kind
    python -m tests.powerloss cluster --victims 1 --cycles 5          # one broker: must lose nothing
    python -m tests.powerloss cluster --victims 1 --cycles 4 --tear --keep 0.5
    python -m tests.powerloss cluster --victims 2 --cycles 3          # two at once: measured
    python -m tests.powerloss cluster --victims 3 --cycles 1          # the whole cluster: measured

Each run prints the checker's table and what every power loss dropped; the exit status is 1 when anything
acknowledged was lost (expected for the measured runs), 0 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile

from tests.faults.checker import table

from .scenarios import FILE_KINDS, cluster, file_kinds, single_node


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.powerloss", description="moldau's power-loss runs")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("single", help="one broker on a lazy file system")
    s.add_argument("--cycles", type=int, default=5)
    s.add_argument("--no-fsync", action="store_true", help="Kafka's default flush settings")
    s.add_argument("--tear", action="store_true", help="tear the write in flight")
    s.add_argument("--keep", type=float, default=0.0, help="fraction of unsynced pages that reach the disk")
    s.add_argument("--during-write", action="store_true", help="the power goes during a random write")
    s.add_argument("--segment-bytes", type=int, default=0, help="log.segment.bytes (small: many rolls)")
    f = sub.add_parser("files", help="one broker, the power lost during a write of each kind of file")
    f.add_argument("--kinds", default=",".join(FILE_KINDS), help="comma-separated (default: all)")
    c = sub.add_parser("cluster", help="three brokers, each on its own lazy file system")
    c.add_argument("--victims", type=int, default=1, choices=(1, 2, 3))
    c.add_argument("--cycles", type=int, default=3)
    c.add_argument("--tear", action="store_true", help="tear each victim's last unsynced write")
    c.add_argument("--keep", type=float, default=0.0, help="fraction of unsynced pages that reach the disk")
    for p in (s, c, f):
        p.add_argument("--run", type=float, default=5.0, help="seconds of producing before each loss")
        p.add_argument("--rate", type=float, default=150.0)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--folder", help="data and logs (default: a temporary folder, kept)")
        p.add_argument("-v", action="store_true")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if a.v else logging.WARNING)
    folder = a.folder or tempfile.mkdtemp(prefix="moldau-powerloss-")
    if a.cmd == "single":
        settings = {"log.segment.bytes": str(a.segment_bytes)} if a.segment_bytes else None
        r = single_node(folder, cycles=a.cycles, fsync=not a.no_fsync, tear=a.tear, keep=a.keep,
                        during_write=a.during_write, run_s=a.run, rate=a.rate, seed=a.seed, settings=settings)
    elif a.cmd == "files":
        r = file_kinds(folder, tuple(a.kinds.split(",")), rate=a.rate, seed=a.seed)
    else:
        r = cluster(folder, victims=a.victims, cycles=a.cycles, run_s=a.run, rate=a.rate, seed=a.seed,
                    tear=a.tear, keep=a.keep)
    print(table([r.result]))
    for loss in r.losses:
        print(loss)
    for note in r.result.notes:
        print(note)
    for kind, examples in r.result.examples.items():
        print(kind, examples)
    print(f"acknowledged {r.acked}, lost {r.lost}, recovered {r.recovered}; folder {folder}")
    print(f"transactions: committed {r.result.txn_committed}, aborted {r.result.txn_aborted}, "
          f"aborted read {r.result.aborted_read}, committed lost {r.result.txn_lost}; "
          f"tracebacks in broker logs: {len(r.traceback_logs)}")
    return 1 if r.lost or r.result.aborted_read or r.result.txn_lost else 0


if __name__ == "__main__":
    sys.exit(main())

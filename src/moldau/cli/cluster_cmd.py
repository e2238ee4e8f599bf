"""``moldau cluster up [--brokers N] [--dir DIR] [--set KEY=VALUE ...]``: a local cluster on loopback.

Starts a ZooKeeper (Debian's ``zookeeper`` package) and N brokers (ids 1..N) with their own data dirs under
one
folder, prints the bootstrap string, and stops everything on Ctrl-C (brokers first, with controlled shutdown).
The internal topics are replicated min(3, N) times (transaction.state.log.min.isr min(2, N)) unless --set says
otherwise.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("cluster", help="a local cluster (ZooKeeper and N brokers) for trying replication")
    csub = p.add_subparsers(dest="cluster_command", metavar="SUBCOMMAND")
    up = csub.add_parser("up", help="start ZooKeeper and N brokers on loopback; Ctrl-C stops them")
    up.add_argument("--brokers", type=int, default=3, metavar="N", help="number of brokers (default 3)")
    up.add_argument(
        "--dir",
        metavar="DIR",
        default=None,
        help="folder for the data and logs (default: a new temporary folder)",
    )
    up.add_argument(
        "--port",
        type=int,
        default=0,
        metavar="PORT",
        help="port of broker 1; broker i listens on PORT+i-1 (default: free ports)",
    )
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker (repeatable), e.g. --set min.insync.replicas=2",
    )
    up.set_defaults(func=run_up)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_up(args: argparse.Namespace) -> int:
    from moldau.broker.cluster.local import LocalCluster, ZooKeeperUnavailable

    if args.brokers < 1:
        print(f"moldau cluster up: error: --brokers must be at least 1 (got {args.brokers})", file=sys.stderr)
        return 2
    for kv in args.set:
        if "=" not in kv:
            print(f"moldau cluster up: error: --set {kv!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
    folder = args.dir or tempfile.mkdtemp(prefix="moldau-cluster-")
    rf = min(3, args.brokers)
    # Kafka's replication of the internal topics (moldau's one-node defaults are 1), unless --set says
    # otherwise
    defaults = {
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min(2, rf)),
    }
    given = {kv.split("=", 1)[0] for kv in args.set}
    configs = [f"{k}={v}" for k, v in defaults.items() if k not in given] + list(args.set)
    cluster = LocalCluster(folder, args.brokers, broker_configs=configs, first_port=args.port)
    stop = {"now": False}

    def on_signal(_sig: int, _frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        try:
            cluster.start()
        except (ZooKeeperUnavailable, RuntimeError) as e:
            print(f"moldau cluster up: error: {e}", file=sys.stderr)
            return 1
        print(f"ZooKeeper: {cluster.zk.connect}")
        for b in cluster.brokers:
            print(f"broker {b.node_id}: {b.address}  (data {b.data_dir}, log {b.log_path})")
        print(f"bootstrap: {cluster.bootstrap}")
        print("Ctrl-C stops the cluster", flush=True)
        while not stop["now"]:
            for b in cluster.brokers:
                if b.proc is not None and b.proc.poll() is not None:
                    print(
                        f"broker {b.node_id} exited with {b.proc.returncode} (see {b.log_path})",
                        file=sys.stderr,
                    )
                    b.proc = None
            time.sleep(0.2)
        print("stopping the cluster", flush=True)
    finally:
        cluster.stop()
    return 0

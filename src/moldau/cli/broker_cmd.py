"""``moldau broker``: run a broker in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "broker",
        help="run a Kafka-compatible broker",
        description="Run a moldau broker. Configuration: Kafka's server.properties keys, from "
        "--config, MOLDAU_<KEY> environment variables (dots -> underscores), --set, "
        "then the flags below.",
    )
    p.add_argument("--config", metavar="FILE", help="server.properties file")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                   help="set a broker config key (repeatable), e.g. --set num.partitions=3")
    p.add_argument("--host", help="listen host (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default 9092)")
    p.add_argument("--data-dir", help="data directory = log.dirs (default ./moldau-data); ':memory:' keeps "
                   "the logs in RAM, removed when the broker stops (not durable; docs/testing.md)")
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="logging level (INFO)")
    p.set_defaults(func=run)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def resolve_config(args: argparse.Namespace, env: Any = None) -> Any:
    from moldau.broker.config import BrokerConfig, ConfigError, parse_set_option

    overrides: dict[str, str] = {}
    for item in args.overrides:
        k, v = parse_set_option(item)
        overrides[k] = v
    base = BrokerConfig.load(args.config, overrides, env=env)
    extra: dict[str, str] = {}
    if args.host is not None or args.port is not None:
        first = base.listeners[0]
        host = args.host if args.host is not None else first.host
        port = args.port if args.port is not None else first.port
        if not 0 <= port <= 65535:
            raise ConfigError("--port", f"--port {port} is not a valid port")
        h = f"[{host}]" if ":" in host else host
        # the flags replace the first listener only; further listeners (e.g. SASL_SSL://...) stay
        rest = [f"{lst.name}://[{lst.host}]:{lst.port}" if ":" in lst.host else str(lst)
                for lst in base.listeners[1:]]
        extra["listeners"] = ",".join([f"{first.name}://{h}:{port}", *rest])
    if args.data_dir is not None:
        extra["log.dirs"] = args.data_dir
    if extra:
        overrides.update(extra)
        base = BrokerConfig.load(args.config, overrides, env=env)
    return base


def run(args: argparse.Namespace) -> int:
    from moldau.broker.config import ConfigError

    configure_logging(args.log_level)
    try:
        config = resolve_config(args)
    except ConfigError as e:
        print(f"moldau broker: error: {e}", file=sys.stderr)
        return 2
    from moldau.broker.broker import run as run_server
    from moldau.broker.cluster import ClusterError
    from moldau.broker.memory import MemoryLogDir, is_memory
    from moldau.log.errors import StorageError

    memory = None
    try:
        if is_memory(config):
            memory = MemoryLogDir()
            config = memory.apply(config)
        run_server(config)
    except ConfigError as e:  # found while starting (listeners, TLS certificates, ACL file)
        print(f"moldau broker: error: {e}", file=sys.stderr)
        return 2
    except StorageError as e:  # a data dir in use by another broker, unreadable meta.properties, ...
        print(f"moldau broker: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        logging.getLogger("moldau.broker").error("cannot start the broker: %s", e)
        return 1
    except ClusterError as e:  # zookeeper.connect: ZooKeeper unreachable, broker id taken, single-node data
        print(f"moldau broker: error: {e}", file=sys.stderr)
        return 1
    finally:
        if memory is not None:
            memory.remove()
    return 0

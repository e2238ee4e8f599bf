"""One bench run: a cluster, the workloads, a list of faults (or faults drawn in turn for a duration), the
checker. Used by the CI tests (``tests/faults/test_*.py``) and the long-run command (``python -m
tests.faults``).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, NewTopic

from .checker import Result, check
from .harness import FaultCluster
from .nemesis import NETWORK_FAULTS, Nemesis, Timing
from .workload import (
    CommittedReader,
    GroupConsumer,
    OffsetWatch,
    Processor,
    Producers,
    Transactions,
    Workloads,
)

log = logging.getLogger(__name__)

TOPIC, OUT = "bench", "bench-out"
PARTITIONS = 3


@dataclass(slots=True)
class Plan:
    name: str
    faults: list[str]
    duration_s: float = 0.0  # > 0: cycle through ``faults`` until this much time has passed
    rest_s: float = 5.0  # quiet time between faults
    brokers: int = 3
    min_insync: int = 2
    unclean: bool = False
    rate: float = 100.0  # records/s per producer
    netns: bool | None = None  # None: namespaces where possible
    extra_configs: list[str] = field(default_factory=list)


def broker_configs(plan: Plan, timing: Timing) -> list[str]:
    rf = min(3, plan.brokers)
    return [
        f"replica.lag.time.max.ms={int(timing.lag_s * 1000)}",
        "replica.fetch.wait.max.ms=200",
        "group.initial.rebalance.delay.ms=0",
        "offsets.topic.num.partitions=6",
        "transaction.state.log.num.partitions=6",
        f"offsets.topic.replication.factor={rf}",
        f"transaction.state.log.replication.factor={rf}",
        f"transaction.state.log.min.isr={min(2, rf)}",
        f"unclean.leader.election.enable={'true' if plan.unclean else 'false'}",
        "controlled.shutdown.enable=true",
        *plan.extra_configs,
    ]


def _create_topics(bootstrap: str, plan: Plan) -> None:
    rf = min(3, plan.brokers)
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    cfg = {
        "min.insync.replicas": str(plan.min_insync),
        "unclean.leader.election.enable": "true" if plan.unclean else "false",
    }
    fs = a.create_topics(
        [NewTopic(t, PARTITIONS, rf, config=cfg) for t in (TOPIC, OUT)],
        operation_timeout=30,
        request_timeout=40,
    )
    for f in fs.values():
        f.result(60)


def _wait_formed(bootstrap: str, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2}).list_topics(timeout=5)
            if len(md.brokers) == n and md.controller_id > 0:
                return
        except Exception as e:  # noqa: BLE001 - still starting
            log.debug("metadata: %r", e)
        time.sleep(0.5)
    raise RuntimeError(f"the cluster did not form within {timeout:.0f} s")


def run(plan: Plan, folder: str, timing: Timing | None = None) -> Result:
    timing = timing or Timing()
    os.makedirs(folder, exist_ok=True)
    cluster = FaultCluster(
        folder,
        plan.brokers,
        configs=broker_configs(plan, timing),
        netns=plan.netns,
        zk_session_ms=int(timing.session_s * 1000),
    )
    notes: list[str] = []
    if cluster.fallback_reason:
        notes.append(f"no network namespaces ({cluster.fallback_reason}): process faults only")
    faults = [f for f in plan.faults if cluster.netns or f not in NETWORK_FAULTS]
    if len(faults) < len(plan.faults):
        notes.append(f"skipped without namespaces: {sorted(set(plan.faults) - set(faults))}")
    try:
        cluster.start()
        bs = cluster.bootstrap
        _wait_formed(bs, plan.brokers)
        _create_topics(bs, plan)
        nem = Nemesis(cluster, TOPIC, timing)
        if not nem.fully_replicated(60):
            raise RuntimeError("the bench topics did not get their full ISR")
        w = Workloads(
            Producers(bs, TOPIC, PARTITIONS, rate=plan.rate),
            GroupConsumer(bs, TOPIC, "bench-group"),
            OffsetWatch(bs, TOPIC, PARTITIONS, "bench-group"),
            Transactions(bs, OUT, PARTITIONS),
            Processor(bs, TOPIC, OUT),
            CommittedReader(bs, OUT, PARTITIONS),
        )
        t0 = time.monotonic()
        w.start()
        time.sleep(5)
        i = 0
        while True:
            if plan.duration_s > 0:
                if time.monotonic() - t0 >= plan.duration_s:
                    break
                name = faults[i % len(faults)]
            elif i >= len(faults):
                break
            else:
                name = faults[i]
            i += 1
            try:
                nem.run(name)
            except Exception as e:
                log.exception("fault %s", name)
                notes.append(f"fault {name} failed: {e!r}")
            if not nem.fully_replicated(90):
                notes.append(f"after {name}: the ISR was not full again within 90 s")
            time.sleep(plan.rest_s)
        cluster.heal_all()
        nem.fully_replicated(90)
        time.sleep(5)
        w.stop()
        seconds = time.monotonic() - t0
        result = check(
            plan.name,
            bs,
            w,
            topic=TOPIC,
            out_topic=OUT,
            partitions=PARTITIONS,
            seconds=seconds,
            faults=nem.log,
        )
        result.notes = notes + result.notes
        for wk in w.all():
            if wk.errors:
                result.notes.append(f"{wk.name}: {len(wk.errors)} client errors, first: {wk.errors[0]}")
        return result
    except BaseException:
        log.error("bench run %s failed; server logs:\n%s", plan.name, cluster.log_tails())
        raise
    finally:
        cluster.stop()

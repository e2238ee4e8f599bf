"""Failover with real clients: the leader of a replicated partition is killed with kill -9 while
confluent-kafka,
kafka-python and aiokafka produce with acks=all and idempotence; nothing acknowledged is lost or duplicated,
each producer's order is kept, the clients follow the new leader without a restart, and the killed broker
comes
back, catches up and rejoins the ISR."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from harness.clusterutil import QUIET, create_topic, fully_replicated, partitions, read_partition, wait_until

pytestmark = pytest.mark.timeout(180)

TOPIC = "failover"
RUN_S = 9.0
KILL_AFTER_S = 2.5


def _confluent(bootstrap: str, stop: threading.Event, acked: list, errors: list) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "logger": QUIET,
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )

    def cb(err, msg):
        (errors if err else acked).append((time.monotonic(), msg.value()))

    i = 0
    while not stop.is_set():
        p.produce(TOPIC, value=b"ck-%d" % i, partition=0, on_delivery=cb)
        i += 1
        p.poll(0.003)
    assert p.flush(60) == 0


def _kafka_python(bootstrap: str, stop: threading.Event, acked: list, errors: list) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        retries=2**31 - 1,
        request_timeout_ms=10000,
        delivery_timeout_ms=60000,
        max_in_flight_requests_per_connection=5,
    )
    i = 0
    while not stop.is_set():
        v = b"kp-%d" % i
        fut = p.send(TOPIC, value=v, partition=0)
        fut.add_callback(lambda _md, v=v: acked.append((time.monotonic(), v)))
        fut.add_errback(lambda e, v=v: errors.append((time.monotonic(), v, e)))
        i += 1
        time.sleep(0.003)
    p.flush(60)
    p.close(10)


def _aiokafka(bootstrap: str, stop: threading.Event, acked: list, errors: list) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=10000,
        )
        await p.start()
        try:
            pending = []
            i = 0
            while not stop.is_set():
                v = b"ak-%d" % i
                fut = await p.send(TOPIC, value=v, partition=0)

                def done(f, v=v):
                    if f.exception() is None:
                        acked.append((time.monotonic(), v))
                    else:
                        errors.append((time.monotonic(), v, f.exception()))

                fut.add_done_callback(done)
                pending.append(fut)
                i += 1
                await asyncio.sleep(0.003)
            await asyncio.wait(pending, timeout=60)
        finally:
            await p.stop()

    asyncio.run(run())


def test_kill_leader_while_three_clients_produce_acks_all(cluster):
    bs = cluster.bootstrap
    create_topic(bs, TOPIC, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    wait_until(lambda: fully_replicated(bs, TOPIC, 3), 20, "ISR of 3")
    leader = partitions(bs, TOPIC)[0].leader
    stop = threading.Event()
    results: dict[str, tuple[list, list]] = {name: ([], []) for name in ("ck", "kp", "ak")}
    threads = [
        threading.Thread(target=fn, args=(bs, stop, *results[name]), name=name, daemon=True)
        for name, fn in (("ck", _confluent), ("kp", _kafka_python), ("ak", _aiokafka))
    ]
    for t in threads:
        t.start()
    time.sleep(KILL_AFTER_S)
    cluster.broker(leader).kill()
    killed_at = time.monotonic()
    time.sleep(RUN_S - KILL_AFTER_S)
    stop.set()
    for t in threads:
        t.join(90)
        assert not t.is_alive(), f"{t.name} did not finish"

    new = partitions(bs, TOPIC)[0]
    assert new.leader not in (leader, -1) and leader not in new.isrs
    log_values = [v for _o, v in read_partition(bs, TOPIC, 0)]
    assert len(log_values) == len(set(log_values)), "duplicates in the log"
    present = set(log_values)
    for name, (acked, errors) in results.items():
        assert not errors, f"{name}: {errors[:3]}"
        values = [v for _t, v in acked]
        assert len(values) > 100, f"{name} acknowledged only {len(values)}"
        missing = [v for v in values if v not in present]
        assert not missing, f"{name}: {len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        # the client followed the new leader: records sent well after the kill were acknowledged
        assert any(t > killed_at + 3 for t, _v in acked), f"{name}: nothing acknowledged after the failover"
        mine = [int(v.split(b"-")[1]) for v in log_values if v.startswith(name.encode())]
        assert mine == sorted(mine), f"{name}: order not kept"
    # the killed broker restarts, catches up and is back in the ISR
    b = cluster.broker(leader)
    b.start()
    b.wait_listening()
    wait_until(lambda: fully_replicated(bs, TOPIC, 3), 40, "the restarted broker back in the ISR")
    # preferred leader election (ElectLeaders, sent by the admin client to the controller) moves leadership
    # back to the first replica: the restarted broker
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"logger": QUIET, "bootstrap.servers": bs})
    res = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(30)
    assert res[TopicPartition(TOPIC, 0)] is None, res
    wait_until(lambda: partitions(bs, TOPIC)[0].leader == leader, 20, "the preferred leader back")
    again = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(30)
    assert again[TopicPartition(TOPIC, 0)].code() == 84  # ELECTION_NOT_NEEDED
    seg = "00000000000000000000.log"
    wait_until(
        lambda: (
            len({os.path.getsize(os.path.join(x.data_dir, f"{TOPIC}-0", seg)) for x in cluster.brokers}) == 1
        ),
        20,
        "equal segment files on all replicas",
    )

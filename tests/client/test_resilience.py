"""The client across broker restarts (moldau broker: tansu keeps nothing across a restart)."""

from __future__ import annotations

import threading
import time

import pytest

from kafkautil import create_topic
from moldau.client import Consumer, Producer, TopicPartition


@pytest.mark.moldau_only("restarts the broker on the same data directory")
@pytest.mark.parametrize("how", ["graceful", "kill9"])
def test_idempotent_producer_and_consumer_across_restart(broker_factory, how):
    b = broker_factory()
    topic = create_topic(b.bootstrap, "restart-topic", 1)
    n = 3000
    with Producer(bootstrap_servers=b.bootstrap, linger_ms=2, request_timeout_ms=5000,
                  reconnect_backoff_max_ms=200, delivery_timeout_ms=60000) as p:
        futs = []

        def produce():
            for i in range(n):
                futs.append(p.send(topic, b"%05d" % i))
                if i % 100 == 0:
                    time.sleep(0.02)

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(0.2)
        if how == "kill9":
            b.kill9()  # requests in flight are lost: the producer must resend them, once
            time.sleep(0.3)
            b.start()
        else:
            b.restart()
        t.join(60)
        p.flush(60)
        offsets = [f.result(30).offset for f in futs]
    assert offsets == list(range(n))  # delivered once each, in order
    got = []
    with Consumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got += c.poll(0.5)
        # the consumer rides out a restart too
        b.restart()
        with Producer(bootstrap_servers=b.bootstrap) as p2:
            p2.send(topic, b"after").result(30)
        more = []
        deadline = time.monotonic() + 30
        while not more and time.monotonic() < deadline:
            more = c.poll(0.5)
    assert [r.value for r in got] == [b"%05d" % i for i in range(n)]
    assert [r.value for r in more] == [b"after"]

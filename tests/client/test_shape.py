"""The public shape: moldau.Producer/Consumer/Admin (blocking: with, for) and moldau.aio.* (async with,
async for), one implementation underneath; py.typed; `import moldau` does not load the client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import moldau
import moldau.aio
import moldau.client


def test_names_are_the_client_classes():
    assert moldau.Producer is moldau.client.Producer
    assert moldau.Consumer is moldau.client.Consumer
    assert moldau.Admin is moldau.client.Admin
    assert moldau.aio.Producer is moldau.client.AsyncProducer
    assert moldau.aio.Consumer is moldau.client.AsyncConsumer
    assert moldau.aio.Admin is moldau.client.AsyncAdmin
    assert moldau.TopicPartition is moldau.aio.TopicPartition is moldau.client.TopicPartition
    assert set(moldau.__all__) == {"__version__", "aio", *moldau._LAZY}
    for name in moldau.__all__:
        assert getattr(moldau, name) is not None
    assert (Path(moldau.__file__).parent / "py.typed").is_file()


def test_import_moldau_does_not_load_the_client():
    out = subprocess.run([sys.executable, "-c", "import sys, moldau; print('moldau.client' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sync_with_and_for(broker, make_topic, group_id):
    topic = make_topic(1)
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.list_topics()[topic] == 1
    with moldau.Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i in range(3):
            p.send(topic, b"%d" % i)
    got = []
    with moldau.Consumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group_id,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    ) as c:
        for record in c:
            got.append(record.value)
            if len(got) == 3:
                break
    assert got == [b"0", b"1", b"2"]


def test_async_with_and_async_for(broker, make_topic, group_id):
    topic = make_topic(1)

    async def main() -> list[bytes]:
        async with moldau.aio.Admin(bootstrap_servers=broker.bootstrap) as admin:
            assert (await admin.list_topics())[topic] == 1
        async with moldau.aio.Producer(bootstrap_servers=broker.bootstrap) as p:
            mds = [await p.send_and_wait(topic, b"%d" % i) for i in range(3)]
            assert [md.offset for md in mds] == [0, 1, 2]
        got = []
        async with moldau.aio.Consumer(topic, bootstrap_servers=broker.bootstrap, group_id=group_id,
                                       auto_offset_reset="earliest", session_timeout_ms=6000,
                                       heartbeat_interval_ms=500) as c:
            async for record in c:
                got.append(record.value)
                if len(got) == 3:
                    break
        return got

    assert asyncio.run(main()) == [b"0", b"1", b"2"]

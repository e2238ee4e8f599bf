"""moldau's Kafka client for asyncio.

::

    import moldau.aio

    async with moldau.aio.Producer(bootstrap_servers="localhost:9092") as p:
        await p.send_and_wait("events", b"hello", key=b"k")

    async with moldau.aio.Consumer("events", bootstrap_servers="localhost:9092", group_id="app",
                                   auto_offset_reset="earliest") as c:
        async for record in c:
            ...

    async with moldau.aio.Admin(bootstrap_servers="localhost:9092") as a:
        await a.create_topics([moldau.aio.NewTopic("events", num_partitions=3)])

``Producer``, ``Consumer`` and ``Admin`` are ``moldau.client.AsyncProducer``, ``AsyncConsumer`` and
``AsyncAdmin``; the blocking versions are ``moldau.Producer``, ``moldau.Consumer`` and ``moldau.Admin``.
Configuration uses Kafka's names (keywords with underscores or a dict with dots); see docs/client.md.
"""

from __future__ import annotations

from moldau.client import (
    AlterConfigOp,
    AsyncShareConsumer,
    AuthenticationError,
    ConfigError,
    ConfigResource,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    ConsumerRecord,
    KafkaError,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)
from moldau.client import AsyncAdmin as Admin
from moldau.client import AsyncConsumer as Consumer
from moldau.client import AsyncProducer as Producer
from moldau.client import AsyncShareConsumer as ShareConsumer

__all__ = [
    "AsyncShareConsumer",
    "ShareConsumer",
    "Admin",
    "AlterConfigOp",
    "AuthenticationError",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "KafkaError",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
]

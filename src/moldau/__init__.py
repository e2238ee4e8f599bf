"""moldau: a Kafka-compatible broker and client in Python.

The client, blocking: ``moldau.Producer``, ``moldau.Consumer``, ``moldau.Admin`` (``with`` / ``for``);
for asyncio: ``moldau.aio.Producer``, ``moldau.aio.Consumer``, ``moldau.aio.Admin`` (``async with`` /
``async for``). Everything else of the client is in ``moldau.client``. The names below are loaded on first
use, so ``import moldau`` (for example by the broker) does not import the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

# name -> module it comes from (loaded on first access)
_LAZY = {
    "Producer": "moldau.client",
    "Consumer": "moldau.client",
    "Admin": "moldau.client",
    "ShareConsumer": "moldau.client",
    "AcknowledgeType": "moldau.client",
    "TopicPartition": "moldau.client",
    "RecordMetadata": "moldau.client",
    "ConsumerRecord": "moldau.client",
    "OffsetAndMetadata": "moldau.client",
    "OffsetAndTimestamp": "moldau.client",
    "ConsumerRebalanceListener": "moldau.client",
    "ConsumerGroupMetadata": "moldau.client",
    "NewTopic": "moldau.client",
    "NewPartitions": "moldau.client",
    "ConfigResource": "moldau.client",
    "AlterConfigOp": "moldau.client",
    "KafkaError": "moldau.client",
    "ConfigError": "moldau.client",
    "AuthenticationError": "moldau.client",
}

__all__ = [  # noqa: RUF022 - the client classes first
    "__version__", "aio", "Producer", "Consumer", "Admin", "ShareConsumer", "AcknowledgeType",
    "TopicPartition", "RecordMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata", "OffsetAndTimestamp", "ConsumerRebalanceListener", "ConsumerGroupMetadata",
    "NewTopic",
    "NewPartitions", "ConfigResource", "AlterConfigOp", "KafkaError", "ConfigError", "AuthenticationError",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from moldau import aio
    from moldau.client import (
        AcknowledgeType,
        Admin,
        AlterConfigOp,
        AuthenticationError,
        ConfigError,
        ConfigResource,
        Consumer,
        ConsumerGroupMetadata,
        ConsumerRebalanceListener,
        ConsumerRecord,
        KafkaError,
        NewPartitions,
        NewTopic,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        Producer,
        RecordMetadata,
        ShareConsumer,
        TopicPartition,
    )


def __getattr__(name: str) -> Any:
    import importlib

    if name == "aio":
        return importlib.import_module("moldau.aio")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'moldau' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

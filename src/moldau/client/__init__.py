"""moldau's Kafka client: asyncio core with a synchronous facade.

Async: ``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin``. Sync (a private event loop in a background
thread, blocking methods, ``concurrent.futures`` futures): ``Producer``, ``Consumer``, ``Admin``.
Configuration uses Kafka's names: keyword arguments with underscores or a dict with dots.
"""

from .admin import AsyncAdmin
from .config import ConfigError
from .consumer import AsyncConsumer, ConsumerRebalanceListener
from .errors import (
    AuthenticationError,
    BootstrapError,
    BufferExhaustedError,
    ClientError,
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    RequestTimedOutError,
    SaslAuthenticationError,
    SaslMechanismError,
    UnsupportedVersionError,
)
from .partitioner import DefaultPartitioner, murmur2
from .producer import AsyncProducer, RecordTooLargeError
from .share_consumer import AcknowledgeType, AsyncShareConsumer, ShareRecord
from .sync import Admin, Consumer, Producer, ShareConsumer
from .transactions import ConsumerGroupMetadata, TransactionAbortedError
from .types import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConsumerRecord,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "AsyncShareConsumer",
    "ShareConsumer",
    "AcknowledgeType",
    "ShareRecord",
    "AsyncProducer",
    "AsyncConsumer",
    "AsyncAdmin",
    "Producer",
    "Admin",
    "Consumer",
    "ConsumerRebalanceListener",
    "TopicPartition",
    "RecordMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "NewTopic",
    "NewPartitions",
    "ConfigResource",
    "ConfigEntry",
    "AlterConfigOp",
    "ConfigError",
    "ClientError",
    "KafkaError",
    "BootstrapError",
    "AuthenticationError",
    "SaslAuthenticationError",
    "SaslMechanismError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "RequestTimedOutError",
    "UnsupportedVersionError",
    "BufferExhaustedError",
    "CommitFailedError",
    "IllegalStateError",
    "NoOffsetForPartitionError",
    "RecordTooLargeError",
    "ConsumerGroupMetadata",
    "TransactionAbortedError",
    "DefaultPartitioner",
    "murmur2",
]

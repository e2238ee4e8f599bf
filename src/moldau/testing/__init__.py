"""moldau for your own tests and notebooks: a real Kafka-compatible broker started from Python.

```python
from moldau.testing import EmbeddedBroker, expect_records

with EmbeddedBroker() as broker:              # in-memory logs, a thread of this process, a free port
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    ...
    broker.expect_records("orders", 3)
```

The pytest plugin (``moldau.testing.pytest_plugin``, registered as ``moldau``) gives the fixtures
``moldau_broker``, ``moldau_topic``, ``moldau_admin``, ``moldau_producer`` and ``moldau_consumer``;
``-p no:moldau`` turns it off. docs/testing.md has the whole guide.
"""

from __future__ import annotations

from .embedded import BrokerStartError, EmbeddedBroker
from .records import expect_records, read_topic

__all__ = ["EmbeddedBroker", "BrokerStartError", "expect_records", "read_topic"]

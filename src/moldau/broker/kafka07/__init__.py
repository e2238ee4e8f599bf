"""The Kafka 0.7 legacy listener: a listener whose security protocol is ``KAFKA07`` speaks the 0.7 wire
protocol (``moldau.protocol.kafka07``) with byte offsets (``moldau.log.byte_offsets``).
See docs/kafka07.md."""

from .listener import KAFKA07_PROTOCOL, start_listener
from .service import Kafka07Service

__all__ = ["KAFKA07_PROTOCOL", "Kafka07Service", "start_listener"]

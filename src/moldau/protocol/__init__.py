"""moldau.protocol: the sans-I/O Kafka protocol codec.

    from moldau.protocol import messages as m       # declarations: m.REQUESTS / m.RESPONSES /
    m.ProduceRequest from moldau.protocol import frame               # headers and framing
    from moldau.protocol.errors import ErrorCode, KafkaError, ProtocolDecodeError
"""

from .errors import ErrorCode, KafkaError, ProtocolDecodeError, ProtocolEncodeError, ProtocolError

__all__ = ["ErrorCode", "KafkaError", "ProtocolDecodeError", "ProtocolEncodeError", "ProtocolError"]

"""Transactions: the transaction coordinator, ``__transaction_state`` records, transaction markers.

    from moldau.broker.txn import create_transaction_coordinator, TransactionCoordinator, TxnState

See docs/transactions.md for the design and the choices made where Kafka leaves room.
"""

from .coordinator import (
    TransactionCoordinator,
    TxnConfig,
    create_transaction_coordinator,
)
from .state import (
    STATE_NAMES,
    TRANSACTION_STATE_TOPIC,
    TransactionLogValue,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

__all__ = [
    "STATE_NAMES",
    "TRANSACTION_STATE_TOPIC",
    "TransactionCoordinator",
    "TransactionLogValue",
    "TxnConfig",
    "TxnMetadata",
    "TxnState",
    "create_transaction_coordinator",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

"""The transaction coordinator's core (issue 35): Kafka's state machine per transactional.id.

Pure Python, no Ray and no I/O: ``coordinator.TransactionCoordinator`` answers the
transaction requests with Kafka's error codes and returns, as data, the records to
append to ``__transaction_state`` (``log_codec``, Kafka's layout) and the markers to
write. ``actors/txn_coordinator.py`` serves it (docs/transactions.md, "Serving").
"""
from __future__ import annotations

from .coordinator import MarkerWrite, Outcome, TransactionCoordinator, error_for_version
from .log_codec import TxnLogRecord, decode_key, decode_value, encode_key, encode_value
from .state import TxnMetadata, TxnState

__all__ = [
    "MarkerWrite",
    "Outcome",
    "TransactionCoordinator",
    "TxnLogRecord",
    "TxnMetadata",
    "TxnState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "error_for_version",
]

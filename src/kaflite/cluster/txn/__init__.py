"""The transaction coordinator: transactional ids, their producer epochs and their outcomes.

Each broker starts one ``TransactionCoordinator`` (``broker.transactions``); the handlers in ``cluster/handlers/txn.py`` call
into it. State lives in ``__transaction_state`` in Kafka's record format
(``_records``); the partitions a transaction touched learn its outcome from
the COMMIT/ABORT markers the coordinator sends them (``_markers``); a partition's
leader asks the coordinator before a producer's first transactional batch
(``_verify``, KIP-890).
"""

from kaflite.cluster.txn._config import TxnConfig
from kaflite.cluster.txn._coordinator import TransactionCoordinator
from kaflite.cluster.txn._metadata import MAX_EPOCH, TxnMetadata
from kaflite.cluster.txn._records import TxnState
from kaflite.cluster.txn._shard import TxnShard
from kaflite.cluster.txn._verify import (
    IMPLICIT_OFFSETS_VERSION,
    TxnVerifier,
    produce_error,
    txn_offset_commit_error,
)

__all__ = [
    "IMPLICIT_OFFSETS_VERSION",
    "MAX_EPOCH",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnMetadata",
    "TxnShard",
    "TxnState",
    "TxnVerifier",
    "produce_error",
    "txn_offset_commit_error",
]

"""The transaction coordinator's broker settings, with Kafka 4.0's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kaflite.cluster.internal_topics import TRANSACTIONS
from kaflite.config import ConfigError

__all__ = ["TXN_DEFAULTS", "TxnConfig"]

TXN_DEFAULTS: dict[str, str] = {
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.state.log.load.buffer.size": "5242880",
    "transactional.id.expiration.ms": "604800000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    # KIP-890 part 1: a leader checks a v1 producer's first transactional batch with
    # the coordinator (v2 producers' batches are always added by their leaders)
    "transaction.partition.verification.enable": "true",
    # KIP-939's two-phase commit: kaflite does not implement it, so it cannot be turned
    # on; InitProducerId v6 with Enable2Pc is answered as Kafka answers it while it is off
    "transaction.two.phase.commit.enable": "false",
}

# How long a write to __transaction_state may wait for the in-sync replicas.
WRITE_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class TxnConfig:
    max_timeout_ms: int = 900000
    abort_interval_ms: int = 10000
    load_buffer_size: int = 5242880
    partitions: int = 50
    write_timeout_ms: int = WRITE_TIMEOUT_MS
    id_expiration_ms: int = 604800000
    expiry_interval_ms: int = 3600000
    verify_partitions: bool = True

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> TxnConfig:
        def get(name: str) -> int:
            return int(props.get(name, TXN_DEFAULTS[name]))

        if props.get("transaction.two.phase.commit.enable", "false").lower() == "true":
            raise ConfigError("transaction.two.phase.commit.enable",
                              "two-phase commit (KIP-939) is not implemented by kaflite")

        return cls(
            max_timeout_ms=get("transaction.max.timeout.ms"),
            abort_interval_ms=get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            load_buffer_size=get("transaction.state.log.load.buffer.size"),
            partitions=TRANSACTIONS.partitions(props),
            id_expiration_ms=get("transactional.id.expiration.ms"),
            expiry_interval_ms=get("transaction.remove.expired.transaction.cleanup.interval.ms"),
            verify_partitions=props.get(
                "transaction.partition.verification.enable",
                TXN_DEFAULTS["transaction.partition.verification.enable"]).lower() == "true",
        )

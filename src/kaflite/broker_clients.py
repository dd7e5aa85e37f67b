"""The connections a broker opens to other brokers, known by their client id.

A broker's replica fetcher says what it is in its Fetch (the replica id), but only
from its first Fetch: before that its ApiVersions (and SASL) look like any client's.
Apache Kafka's brokers name their inter-broker connections by a fixed convention, so
the client id of the first request already tells. Read from the 4.4.0 jars with
``javap``:

* ``ReplicaFetcherManager.createFetcherThread`` hands ``BrokerBlockingSender`` the
  client id ``broker-<id>-fetcher-<fetcher id>``;
* ``TransactionMarkerChannelManager`` uses ``broker-<id>-txn-marker-sender``;
* ``NetworkUtils.buildNetworkClient(prefix, ...)`` uses ``<prefix>-client-<id>``, for
  the share-group state ``Persister``, the ``AddPartitionsManager`` (transaction
  verification, KIP-890), the ``ShareGroupDLQManager`` and the
  ``NetworkPartitionMetadataClient`` (``BrokerServer``).

kaflite's brokers use the same client ids. Before they did, they were
``replica-fetcher-<id>``, ``txn-coordinator-<id>`` and ``share-persister-<id>``;
those are recognised too, so that a request log written then still reads right.

A client id is not authenticated: a client can name itself like a broker. What is
decided from it is only how a connection is shown (its role, whether it is a
client's); quotas and the authorizer go by the replica id and the principal.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "INTER_BROKER",
    "REPLICA_FETCHER",
    "TXN_MARKER_SENDER",
    "BrokerClient",
    "broker_client",
    "fetcher_client_id",
    "marker_sender_client_id",
    "persister_client_id",
]

REPLICA_FETCHER = "replica-fetcher"
TXN_MARKER_SENDER = "txn-marker-sender"
INTER_BROKER = "inter-broker"          # the other inter-broker channels

_NETWORK_CLIENTS = "Persister|AddPartitionsManager|ShareGroupDLQManager|" \
                   "NetworkPartitionMetadataClient"
_CONVENTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"broker-(\d+)-fetcher-\d+"), REPLICA_FETCHER),
    (re.compile(r"broker-(\d+)-txn-marker-sender"), TXN_MARKER_SENDER),
    (re.compile(rf"(?:{_NETWORK_CLIENTS})-client-(\d+)"), INTER_BROKER),
    # kaflite's own, before it took Kafka's
    (re.compile(r"replica-fetcher-(\d+)"), REPLICA_FETCHER),
    (re.compile(r"txn-coordinator-(\d+)"), TXN_MARKER_SENDER),
    (re.compile(r"share-persister-(\d+)"), INTER_BROKER),
)


class BrokerClient(NamedTuple):
    """A broker's connection to another broker: what it does, and whose it is."""

    role: str      # REPLICA_FETCHER, TXN_MARKER_SENDER or INTER_BROKER
    broker: int    # the broker that opened it


@lru_cache(maxsize=4096)
def broker_client(client_id: str | None) -> BrokerClient | None:
    """The broker connection a request's ``client_id`` names; None for a client's."""
    if not client_id:
        return None
    for pattern, role in _CONVENTIONS:
        found = pattern.fullmatch(client_id)
        if found is not None:
            return BrokerClient(role, int(found.group(1)))
    return None


def fetcher_client_id(broker: int, fetcher: int = 0) -> str:
    return f"broker-{broker}-fetcher-{fetcher}"


def marker_sender_client_id(broker: int) -> str:
    return f"broker-{broker}-txn-marker-sender"


def persister_client_id(broker: int) -> str:
    return f"Persister-client-{broker}"

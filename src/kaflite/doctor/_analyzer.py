"""The analyzer: request log records in, health per client and named findings out.

Theory of operation. ``feed`` takes records in time order (the order they were
answered; a reader merging the log's partitions sorts each batch by ``timestamp``,
and a record a little out of order only blurs a window's edge) and updates, for each
record, the state of its client (``_client.ClientState``: connections, metadata
refreshes, owner errors and recoveries, group membership, throttling) and of the
group it names (``_groups.GroupState``: generations, coordinator). Nothing is
decided while feeding: ``findings`` runs the checks (``_findings``) over the state
as it is, so feeding more and asking again gives the answer for everything fed.
The analyzer does no I/O and reads no clock: every time is a record's timestamp.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kaflite.broker_clients import INTER_BROKER, REPLICA_FETCHER, TXN_MARKER_SENDER, broker_client
from kaflite.doctor._client import ClientKey, ClientState, client_key
from kaflite.doctor._findings import CHECKS, client_findings, group_findings
from kaflite.doctor._groups import GroupState
from kaflite.doctor._model import ClientHealth, Finding, Report, Request
from kaflite.doctor._thresholds import DEFAULT, Thresholds

__all__ = ["Analyzer"]

# the roles of a broker's own connections (``kaflite.cluster.observe``): not a client's
BROKER_ROLES = frozenset({REPLICA_FETCHER, TXN_MARKER_SENDER, INTER_BROKER})


def from_broker(r: Request) -> bool:
    """A record of a broker's own connection to another broker. Its roles say so, and
    its client id does even where they do not: a replica fetcher's first requests, in
    a log written before the registry knew them from their client id."""
    return broker_client(r.client_id) is not None or not BROKER_ROLES.isdisjoint(r.roles)


class Analyzer:
    """Diagnoses a deployment from its request log (``__kaflite_requests``)."""

    def __init__(self, thresholds: Thresholds = DEFAULT, *,
                 ignore_clients: Collection[str] = ()) -> None:
        self.thresholds = thresholds
        self.ignore_clients = frozenset(ignore_clients)
        self.records = 0
        self.first: float | None = None
        self.last: float | None = None
        self._clients: dict[ClientKey, ClientState] = {}
        self._groups: dict[tuple[str, str], GroupState] = {}
        self._brokers: dict[str, set[int]] = {}    # source -> broker ids seen

    def feed(self, records: Iterable[Request]) -> int:
        """Take ``records`` (in time order); returns how many were taken: not those of
        the clients to ignore, nor a broker's own (``from_broker``)."""
        taken = 0
        for r in records:
            if (r.client_id is not None and r.client_id in self.ignore_clients) \
                    or from_broker(r):
                continue
            taken += 1
            ts = r.timestamp
            self.first = ts if self.first is None else min(self.first, ts)
            self.last = ts if self.last is None else max(self.last, ts)
            if r.broker >= 0:
                self._brokers.setdefault(r.source, set()).add(r.broker)
            key = client_key(r)
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = ClientState(key, self.thresholds)
            client.feed(r)
            if r.group is not None:
                group = self._groups.get((r.source, r.group))
                if group is None:
                    group = self._groups[(r.source, r.group)] = GroupState(r.source, r.group)
                group.feed(r)
        self.records += taken
        return taken

    def brokers(self, source: str | None = None) -> tuple[int, ...]:
        """The brokers seen answering, in ``source``'s records (for the proxy's: the
        upstream nodes) or, by default, in anyone's: a log the proxy alone writes, as
        in front of Apache Kafka, names the brokers too."""
        seen = self._brokers.get(source, set()) if source is not None \
            else set().union(*self._brokers.values())
        return tuple(sorted(seen))

    def health(self) -> list[ClientHealth]:
        """Each client's health, the busiest first."""
        states = sorted(self._clients.values(), key=lambda c: (-c.requests, str(c.key)))
        return [c.health() for c in states]

    def findings(self) -> list[Finding]:
        """Every finding the records fed so far support, by check and subject."""
        found: list[Finding] = []
        for client in self._clients.values():
            found += client_findings(client, len(self._brokers.get(client.key[0], ())),
                                     self.thresholds)
        for group in self._groups.values():
            found += group_findings(group, self.thresholds)
        return sorted(found, key=lambda f: (CHECKS.index(f.name), f.subject))

    def report(self) -> Report:
        return Report(self.records, self.first, self.last, self.brokers(),
                      tuple(self.health()), tuple(self.findings()))

"""``kaflite doctor`` over a slice of an embedded cluster's request log, for the demo.

The doctor is ``kaflite.doctor`` as ``kaflite doctor`` runs it: its reader
(``RequestLogReader``, every partition of ``__kaflite_requests`` from the beginning, up
to the end offsets it finds) feeding its ``Analyzer``, the doctor's own clients left
out. The demo adds two things: which records to read (all, or those answered after a
moment: the switch from the VIP to the proxy), and, first, a flush of every broker's
request log buffer, so that the log holds every request answered until then (the
brokers write it every ``kaflite.request.log.flush.ms`` otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kaflite._loop import run
from kaflite.cluster import Cluster
from kaflite.cluster.request_log import RequestRecord
from kaflite.doctor import Analyzer, ClientHealth, Finding
from kaflite.doctor.reader import DOCTOR_CLIENT_ID, RequestLogReader

__all__ = ["DoctorPass", "diagnose", "flush_request_log"]


@dataclass(frozen=True)
class DoctorPass:
    """What the doctor read and found."""

    requests: int                       # records the analyzer took
    clients: tuple[ClientHealth, ...]   # each client's health, the busiest first
    findings: tuple[Finding, ...]

    def requests_of(self, client_id: str) -> int:
        return sum(c.requests for c in self.clients if c.client_id == client_id)

    def findings_of(self, client_id: str) -> list[Finding]:
        return [f for f in self.findings if f.client_id == client_id]


def flush_request_log(cluster: Cluster) -> None:
    """Append what each broker has buffered for the request log, and wait for it."""
    async def flush() -> None:
        for node_id in sorted(cluster.brokers):
            log = cluster.broker(node_id).request_log
            if log is not None:
                await log.flush(wait=True)

    cluster.call(flush())


async def _read(bootstrap: str, keep: Callable[[RequestRecord], bool] | None) -> Analyzer:
    reader = RequestLogReader({"bootstrap.servers": bootstrap, "client.id": DOCTOR_CLIENT_ID},
                              keep=keep)
    analyzer = Analyzer(ignore_clients={DOCTOR_CLIENT_ID})
    try:
        await reader.open(0)
        await reader.catch_up(analyzer)
    finally:
        await reader.close()
    return analyzer


def diagnose(cluster: Cluster, keep: Callable[[RequestRecord], bool] | None = None
             ) -> DoctorPass:
    """Flush the request log, then run the doctor over its records (those ``keep``
    takes, if given)."""
    flush_request_log(cluster)
    report = run(_read(cluster.bootstrap_servers, keep)).report()
    return DoctorPass(report.records, report.clients, report.findings)

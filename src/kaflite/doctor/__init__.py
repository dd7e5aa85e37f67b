"""kaflite.doctor: diagnose a Kafka deployment from its request log.

The brokers (``kaflite.request.log.enable``) or kaflite's proxy write one record per
served request to ``__kaflite_requests`` (``kaflite.cluster.request_log``). The
``Analyzer`` reads those records, in time order, and reports

* the health of each client: its connections by role and broker, its metadata
  refreshes and their reasons, how long it takes to find a partition's or a group's
  new owner after being told to, its groups' rebalances with their generations and
  durations, its heartbeat and commit cadences, and throttling;
* named findings, each with its evidence and a line for the user:
  ``vip-bootstrap``, ``metadata-storm``, ``rebalance-storm``,
  ``coordinator-flapping``, ``connection-fanout``, ``idle-connections``.

The analyzer does no I/O. ``kaflite.doctor.reader`` (not imported here) reads the
topic for ``kaflite doctor``, which prints (``render_text``), and for the console's
Health view; ``kaflite.pipelines.control_plane`` feeds it from Spark micro-batches.
``docs/doctor.md`` explains each finding and its threshold.

    analyzer = Analyzer()
    analyzer.feed(records)            # RequestRecords, oldest first; again as more come
    for finding in analyzer.findings():
        print(finding.name, finding.subject, finding.explanation)
"""

from kaflite.doctor._analyzer import Analyzer
from kaflite.doctor._findings import CHECKS
from kaflite.doctor._model import (
    ClientHealth,
    ConnectionHealth,
    Evidence,
    Finding,
    GroupHealth,
    MetadataHealth,
    RecoveryHealth,
    Report,
    Request,
    ThrottleHealth,
)
from kaflite.doctor._render import render_text
from kaflite.doctor._thresholds import DEFAULT, Thresholds

__all__ = [
    "CHECKS",
    "DEFAULT",
    "Analyzer",
    "ClientHealth",
    "ConnectionHealth",
    "Evidence",
    "Finding",
    "GroupHealth",
    "MetadataHealth",
    "RecoveryHealth",
    "Report",
    "Request",
    "Thresholds",
    "ThrottleHealth",
    "render_text",
]

"""The doctor's report as text, for ``kaflite doctor``: the findings first, then each
client's health. Returns a string; printing is the caller's."""

from __future__ import annotations

from datetime import datetime

from kaflite.doctor._model import ClientHealth, Evidence, Finding, Report

__all__ = ["render_text"]


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S.%f")[:-3]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _evidence(e: Evidence) -> str:
    parts = ",".join(e.partitions[:4]) + ("..." if len(e.partitions) > 4 else "")
    errs = " ".join(f"{name}x{n}" for name, n in e.errors) or "-"
    group = f" group {e.group}" if e.group else ""
    return f"{_clock(e.timestamp)} b{e.broker} #{e.connection_id} {e.api}{group} " \
           f"{parts or '-'} {errs}"


def _finding(f: Finding) -> list[str]:
    counts = " ".join(f"{k}={v:g}" for k, v in f.counts.items())
    lines = [f"  {f.name}  {f.subject}", f"    {f.explanation}", f"    counts: {counts}"]
    lines += [f"      {_evidence(e)}" for e in f.records]
    return lines


def _client(c: ClientHealth) -> list[str]:
    software = f" ({', '.join(c.software)})" if c.software else ""
    errors = ", ".join(f"{k}={v}" for k, v in list(c.errors.items())[:4])
    lines = [f"  {c.subject}{software}: {c.requests} requests"
             + (f", errors {errors}" if errors else "")]
    roles = "; ".join(f"{role} " + " ".join(f"b{b}:{n}" for b, n in per.items())
                      for role, per in c.by_role.items())
    lines.append(f"    connections: {len(c.connections)} ({roles})")
    m = c.metadata
    reasons = ", ".join(f"{why} {n}" for why, n in m.reasons.items())
    lines.append(f"    metadata: {m.requests} ({m.per_minute:g}/min, peak {m.peak_per_minute}"
                 f" in a minute)" + (f": {reasons}" if reasons else ""))
    r = c.recovery
    if r.recovered or r.unrecovered:
        lines.append(f"    recovery: {r.recovered} recovered, median {_ms(r.median_ms)}, "
                     f"max {_ms(r.max_ms)}; {r.unrecovered} not recovered")
    for g in c.groups:
        gens = ",".join(str(x) for x in g.generations) or "-"
        word = "epochs" if g.protocol == "consumer" else "generations"
        duration = f", rebalance median {_ms(g.rebalance_median_ms)} max " \
                   f"{_ms(g.rebalance_max_ms)}" if g.rebalance_median_ms is not None else ""
        lines.append(f"    group {g.group} ({g.protocol}): {g.rebalances} rebalances, "
                     f"{word} {gens}{duration}; heartbeat every "
                     f"{_ms(g.heartbeat_interval_ms)}, commit every "
                     f"{_ms(g.commit_interval_ms)}")
    t = c.throttle
    if t.throttled_requests:
        lines.append(f"    throttled: {t.throttled_requests} requests, {t.total_ms} ms in "
                     f"all (max {t.max_ms} ms)")
    return lines


def render_text(report: Report) -> str:
    if report.first is None or report.last is None:
        return "kaflite doctor: no requests in the request log for this period\n"
    brokers = ",".join(str(b) for b in report.brokers) or "-"
    lines = [f"kaflite doctor: {report.records} requests from {_clock(report.first)} to "
             f"{_clock(report.last)}, brokers {brokers}", ""]
    if report.findings:
        lines.append(f"Findings ({len(report.findings)})")
        for f in report.findings:
            lines += _finding(f)
    else:
        lines.append("No findings.")
    lines += ["", f"Clients ({len(report.clients)})"]
    for c in report.clients:
        lines += _client(c)
    return "\n".join(lines) + "\n"

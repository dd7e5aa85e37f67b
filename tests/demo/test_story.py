"""The demo's story on its own: the plan, the phases, the summary and the status lines
fit in 100 columns, name their step, and never print ``None``."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from types import SimpleNamespace

from rich.cells import cell_len
from rich.console import Console

from kaflite.demo.logs import capture_python_logging, choose_log_file, log4j2_config
from kaflite.demo.run import DemoOptions, phase_titles
from kaflite.demo.story import WIDTH, Phases, fit, pack, plan_lines, wrap
from kaflite.demo.summary import build_summary, summary_lines
from kaflite.demo.tour import Step, tour_steps
from kaflite.demo.view import render, status_lines

DRIVER = "spark-source-1f0c9a2e-driver-0"
LONG_ID = "an-application-with-a-client-id-far-longer-than-any-screen-" * 3


def wide(lines: list[str]) -> list[str]:
    return [line for line in lines if cell_len(line) > WIDTH]


def client(connections: int, consumer: bool = False, **roles: int) -> SimpleNamespace:
    return SimpleNamespace(
        connections=connections, fan_out={0: 1, 1: connections - 1},
        roles=roles or {"partition-leader": connections},
        heartbeat_interval_ms=1000.0 if consumer else None,
        commit_interval_ms=2000.0 if consumer else None,
        fetch_rate=4.5 if consumer else None,
        principal="User:alice" if consumer else "User:ANONYMOUS",
        throttles=2 if consumer else 0, throttled_ms_total=350 if consumer else 0)


def snapshot() -> dict[str, object]:
    clients = {"producer": client(3), "consumer-1": client(4, True, **{"group-coordinator": 1}),
               "consumer-2": client(4, True), DRIVER: client(2), "spark-sink": client(4),
               "spark-source-executor": client(4), "spark-relation-executor": client(5),
               LONG_ID: client(1), "kaflite-console": client(3, admin=3)}
    return {
        "time": time.time(), "brokers": [(0, True), (1, True), (2, False)],
        "partitions": [(p, p % 2, [0, 1]) for p in range(6)], "clients": clients,
        "reported": {"producer": 3, "consumer-1": 4, "consumer-2": 4},
        "lag": {0: 3, 1: 0}, "acked": 123456, "consumed": 123450, "ahead": 0,
        "events": ["consumer-1: leader of events-0 moved 0→1"], "tour": None,
        "spark": "running, 12 micro-batches",
    }


# -- fitting text -----------------------------------------------------------------------
def test_fit_cuts_with_an_ellipsis_only_what_is_too_wide() -> None:
    assert fit("short") == "short"
    assert fit("x" * 100) == "x" * 100
    cut = fit("y" * 150)
    assert cell_len(cut) == 100 and cut.endswith("…")


def test_wrap_and_pack_keep_every_line_within_the_width() -> None:
    text = "word " * 60 + LONG_ID
    lines = wrap(text, indent="  ", subsequent="    ")
    assert len(lines) > 3 and not wide(lines)
    assert all(line.startswith("      ") for line in lines[1:])
    items = [f"client-{i} {i}" for i in range(40)] + [LONG_ID]
    packed = pack("connections:", items, indent="  ")
    assert not wide(packed) and len(packed) > 3
    # broken between items, never inside one (except an item wider than a line)
    assert " ".join(packed).count("client-39 39") == 1
    assert packed[0].startswith("connections: client-0 0,")


# -- the plan -----------------------------------------------------------------------------
def test_the_plan_says_what_it_starts_breaks_and_checks_and_where_the_logs_go() -> None:
    faults = [(0.12 * 60, "move the leader of partition 0"), (0.27 * 60, "kill broker 2")]
    lines = plan_lines(brokers=3, duration=60, rate=400, spark=True, faults=faults,
                       log_file="/tmp/some-dir/demo.log")
    assert lines[0].startswith("kaflite demo: the plan")
    text = " ".join(line.strip() for line in lines)
    for label in ("start:", "break:", "check:", "logs:"):
        assert any(line.lstrip().startswith(label) for line in lines), label
    assert "3-broker cluster" in text and "Spark streaming job" in text
    assert "at 7s move the leader of partition 0" in text and "at 16s kill broker 2" in text
    assert "lost 0" in text and "Spark's windows" in text and "/tmp/some-dir/demo.log" in text
    assert not wide(lines)
    calm = plan_lines(brokers=1, duration=10, rate=10, spark=False, faults=[], log_file="x")
    text = " ".join(calm)
    assert "needs 3 brokers" in text and "Spark" not in text.split("logs:")[0]


# -- the phases ---------------------------------------------------------------------------
def test_every_phase_is_numbered_as_it_starts_and_the_tour_steps_are_phases() -> None:
    opts = DemoOptions(brokers=3, spark=True, faults=True)
    titles = phase_titles(opts)
    assert [s.title for s in tour_steps(2)] == titles[5:10]
    assert titles[0] == "start a 3-broker cluster" and titles[-1] == "stop the clients and Spark"
    assert len(titles) == len(set(titles)) == 13
    assert len(phase_titles(DemoOptions(brokers=1, spark=False))) == 6  # no tour, no Spark
    said: list[str] = []
    phases = Phases(titles, said.append)
    assert phases.current == "starting"
    phases.begin("kill broker 2", "expect: " + "elections everywhere " * 8)
    assert said[0] == "step 7/13: kill broker 2"
    assert said[1].startswith("    expect: elections") and len(said) > 2 and not wide(said)
    assert phases.current == "step 7/13 kill broker 2"
    assert phases.started == ["kill broker 2"]


# -- the status lines and the live view ---------------------------------------------------
def test_status_lines_name_the_step_and_fit_with_long_client_ids() -> None:
    snap = snapshot()
    lines = status_lines(snap, "step 7/13 kill broker 2")
    assert re.match(r"\[\d\d:\d\d:\d\d\] step 7/13 kill broker 2 \| acked 123456 "
                    r"consumed 123450 lag 3$", lines[0]), lines[0]
    assert "2(down)" in lines[1] and "spark: running, 12 micro-batches" in " ".join(lines)
    text = " ".join(lines)
    for cid in ("producer 3", "consumer-1 4", f"{DRIVER} 2", "spark-sink 4"):
        assert cid in text, cid
    assert not wide(lines) and "None" not in text and len(lines) >= 4


def test_the_live_view_shows_the_step_and_fits_the_console() -> None:
    console = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render(snapshot(), "step 6/13 move the leader of partition 0"))
    out = console.export_text()
    console.file.close()
    assert out.splitlines()[0] == "step 6/13 move the leader of partition 0"
    assert "Connections" in out and not wide(out.splitlines())
    # each client's principal and the throttles it was given (quotas)
    consumer = next(line for line in out.splitlines() if "consumer-1 " in line and "4/4" in line)
    assert "alice" in consumer and "2x 350 ms" in consumer, consumer
    producer = next(line for line in out.splitlines() if "producer " in line)
    assert "ANONYMOUS" in producer and "ms" not in producer, producer


# -- the summary --------------------------------------------------------------------------
def workload() -> SimpleNamespace:
    seen = set(range(10))
    return SimpleNamespace(acked=set(range(10)), consumed=lambda: seen, failed=[],
                           consumers=[SimpleNamespace(records=10), SimpleNamespace(records=10)],
                           producing_s=0.5, rate=400)


def test_the_summary_has_no_none_and_marks_what_spark_clients_cannot_report() -> None:
    snap = snapshot()
    spark = {"ok": True, "detail": "28 closed windows, 28 result rows: 0 missing",
             "windows": 28, "results": 28, "missing": [], "wrong": []}
    s = build_summary(workload(), None, snap, spark, True, ["start a 3-broker cluster"],
                      "/tmp/x/demo.log")
    assert s["clients"]["consumer-1"]["reported_by_client"] == 4
    assert s["clients"]["consumer-1"]["heartbeat_interval_ms"] == 1000.0
    # nobody measured these: left out, not None
    assert "reported_by_client" not in s["clients"][DRIVER]
    assert "heartbeat_interval_ms" not in s["clients"]["producer"]

    def nones(v: object) -> bool:
        if isinstance(v, dict):
            return any(nones(x) for x in v.values())
        if isinstance(v, list):
            return any(nones(x) for x in v)
        return v is None

    assert not nones(s)
    assert s["checks"]["consumers_seen_by_registry"] and s["log_file"] == "/tmp/x/demo.log"
    lines = [line for line, _style in summary_lines(s)]
    text = "\n".join(lines)
    assert "None" not in text and not wide(lines)
    assert re.search(r"consumer-1 +4 / 4 +group-coordinator x1", text)
    assert re.search(rf"{DRIVER} +2 / - +partition-leader x2", text)
    assert "Python workers" in text
    # Issue 40: the console's own clients are named as such, with their role
    assert re.search(r"kaflite-console \(web console\) +3 / - +admin x3", text), text
    assert "the web console's in the console's server" in " ".join(" ".join(lines).split())
    # the rate the producer achieved, beside the one it was asked for
    assert lines[0].startswith("produced 10 in 0.5s (20/s; asked for 400/s)"), lines[0]
    assert lines[-1] == "Spark's, Java's and Python's logs: /tmp/x/demo.log"


def test_summary_lines_wrap_a_long_tour_outcome() -> None:
    step = Step(0.1, "kill broker 2", "elections")
    step.status, step.outcome = "done", "now " + ", ".join(
        f"p{p}: leader 1 isr [1, 0]" for p in range(12))
    step.observed = ["consumer-2: metadata refresh " + "(leaders moved) " * 10]
    tour = SimpleNamespace(steps=[step])
    s = build_summary(workload(), tour, snapshot(), {"ok": False, "detail": "off"}, False,
                      [], "log")
    lines = [line for line, _ in summary_lines(s)]
    assert not wide(lines) and any("p11: leader 1" in line for line in lines)
    assert s["checks"]["tour_complete"]


# -- the log file -------------------------------------------------------------------------
def test_the_log_file_is_chosen_kept_and_catches_python_warnings(tmp_path: Path) -> None:
    assert choose_log_file(tmp_path / "a" / "b.log", None) == (tmp_path / "a" / "b.log")
    kept = choose_log_file(None, tmp_path / "data")
    assert kept == tmp_path / "data" / "logs" / "demo.log" and kept.exists()
    fresh = choose_log_file(None, None)
    try:
        assert fresh.exists() and fresh.name == "demo.log"
        assert fresh.parent.name.startswith("kaflite-demo-logs-")
    finally:
        fresh.unlink()
        fresh.parent.rmdir()
    config = log4j2_config(kept).read_text()
    assert "rootLogger.level = info" in config
    assert f"appender.file.fileName = {kept.as_posix()}" in config
    handler = capture_python_logging(kept)
    try:
        logging.getLogger("kaflite.demo.test").warning("a warning for the log file")
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert "WARNING kaflite.demo.test (python): a warning for the log file" in kept.read_text()


def test_the_counts_never_show_more_consumed_than_acknowledged() -> None:
    """Issue 40: "acked 16340 consumed 16344". A record is readable once the in-sync
    replicas have it, so a consumer may read it before the producer hears its ack:
    those are counted apart, and consumed counts acknowledged records only."""
    from kaflite.demo.workload import Workload

    w = Workload.__new__(Workload)      # the counting alone: no clients
    w.acked = set(range(100))
    w.consumers = [SimpleNamespace(seen=set(range(0, 60))),
                   SimpleNamespace(seen=set(range(50, 104)))]
    progress = w.progress()
    assert (progress.acked, progress.consumed, progress.ahead) == (100, 100, 4)
    snap = {**snapshot(), "acked": progress.acked, "consumed": progress.consumed,
            "ahead": progress.ahead}
    line = status_lines(snap, "step 5/12 traffic flows")[0]
    assert "acked 100 consumed 100 (+4 read before their ack) lag 3" in line, line


def test_the_producer_keeps_to_its_rate_by_the_clock() -> None:
    """Issue 40: the plan said 400 records/s; a send loop that slept a tick after each
    batch sent fewer, and nothing said how many per second were sent. The clock says
    how many are due; after a stall the loop catches up by at most a second's worth."""
    from kaflite.demo.workload import records_due

    assert records_due(400, 0.05, 0) == 20
    assert records_due(400, 0.05, 20) == 0
    assert records_due(400, 10.0, 3000) == 400       # behind by 1000: a second's worth
    assert records_due(400, 10.0, 4100) == 0         # ahead: nothing
    sent = 0
    for tick in range(1, 1201):                       # 60 s in ticks of 50 ms
        sent += records_due(400, tick / 20, sent)
    assert sent == 24_000


def test_no_record_flows_before_the_traffic_phase() -> None:
    """Issue 40: "traffic flows" opened with 11,120 records already acknowledged: the
    producer sent from the moment it started, through Spark's start-up."""
    import asyncio

    from kaflite.demo.workload import Workload

    async def main() -> None:
        w = Workload.__new__(Workload)
        w.producer = SimpleNamespace(start=_nothing)
        w.add_consumer = _nothing
        w._producing, w.producing_since = None, None
        await w.start(consumers=2)
        assert w._producing is None and w.producing_s == 0.0

    asyncio.run(main())


async def _nothing() -> None:
    return None


def test_sparks_status_says_what_its_first_batch_does_then_counts_batches() -> None:
    """Issue 40: "spark: running, 0 micro-batches" for the whole traffic phase. The first
    micro-batch reads everything since the start and warms Spark up; until it is done the
    view says what the query does, then counts batches and events (kept by batch id, as
    Spark keeps only its last 100 progress updates)."""
    from kaflite.demo.spark_step import SparkStep

    step = SparkStep("b", "events", "results", enabled=True, log_file=Path("/dev/null"))
    query = SimpleNamespace(recentProgress=[{"batchId": 0, "numInputRows": 0}],
                            status={"message": "Processing new data"})
    step._queries, step.status = [query], "running"   # type: ignore[list-item]
    assert "no micro-batch done yet (processing new data)" in step.describe()
    query.recentProgress = [{"batchId": 0, "numInputRows": 9760}]
    assert step.describe() == "running, 1 micro-batch, 9760 events read"
    query.recentProgress = [{"batchId": 0, "numInputRows": 9760},
                            {"batchId": 1, "numInputRows": 700}]
    assert step.describe() == "running, 2 micro-batches, 10460 events read"
    query.recentProgress = [{"batchId": 2, "numInputRows": 40},
                            {"batchId": 2, "numInputRows": 0}]   # then idle
    assert step.describe() == "running, 3 micro-batches, 10500 events read"
    step.stop()

"""``kaflite.verify`` against Apache Kafka's own broker (issue 37 §2): the same workloads
and checker, with real broker processes killed (SIGKILL), stopped (SIGTERM, Kafka's
controlled shutdown), the whole cluster killed at once, and leaderships moved.

The faults that need kaflite's hooks (injected errors, delays, throttles, dropped
connections, isolation, coordinator moves) are left out on a bare Kafka, and the run
records that in its history. With ``via_proxy`` kaflite's proxy stands in front of
Kafka and injects errors, delays, throttles and drops from the same rules kaflite's
cluster takes; isolation and coordinator moves stay left out. A failure prints the
report and the command that replays it; docs/reliability.md has Kafka's results next
to kaflite's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.verify.clients import factory
from kaflite.verify.history import Meta
from kaflite.verify.report import render_text, replay_command
from kaflite.verify.runner import RunConfig, run
from kaflite.verify.targets import KAFKA_KINDS, PROXY_KINDS

pytestmark = pytest.mark.interop

# client, workload, group protocol, seed (each kaflite seed's plan has a broker killed,
# a leader move and a crash of the whole cluster within the round)
ROUNDS = [("kaflite", "queue", "consumer", 7), ("confluent-kafka", "queue", "classic", 7),
          ("kaflite", "txn", "classic", 11)]


@pytest.mark.parametrize(("client", "workload", "protocol", "seed"), ROUNDS,
                         ids=[f"{c}-{w}-{p}-seed{s}" for c, w, p, s in ROUNDS])
def test_verify_round_on_apache_kafka(kafka_libs: Path, tmp_path: Path, client: str,
                                      workload: str, protocol: str, seed: int) -> None:
    if client == "confluent-kafka":
        pytest.importorskip("confluent_kafka")
    config = RunConfig(client=client, workload=workload, seconds=20.0, seed=seed,
                       group_protocol=protocol, target="kafka", kafka_libs=kafka_libs,
                       history=tmp_path / "history.jsonl")
    history, result = run(config)
    meta = next(op for op in history.ops if isinstance(op, Meta)).config
    assert result.valid, (f"\n{render_text(result)}\nreplay: {replay_command(meta)}")
    # the round really hurt Kafka: only the faults it can take, and each of them that
    # the client's known bugs leave in (confluent-kafka's leave leader moves alone)
    known = set(factory(client).known_issues.get(workload, {}))
    assert set(result.faults) <= KAFKA_KINDS
    assert KAFKA_KINDS - known - {"stop"} <= set(result.faults), result.faults
    assert set(meta["excluded_faults"]) == {"coordinator", "isolate", "errors", "delay",
                                            "throttle", "drop"} | known


PROXIED = ("errors", "delay", "throttle", "drop", "kill")


def test_verify_round_on_apache_kafka_via_the_proxy(kafka_libs: Path, tmp_path: Path) -> None:
    """One short round, kaflite's client through kaflite's proxy in front of Kafka: the
    proxy's faults (each kind of them) and real broker kills in one run, valid."""
    config = RunConfig(client="kaflite", workload="queue", seconds=20.0, seed=7,
                       nemesis=PROXIED, target="kafka", kafka_libs=kafka_libs,
                       via_proxy=True, history=tmp_path / "history.jsonl")
    history, result = run(config)
    meta = next(op for op in history.ops if isinstance(op, Meta)).config
    assert result.valid, (f"\n{render_text(result)}\nreplay: {replay_command(meta)}")
    known = set(factory("kaflite").known_issues.get("queue", {}))
    assert set(result.faults) <= KAFKA_KINDS | PROXY_KINDS
    assert set(PROXIED) - known <= set(result.faults), result.faults
    assert set(meta.get("excluded_faults", {})) == known & set(PROXIED)
    assert meta["via_proxy"] and set(meta["fault_means"]) == set(PROXIED) - known
    assert {"Heartbeat UNKNOWN_MEMBER_ID", "OffsetCommit UNKNOWN_MEMBER_ID"} \
        <= set(meta["excluded_errors"])
    shots = [op for op in history.ops if getattr(op, "fault", None) == "errors"
             and op.error is None]
    assert sum(op.args.get("injected", 0) for op in shots) > 0

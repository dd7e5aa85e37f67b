"""The README's tour, run as written: every snippet, in order, and what each step claims.

The test reads README.md itself, so the tour cannot drift from what is tested. It
works in a fresh directory holding a link to this ``.venv`` (the README's commands
say ``.venv/bin/...``), starts ``kaflite up`` as the tour does (on its fixed ports,
9092-9094 and 9990), runs each shell line and Python snippet, and after each one
checks what the README says it shows. A snippet this file does not know is a
failure: a new step must come with its check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kaflite.client import TopicPartition
from kaflite.client.sync import Admin
from tests.cli._up import KafliteUp
from tests.conftest import wait_for
from tests.spark.clickstream_expected import expected

README = Path(__file__).resolve().parents[1] / "README.md"
VENV = Path(sys.executable).parents[1]
BOOTSTRAP = "127.0.0.1:9092"


@dataclass
class Snippet:
    lang: str
    code: str


def section_snippets(text: str, heading: str) -> list[Snippet]:
    """The fenced blocks of one README section, in order."""
    start = text.index(f"## {heading}")
    end = text.index("\n## ", start + 1)
    return [Snippet(lang, code) for lang, code in
            re.findall(r"^```(\w+)\n(.*?)^```", text[start:end], flags=re.S | re.M)]


@dataclass
class Tour:
    """The state the checks share: the workspace, the cluster and what was seen."""

    cwd: Path
    env: dict[str, str]
    up: KafliteUp | None = None
    producer: str | None = None
    leader_before: int | None = None
    seen: list[str] = field(default_factory=list)
    times: list[tuple[str, float]] = field(default_factory=list)   # shown with -s

    @classmethod
    def fresh(cls, directory: Path) -> Tour:
        """A new user's directory: ``.venv`` linked in, no cluster named by the environment."""
        (directory / ".venv").symlink_to(VENV)
        return cls(directory, {k: v for k, v in os.environ.items()
                               if k not in ("KAFLITE_BOOTSTRAP", "KAFLITE_HTTP",
                                            "KAFLITE_CLUSTER")})

    def sh(self, line: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["bash", "-c", line], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(VENV / "bin" / "python"), "-c", code], cwd=self.cwd,
                              env=self.env, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f"{code}\n{proc.stdout}\n{proc.stderr}"
        return proc


def partitions(topic: str = "events") -> list[tuple[int, int, list[int]]]:
    """(partition, leader, isr) of each partition, as the cluster reports them."""
    with Admin({"bootstrap.servers": BOOTSTRAP}) as admin:
        md = admin.describe_topics([topic])[topic]
    return sorted((p.partition, p.leader, sorted(p.isr)) for p in md.partitions)


def records_in(topic: str = "events", partitions: int = 3) -> int:
    with Admin({"bootstrap.servers": BOOTSTRAP}) as admin:
        ends = admin.list_offsets({TopicPartition(topic, p): "latest"
                                   for p in range(partitions)})
    return sum(o.offset for o in ends.values())


# -- the checks, one per README command ---------------------------------------------------
def check_up(tour: Tour, line: str) -> None:
    assert line == ".venv/bin/kaflite up --brokers 3 --data-dir ./data"
    tour.up = KafliteUp(command=["bash", "-c", f"exec {line}"], cwd=tour.cwd, env=tour.env,
                        timeout=90).start()
    assert tour.up.value("bootstrap.servers=").split(",")[0] == BOOTSTRAP
    assert (tour.cwd / "data" / "kaflite-cluster.json").exists()


def check_create(tour: Tour, line: str) -> None:
    tour.sh(line)
    parts = partitions()
    assert [p for p, _, _ in parts] == [0, 1, 2]
    assert all(isr == [0, 1, 2] for _, _, isr in parts), parts


def check_describe(tour: Tour, line: str) -> None:
    out = tour.sh(line).stdout
    assert "events" in out
    for _, leader, _ in partitions():   # after `chaos kill 1`, leaders are on 0 and 2
        assert str(leader) in out


def check_group(tour: Tour, line: str) -> None:
    out = tour.sh(line).stdout
    assert "tour" in out and "events" in out, out


def check_connections(tour: Tour, line: str) -> None:
    out = tour.sh(line + " --json").stdout
    rows = json.loads(out)
    roles = {role for row in rows for role in row["roles"]}
    assert {"group-coordinator", "partition-leader"} <= roles, roles


def check_move_leader(tour: Tour, line: str) -> None:
    before = partitions()[0][1]
    tour.sh(line)
    wait_for(lambda: partitions()[0][1] not in (before, -1), "partition 0's leader to move",
             30, state=partitions)


def check_kill(tour: Tour, line: str) -> None:
    tour.sh(line)
    wait_for(lambda: all(leader in (0, 2) and 1 not in isr for _, leader, isr in partitions()),
             "broker 1's partitions to fail over", 60, state=partitions)


def check_restart(tour: Tour, line: str) -> None:
    tour.sh(line)
    wait_for(lambda: all(isr == [0, 1, 2] for _, _, isr in partitions()),
             "broker 1 to rejoin every ISR", 90, state=partitions)


def check_error(tour: Tour, line: str) -> None:
    tour.sh(line)
    assert tour.producer is not None
    tour.python(tour.producer)           # "run the producer above again"
    assert records_in() == 20


def check_consume(tour: Tour, line: str) -> None:
    out = tour.sh(line).stdout.splitlines()
    if " -t events " in line:
        assert sorted(out) == sorted([f"click {i}" for i in range(10)] * 2), out
        return
    assert " -t clicks-per-minute " in line, line
    # The pipeline's windows are exactly what plain Python computes from the generated
    # events: one final row per window the watermark passed (append mode), none missing.
    windows = [json.loads(row) for row in out]
    got = {f"{w['page']}|{w['window_start']}": {**w, "revenue": round(w["revenue"], 2)}
           for w in windows}
    assert len(got) == len(windows), out[:5]
    events = [json.loads(row) for row in
              tour.sh(".venv/bin/kaflite consume -t clicks -e").stdout.splitlines()]
    assert len(events) == 5000
    want = expected(events)
    assert len(want) >= 3 and got == want, (sorted(got.items())[:3], sorted(want.items())[:3])


def check_generate(tour: Tour, line: str) -> None:
    proc = tour.sh(line)
    assert "5000 records written to clicks, all acknowledged" in proc.stderr, proc.stderr


def check_pipeline(tour: Tour, line: str) -> None:
    proc = tour.sh(line)
    # Spark's logs go to the file it names, not to the terminal (issue 40: WARN lines)
    out = proc.stdout + proc.stderr
    assert not re.search(r"\b(WARN|INFO|ERROR)\b|log4j|SLF4J", out), out
    named = re.search(r"Spark's logs go to (\S+)", out)
    assert named and "SparkContext: Running Spark version" in Path(named[1]).read_text(), out


SHELL: dict[str, Callable[[Tour, str], None]] = {
    "kaflite up ": check_up,
    "kaflite topics create ": check_create,
    "kaflite topics describe ": check_describe,
    "kaflite groups describe ": check_group,
    "kaflite connections": check_connections,
    "kaflite chaos move-leader ": check_move_leader,
    "kaflite chaos kill ": check_kill,
    "kaflite chaos restart ": check_restart,
    "kaflite chaos error ": check_error,
    "kaflite consume ": check_consume,
    "kaflite produce ": check_generate,
    "kaflite pipeline clickstream ": check_pipeline,
}


def run_python(tour: Tour, code: str) -> None:
    if "def test_" in code:   # the pytest example: saved as test_app.py, run as the README says
        (tour.cwd / "test_app.py").write_text(code)
        out = tour.sh(".venv/bin/pytest test_app.py").stdout   # as the README says
        assert "1 passed" in out, out
    elif "Producer(" in code and "confluent_kafka" in code:
        tour.producer = code
        tour.python(code)
        assert records_in() == 10
    elif "Consumer(" in code:
        out = tour.python(code).stdout.splitlines()
        records = [line for line in out if "b'click " in line]
        assert records, f"the first getmany returned no records: {out}"
        assert any("coordinator" in line for line in out), out
    elif 'format("kaflite")' in code:
        tour.python(code)
        out = tour.sh(".venv/bin/kaflite consume -t shouted -e").stdout.splitlines()
        assert sorted(out) == sorted([f"CLICK {i}" for i in range(10)] * 2), out
    else:
        raise AssertionError(f"a README snippet with no check in {__file__}:\n{code}")


def left_unignored(tour: Tour) -> list[str]:
    """What the tour left in its directory that git would not ignore in this checkout
    (issue 40: the secured cluster's pki/, private keys included, was left untracked)."""
    names = [p.name + ("/" if p.is_dir() else "") for p in sorted(tour.cwd.iterdir())
             if p.name != ".venv"]
    return [name for name in names if subprocess.run(
        ["git", "-C", str(README.parent), "check-ignore", "--no-index", "-q", name],
        capture_output=True).returncode != 0]


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    tour = Tour.fresh(tmp_path)
    snippets = section_snippets(README.read_text(), "A five-minute tour")
    assert [s.lang for s in snippets][:3] == ["sh", "sh", "python"]
    try:
        for snippet in snippets:
            if snippet.lang == "python":
                began = time.monotonic()
                run_python(tour, snippet.code)
                tour.times.append((snippet.code.splitlines()[0], time.monotonic() - began))
                continue
            assert snippet.lang == "sh", snippet
            for line in snippet.code.splitlines():
                check = next((f for key, f in SHELL.items() if key in line), None)
                assert check is not None, f"a README command with no check: {line}"
                began = time.monotonic()
                check(tour, line)
                tour.times.append((line, time.monotonic() - began))
                tour.seen.append(line)
        assert any("chaos kill" in line for line in tour.seen)
        assert (tour.cwd / "data").is_dir() and (tour.cwd / "test_app.py").is_file()
        assert not left_unignored(tour), left_unignored(tour)
        for step, took in tour.times:
            print(f"{took:6.1f} s  {step}")
    finally:
        if tour.up is not None:
            assert tour.up.stop() == 0, tour.up.lines


# -- "A secured cluster" ------------------------------------------------------------------
def check_certs(tour: Tour, line: str) -> None:
    tour.sh(line)
    for name in ("ca.pem", "broker.properties", "client-alice.pem", "client-alice-key.pem"):
        assert (tour.cwd / "pki" / name).exists(), name


def check_secured_up(tour: Tour, line: str) -> None:
    tour.up = KafliteUp(command=["bash", "-c", f"exec {line}"], cwd=tour.cwd, env=tour.env,
                        timeout=90).start()
    assert "SASL_SSL (SASL_SSL): bootstrap.servers=127.0.0.1:9192,127.0.0.1:9193," \
        "127.0.0.1:9194" in tour.up.lines, tour.up.lines


def check_secured_connections(tour: Tour, line: str) -> None:
    out = tour.sh(line).stdout
    assert "User:alice" in out and "SASL_SSL/SCRAM-S" in out, out   # the column may wrap
    rows = json.loads(tour.sh(line + " --json").stdout)
    mine = [r for r in rows if r["principal"] == "User:alice"]
    assert mine and all(r["sasl_mechanism"] == "SCRAM-SHA-512" for r in mine), rows
    # the quota that held alice's producer, on the connections it produced on
    limits = {q["limit"] for r in mine for k, q in r["quotas"].items()
              if k == "producer_byte_rate"}
    assert limits == {1048576.0}, mine


def check_acls_add(tour: Tour, line: str) -> None:
    out = tour.sh(line).stdout
    for op in ("WRITE", "DESCRIBE", "CREATE"):     # what --producer grants
        assert f"principal=User:alice, host=*, operation={op}, permissionType=ALLOW" in out, out


def check_acls_list(tour: Tour, line: str) -> None:
    out = tour.sh(line).stdout
    assert "name=secured, patternType=LITERAL" in out and out.count("User:alice") == 3, out


def check_quota_alter(tour: Tour, line: str) -> None:
    assert "Completed updating config for user alice." in tour.sh(line).stdout


def check_quota_describe(tour: Tour, line: str) -> None:
    assert tour.sh(line).stdout.strip() == \
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0"


SECURED: dict[str, Callable[[Tour, str], None]] = {
    "kaflite certs ": check_certs,
    "kaflite up ": check_secured_up,
    "kaflite acls add ": check_acls_add,
    "kaflite acls list ": check_acls_list,
    "kaflite quotas alter ": check_quota_alter,
    "kaflite quotas describe ": check_quota_describe,
    "kaflite connections": check_secured_connections,
}

# The README's claim that alice may not read: in a group (no READ on the group) and
# with partitions assigned (no READ on the topic), the error reaches the application.
ALICE_READS = """
from kaflite.client.consumer import TopicPartition
from kaflite.client.sync import Consumer
from kaflite.protocol import errors
conf = {"bootstrap.servers": "127.0.0.1:9192", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": "alice-secret", "ssl.ca.location": "pki/ca.pem",
        "auto.offset.reset": "earliest"}
for group, refused in (("readers", errors.GroupAuthorizationFailedError),
                       (None, errors.TopicAuthorizationFailedError)):
    with Consumer({**conf, "group.id": group} if group else conf) as c:
        if group:
            c.subscribe(["secured"])
        else:
            c.assign([TopicPartition("secured", 0)])
        try:
            for _ in range(30):
                c.poll(1000)
            raise SystemExit(f"alice was never refused (group {group})")
        except refused:
            pass
"""


def test_the_readme_secured_cluster_runs_as_written(tmp_path: Path) -> None:
    tour = Tour.fresh(tmp_path)
    snippets = section_snippets(README.read_text(), "A secured cluster")
    assert [s.lang for s in snippets] == ["sh", "sh", "python", "sh"]
    try:
        for snippet in snippets:
            if snippet.lang == "python":
                assert '"security.protocol": "SASL_SSL"' in snippet.code
                tour.python(snippet.code)
                assert records_in("secured", partitions=1) == 1
                tour.python(ALICE_READS)
                continue
            for line in snippet.code.splitlines():
                check = next((f for key, f in SECURED.items() if key in line), None)
                assert check is not None, f"a README command with no check: {line}"
                check(tour, line)
        assert (tour.cwd / "pki").is_dir() and not left_unignored(tour), left_unignored(tour)
    finally:
        if tour.up is not None:
            assert tour.up.stop() == 0, tour.up.lines

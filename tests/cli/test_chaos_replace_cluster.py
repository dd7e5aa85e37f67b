"""``kaflite up --front-port`` and ``kaflite chaos replace-cluster``: a whole new cluster
behind the same bootstrap address, driven from the command line. A kaflite client that
was working before keeps working after (it re-bootstraps through the front), the
console comes back on the new cluster, and the state file names the new cluster id."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kaflite.client import sync
from tests.cli._up import KafliteUp, kaflite


def test_replace_cluster_from_the_command_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KAFLITE_TOKEN", "KAFLITE_CLUSTER", "KAFLITE_HTTP")}
    env["KAFLITE_STATE_DIR"] = str(tmp_path / "state")     # this test's cluster only
    with KafliteUp("--brokers", "1", "--front-port", "0", "--http-port", "0",
                   env=env) as up:
        front = up.value("bootstrap.servers=")
        old_id = up.value("kaflite cluster ").split(":")[0]
        url = up.value("HTTP API on ")
        made = kaflite("produce", "-t", "t", "--create", stdin="before\n", env=env)
        assert made.returncode == 0, made.stderr
        with sync.Producer(bootstrap_servers=front, client_id="cli-rb") as p:
            p.send("t", b"one", timeout=60)

            done = kaflite("chaos", "replace-cluster", "--json", "--http", url, env=env)
            assert done.returncode == 0, done.stderr
            r = json.loads(done.stdout)
            assert r["old_cluster_id"] == old_id != r["new_cluster_id"]
            assert r["topics"] == ["t"] and r["retire"] == "stop"
            up.read_until(f"cluster {old_id} replaced by {r['new_cluster_id']}")

            p.send("t", b"two", timeout=60)       # the same client, through the front
            assert any(e.message == "re-bootstrap" for e in p.events("bootstrap"))

        read = kaflite("consume", "-t", "t", "-o", "beginning", "-e", env=env)
        assert read.returncode == 0 and read.stdout.split() == ["two"], read.stderr
        described = kaflite("chaos", "list", "--http", url, env=env)   # the console is back
        assert described.returncode == 0, described.stderr
        [state_file] = (tmp_path / "state").glob("up-*.json")
        state = json.loads(state_file.read_text())
        assert state["cluster_id"] == r["new_cluster_id"] and state["bootstrap"] == front
    assert up.proc is not None and up.proc.returncode == 0

"""``kaflite quotas alter|describe``: kafka-configs.sh's quota lines, JSON, and what
the broker then enforces."""

from __future__ import annotations

import json

from typer.testing import CliRunner, Result

from kaflite.cli import app
from kaflite.cli.quotas import java_double
from kaflite.cluster import Cluster

runner = CliRunner()


def cli(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_quotas_alter_and_describe() -> None:
    with Cluster(brokers=1) as cluster:
        b = cluster.bootstrap_servers
        out = cli("quotas", "alter", "--user", "alice", "--add",
                  "producer_byte_rate=1048576,consumer_byte_rate=2048", "-b", b).stdout
        assert out.strip() == "Completed updating config for user alice."
        cli("quotas", "alter", "--user", "alice", "--client-defaults",
            "--add-config", "request_percentage=50", "-b", b)
        out = cli("quotas", "alter", "--user-defaults", "--add", "consumer_byte_rate=20000000",
                  "-b", b).stdout
        assert out.strip() == "Completed updating default config for users in the cluster."
        cli("quotas", "alter", "--client-id", "app", "--add", "controller_mutation_rate=0.5",
            "-b", b)
        assert cli("quotas", "describe", "--user", "alice", "-b", b).stdout.splitlines() == [
            "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, "
            "producer_byte_rate=1048576.0"]
        assert cli("quotas", "describe", "--user", "alice", "--client-defaults",
                   "-b", b).stdout.splitlines() == [
            "Quota configs for user-principal 'alice', the default client-id are "
            "request_percentage=50.0"]
        assert cli("quotas", "describe", "--user-defaults", "-b", b).stdout.splitlines() == [
            "Quota configs for the default user-principal are consumer_byte_rate=2.0E7"]
        everything = cli("quotas", "describe", "-b", b).stdout.splitlines()
        assert len(everything) == 4
        assert "Quota configs for client-id 'app' are controller_mutation_rate=0.5" in everything
        # removing a key; the broker enforces what is left
        cli("quotas", "alter", "--user", "alice", "--delete", "consumer_byte_rate", "-b", b)
        rows = json.loads(cli("quotas", "describe", "--user", "alice", "--json", "-b", b).stdout)
        assert rows == [{"entity": {"user": "alice"},
                         "quotas": {"producer_byte_rate": 1048576.0}}]
        resolved = cluster.broker(0).quotas.resolve("producer_byte_rate", "User:alice", "x")
        assert resolved is not None and resolved.limit == 1048576
        # bad input: the broker's refusal, a bad pair, nothing to do
        bad = cli("quotas", "alter", "--user", "bob", "--add", "no_such_key=1", "-b", b, code=1)
        assert "Invalid configuration key no_such_key" in str(bad.exception)   # INVALID_REQUEST
        cli("quotas", "alter", "--user", "bob", "--add", "producer_byte_rate", "-b", b, code=2)
        cli("quotas", "alter", "--user", "bob", "-b", b, code=2)
        cli("quotas", "alter", "--add", "producer_byte_rate=1", "-b", b, code=2)
        assert cli("quotas", "describe", "--user", "bob", "-b", b).stdout == ""


def test_numbers_print_as_java_doubles() -> None:
    assert [java_double(v) for v in (1048576, 0.5, 2e7, 1e-4, 50, 12345678)] == [
        "1048576.0", "0.5", "2.0E7", "1.0E-4", "50.0", "1.2345678E7"]


def test_connections_shows_each_clients_quota_rate_and_throttle() -> None:
    from rich.console import Console

    from kaflite.cli.connections import connections_table, quota_text

    row = {"quotas": {"producer_byte_rate": {"limit": 1048576.0, "rate": 996147.2,
                                             "entity": "user=alice"},
                      "request_percentage": {"limit": 50.0, "rate": 3.2, "entity": "user=alice"}},
           "throttle_time_ms": 120, "throttles": 7, "requests_while_muted": 2}
    assert quota_text(row).splitlines() == [
        "produce 972.8KB/s of 1.0MB/s", "request 3% of 50%", "throttled 120ms (x7)",
        "2 sent while muted"]
    assert quota_text({"quotas": {}, "throttles": 0}) == "-"
    full = {**row, "client_id": "alice", "broker": 0, "peer": "127.0.0.1:5", "roles": ["other"],
            "partitions": [], "groups": [], "transactional_ids": [], "apis": {},
            "last_activity": 0.0}
    console = Console(width=400, record=True)
    console.print(connections_table([full]))
    text = console.export_text()
    assert "quota" in text and "throttled 120ms (x7)" in text

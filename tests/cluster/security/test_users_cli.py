"""``kaflite users add|list|delete`` through the Admin client, then a SCRAM login."""

from __future__ import annotations

import json

from typer.testing import CliRunner, Result

from kaflite.cli import app
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from tests.cluster.security._wire import Wire

runner = CliRunner()


def cli(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_users_add_list_delete_and_login() -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    with Cluster(brokers=1, listeners=listeners) as cluster:
        b = cluster.bootstrap_servers
        assert cli("users", "add", "alice", "-p", "s3cret", "-b", b).stdout == \
            "Completed updating config for user alice.\n"
        cli("users", "add", "bob", "-p", "pw", "-m", "SCRAM-SHA-256", "--iterations", "8192",
            "-b", b)
        assert cli("users", "list", "-b", b).stdout.splitlines() == [
            "SCRAM credential configs for user-principal 'alice' are "
            "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096",
            "SCRAM credential configs for user-principal 'bob' are "
            "SCRAM-SHA-256=iterations=8192"]
        stored = b"".join(f.read_bytes() for f in
                          (cluster.data_dir / "__cluster_metadata-0").iterdir()
                          if f.suffix in (".log", ".checkpoint"))
        assert b"alice" in stored and b"s3cret" not in stored

        async def login(user: str, password: str) -> int:
            w = await Wire.open(cluster.broker(0).bound["SASL_PLAINTEXT"])
            res = await w.authenticate("SCRAM-SHA-512", user, password)
            w.close()
            return res.error_code

        assert cluster.call(login("alice", "s3cret")) == 0
        assert cluster.call(login("alice", "wrong")) != 0
        cli("users", "delete", "alice", "-m", "SCRAM-SHA-512", "-b", b)
        assert cluster.call(login("alice", "s3cret")) != 0
        [doc] = json.loads(cli("users", "list", "alice", "-b", b, "--json").stdout)
        assert doc == {"user": "alice",
                       "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}]}
        cli("users", "delete", "alice", "-b", b)
        failed = cli("users", "list", "alice", "-b", b, code=1)
        assert isinstance(failed.exception, errors.ResourceNotFoundError)
        bad = cli("users", "add", "carol", "-p", "x", "--iterations", "100", "-b", b, code=1)
        assert isinstance(bad.exception, errors.UnacceptableCredentialError)
        assert "4096" in str(bad.exception)

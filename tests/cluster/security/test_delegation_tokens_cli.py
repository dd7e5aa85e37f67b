"""``kaflite delegation-tokens`` (kafka-delegation-tokens.sh): create, describe, renew and
expire a token over SASL, with Kafka's tool's lines; refused over PLAINTEXT."""

from __future__ import annotations

from typer.testing import CliRunner, Result

from kaflite.cli import app
from kaflite.cluster import Cluster

runner = CliRunner()
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
CONFIG = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
          "sasl.users": "alice:alice-secret,bob:bob-secret",
          "delegation.token.secret.key": "cli-secret"}


def cli(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_create_describe_renew_expire() -> None:
    with Cluster(brokers=1, listeners=LISTENERS, config=CONFIG) as cluster:
        b = cluster.bootstrap("SASL_PLAINTEXT")
        sasl = ["-b", b, "-X", "security.protocol=SASL_PLAINTEXT", "-X",
                "sasl.mechanism=SCRAM-SHA-256"]
        alice = [*sasl, "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
        bob = [*sasl, "-X", "sasl.username=bob", "-X", "sasl.password=bob-secret"]
        out = cli("delegation-tokens", "--create", "--renewer-principal", "User:bob",
                  "--max-life-time-period", "3600000", *alice).stdout.splitlines()
        assert out[0] == ("Calling create token operation with renewers :[User:bob] , "
                          "max-life-time-period :3600000")
        token_id = out[1].removeprefix("Created delegation token with tokenId : ")
        assert token_id in cluster.controller.tokens
        header, row = [line.split() for line in out[2:] if line.strip()]
        assert header == ["TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE",
                          "EXPIRYDATE", "MAXDATE"]
        assert row[0] == token_id and row[2:5] == ["User:alice", "User:alice", "[User:bob]"]
        hmac = row[1]

        described = cli("delegation-tokens", "--describe", *bob).stdout.splitlines()
        assert described[:2] == ["Calling describe token operation for current user.",
                                 "Total number of tokens : 1"]
        assert cli("delegation-tokens", "--describe", "--owner-principal", "User:carol",
                   *alice).stdout.splitlines()[1] == "Total number of tokens : 0"
        renewed = cli("delegation-tokens", "--renew", "--hmac", hmac, *bob).stdout
        assert "Completed renew operation. New expiry date : " in renewed
        expired = cli("delegation-tokens", "--expire", "--hmac", hmac, *alice).stdout
        assert "Completed expire operation. New expiry date : " in expired
        assert token_id not in cluster.controller.tokens
        refused = cli("delegation-tokens", "--renew", "--hmac", hmac, *alice, code=1).stdout
        assert refused.startswith("Error while executing delegation token command : ")
        assert "DELEGATION_TOKEN_NOT_FOUND" in refused
        plain = cli("delegation-tokens", "--describe", "-b", cluster.bootstrap("PLAINTEXT"),
                    code=1).stdout
        assert "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in plain

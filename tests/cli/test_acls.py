"""``kaflite acls add|list|remove`` against an authorizing cluster, in kafka-acls.sh's
layout, and what the ACLs it writes allow."""

from __future__ import annotations

import json

from typer.testing import CliRunner, Result

from kaflite.cli import app
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from kaflite.security.acl import AclOperation, ResourceType

runner = CliRunner()
CONFIG = {"authorizer.class.name": "kaflite", "super.users": "User:ANONYMOUS"}
ORDERS = "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: "


def cli(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_acls_add_list_remove() -> None:
    with Cluster(brokers=1, config=CONFIG) as cluster:
        b = cluster.bootstrap_servers
        out = cli("acls", "add", "--allow-principal", "User:alice", "--operation", "READ",
                  "--topic", "orders", "-b", b).stdout
        assert out.splitlines() == [
            f"Adding ACLs for resource {ORDERS}",
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ", "",
            f"Current ACLs for resource {ORDERS}",
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ", ""]
        cli("acls", "add", "--allow-principal", "User:bob", "--consumer", "--topic", "orders",
            "--group", "billing-", "--resource-pattern-type", "PREFIXED", "-b", b)
        cli("acls", "add", "--deny-principal", "User:bob", "--deny-host", "10.1.1.1",
            "--operation", "WRITE", "--topic", "orders", "-b", b)
        listed = cli("acls", "list", "--topic", "orders", "-b", b).stdout.splitlines()
        assert listed[0] == f"Current ACLs for resource {ORDERS}"
        assert sorted(listed[1:3]) == sorted([
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ",
            " \t(principal=User:bob, host=10.1.1.1, operation=WRITE, permissionType=DENY) "])
        rows = json.loads(cli("acls", "list", "--principal", "User:bob", "--json",
                              "-b", b).stdout)
        assert sorted((r["resource_type"], r["name"], r["pattern_type"], r["operation"],
                       r["permission_type"]) for r in rows) == [
            ("GROUP", "billing-", "PREFIXED", "READ", "ALLOW"),
            ("TOPIC", "orders", "LITERAL", "WRITE", "DENY"),
            ("TOPIC", "orders", "PREFIXED", "DESCRIBE", "ALLOW"),
            ("TOPIC", "orders", "PREFIXED", "READ", "ALLOW")]
        authorizer = cluster.broker(0).authorizer
        assert authorizer is not None
        assert authorizer.authorize("User:bob", "127.0.0.1", AclOperation.READ,
                                    ResourceType.GROUP, "billing-eu")
        matched = cli("acls", "list", "--topic", "orders-eu", "--resource-pattern-type", "MATCH",
                      "-b", b).stdout
        assert "name=orders, patternType=PREFIXED" in matched and "LITERAL" not in matched
        cli("acls", "remove", "--topic", "orders", "-b", b, code=1)   # asks, and no answer
        gone = cli("acls", "remove", "--allow-principal", "User:alice", "--operation", "READ",
                   "--topic", "orders", "--force", "-b", b).stdout
        assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in gone
        assert not authorizer.authorize("User:alice", "127.0.0.1", AclOperation.READ,
                                        ResourceType.TOPIC, "orders")
        cli("acls", "remove", "--topic", "orders", "--group", "billing-", "--force", "-b", b)
        assert json.loads(cli("acls", "list", "--json", "-b", b).stdout) == []
        bad = cli("acls", "add", "--allow-principal", "alice", "--topic", "t", "-b", b, code=1)
        assert isinstance(bad.exception, errors.InvalidRequestError)   # run_cli prints it

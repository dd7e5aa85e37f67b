"""--command-config FILE: client properties from a .properties file, under -X."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kaflite.cli import app
from kaflite.cluster import Cluster

runner = CliRunner()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1) as c:
        yield c


def cli(*args: str, input: str | None = None) -> Result:
    result = runner.invoke(app, list(args), input=input)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def _client_ids(cluster: Cluster) -> set[str]:
    return {c.client_id for c in cluster.registry.connections(include_closed=True)}


def test_properties_file_then_x_wins(cluster: Cluster, tmp_path: Path) -> None:
    b = cluster.bootstrap_servers
    props = tmp_path / "client.properties"
    props.write_text("# as for kafka-topics.sh --command-config\n"
                     "security.protocol=PLAINTEXT\nclient.id = from-file\n"
                     "request.timeout.ms: 20000\n")
    cli("topics", "create", "cc", "-b", b, "--command-config", str(props))
    assert "from-file" in _client_ids(cluster)
    cli("topics", "list", "-b", b, "--command-config", str(props), "-X", "client.id=x-wins")
    assert "x-wins" in _client_ids(cluster)
    props.write_text("client.id=file-producer\n")
    cli("produce", "-t", "cc", "-b", b, "--command-config", str(props), input="v\n")
    assert "file-producer" in _client_ids(cluster)
    # a bad value in the file is refused by name, as with -X
    props.write_text("request.timeout.ms=soon\n")
    bad = runner.invoke(app, ["topics", "list", "-b", b, "--command-config", str(props)])
    assert bad.exit_code != 0 and "request.timeout.ms" in str(bad.exception)


def test_the_file_does_not_outlive_its_command(cluster: Cluster, tmp_path: Path) -> None:
    b = cluster.bootstrap_servers
    props = tmp_path / "once.properties"
    props.write_text("client.id=only-once\n")
    cli("groups", "list", "-b", b, "--command-config", str(props))
    before = len([c for c in cluster.registry.connections(include_closed=True)
                  if c.client_id == "only-once"])
    cli("groups", "list", "-b", b)
    after = len([c for c in cluster.registry.connections(include_closed=True)
                 if c.client_id == "only-once"])
    assert before >= 1 and after == before


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["topics", "list", "-b", "127.0.0.1:1",
                                 "--command-config", str(tmp_path / "nope.properties")])
    assert result.exit_code == 2 and "--command-config" in result.output

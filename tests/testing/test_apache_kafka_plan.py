"""``ApacheKafka``'s plan of its nodes' listeners, without starting a JVM: with
``advertised_ports`` each node advertises PLAINTEXT at its port (a proxy in front) and
the brokers replicate over an ``INTERNAL`` listener of their own."""

from __future__ import annotations

import shutil
from pathlib import Path

from kaflite.testing import ApacheKafka


def planned(tmp_path: Path, advertised_ports: list[int] | None = None) -> ApacheKafka:
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "kafka_2.13-4.4.0.jar").touch()
    target = ApacheKafka(libs, brokers=2, advertised_ports=advertised_ports)
    target._plan()
    return target


def test_advertised_ports_put_plaintext_behind_the_proxy_and_replication_inside(
        tmp_path: Path) -> None:
    target = planned(tmp_path, advertised_ports=[29091, 29092])
    try:
        assert target.node_ids == [1, 2]
        for node_id, shown in ((1, 29091), (2, 29092)):
            node = target.nodes[node_id]
            props = node.props
            advertised = dict(item.split("://") for item in
                              props["advertised.listeners"].split(","))
            bound = dict(item.split("://") for item in props["listeners"].split(","))
            assert advertised["PLAINTEXT"] == f"127.0.0.1:{shown}"
            assert bound["PLAINTEXT"] == f"127.0.0.1:{node.broker_port}"
            assert advertised["INTERNAL"] == bound["INTERNAL"]
            assert props["inter.broker.listener.name"] == "INTERNAL"
            assert "INTERNAL:PLAINTEXT" in props["listener.security.protocol.map"]
        assert target.listening_ports == {n: target.nodes[n].broker_port for n in (1, 2)}
    finally:
        shutil.rmtree(target.nodes[1].directory.parent, ignore_errors=True)


def test_without_advertised_ports_the_nodes_advertise_what_they_bind(tmp_path: Path) -> None:
    target = planned(tmp_path)
    try:
        for node in target.nodes.values():
            assert node.props["advertised.listeners"] == node.props["listeners"]
            assert node.props["inter.broker.listener.name"] == "PLAINTEXT"
            assert "INTERNAL" not in node.props["listeners"]
    finally:
        shutil.rmtree(target.nodes[1].directory.parent, ignore_errors=True)

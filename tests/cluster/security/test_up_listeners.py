"""``kaflite up --listener NAME=PROTOCOL``: each listener's bootstrap is printed, and a
SASL listener wants authentication while PLAINTEXT serves anyone."""

from __future__ import annotations

import asyncio

import pytest
import typer

from kaflite.cli.up import listener_props
from tests.cli._up import KafliteUp
from tests.cluster.security._wire import Wire


def test_listener_flags_make_kafka_configs() -> None:
    props = listener_props(["PLAINTEXT", "external=sasl_plaintext"], "127.0.0.1", 9092)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9192"
    assert props["listener.security.protocol.map"].endswith(
        ",PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT")
    with pytest.raises(typer.BadParameter, match="PROTOCOL"):
        listener_props(["EXTERNAL=TLS"], "127.0.0.1", 0)


def test_kaflite_up_with_a_sasl_listener() -> None:
    with KafliteUp("--brokers", "1", "--base-port", "0", "--http-port", "-1",
                   "--listener", "PLAINTEXT=PLAINTEXT", "--listener", "EXTERNAL=SASL_PLAINTEXT",
                   "--config", "sasl.users=alice:alice-secret") as up:
        external = up.value("EXTERNAL (SASL_PLAINTEXT): bootstrap.servers=")
        plain = up.value("bootstrap.servers=")
        assert external != plain

        async def main() -> None:
            w = await Wire.open(int(external.rsplit(":", 1)[1]))
            done = await w.authenticate("SCRAM-SHA-256", "alice", "alice-secret")
            assert done.error_code == 0
            md = await w.metadata()
            assert [f"{b.host}:{b.port}" for b in md.brokers] == [external]
            w.close()
            anyone = await Wire.open(int(plain.rsplit(":", 1)[1]))
            assert [f"{b.host}:{b.port}" for b in (await anyone.metadata()).brokers] == [plain]
            anyone.close()

        asyncio.run(main())

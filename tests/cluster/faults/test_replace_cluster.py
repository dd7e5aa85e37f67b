"""``FrontedCluster.replace``: what the new cluster is and what becomes of the old one,
seen without a Kafka client (raw sockets through the forwarder)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kaflite.cluster.replace import FrontedCluster


def _accepts(server: str) -> bool:
    host, _, port = server.rpartition(":")
    with socket.socket() as s:
        s.settimeout(5)
        return s.connect_ex((host, int(port))) == 0


@pytest.mark.parametrize("retire", ["stop", "hang"])
def test_replace_makes_a_new_cluster_with_the_same_topics(retire: str) -> None:
    async def main() -> None:
        async with FrontedCluster(brokers=2) as fronted:
            old = fronted.cluster
            old.create_topic("t", 3, 2, configs={"retention.ms": "12345"})
            old_topic_id = old.controller.topics["t"].topic_id
            front = fronted.bootstrap_servers
            # a connection piped to the old cluster
            reader, writer = await asyncio.open_connection(*front.split(":"))
            for _ in range(500):        # (bounded) until the forwarder has taken it
                if fronted.front.open_connections == 1:
                    break
                await asyncio.sleep(0.01)
            r = await fronted.replace_async("hang" if retire == "hang" else "stop")
            new = fronted.cluster
            assert new is not old and fronted.bootstrap_servers == front
            assert r.old_cluster_id == old.cluster_id != new.cluster_id == r.new_cluster_id
            assert fronted.history == [old.cluster_id, new.cluster_id]
            assert set(r.old_bootstrap.split(",")).isdisjoint(r.new_bootstrap.split(","))
            t = new.controller.topics["t"]
            assert t.topic_id != old_topic_id and t.configs == {"retention.ms": "12345"}
            assert [len(p.replicas) for p in t.partitions] == [2, 2, 2]
            assert r.topics == ["t"] and r.dropped_connections == 1
            assert await asyncio.wait_for(reader.read(), 10) == b""   # closed by the re-point
            writer.close()
            old_up = [_accepts(s) for s in r.old_bootstrap.split(",")]
            assert old_up == [retire == "hang"] * 2
            assert all(_accepts(s) for s in new.bootstrap_servers.split(","))
            assert not old.started if retire == "stop" else old.started
        assert not new.started and not old.started

    asyncio.run(main())


def test_replace_refuses_an_unknown_retire_mode() -> None:
    async def main() -> None:
        async with FrontedCluster(brokers=1) as fronted:
            with pytest.raises(ValueError, match="retire"):
                await fronted.replace_async("explode")  # type: ignore[arg-type]
            assert len(fronted.history) == 1

    asyncio.run(main())

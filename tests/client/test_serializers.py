"""Serializers and deserializers: a producer sends what its serializers take, a consumer
hands out what its deserializers return (``Producer[K, V]``/``Consumer[K, V]``).

Null keys and values are never passed to them; a serializer must return bytes or
None; a serializer that is not callable is refused when the client is made.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from kaflite.client import Consumer, Producer, sync
from kaflite.cluster import Cluster
from kaflite.config import ConfigError


def _json(value: dict[str, int]) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def _topic(cluster: Cluster) -> str:
    topic = f"ser-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    return topic


def test_values_round_trip_through_serializer_and_deserializer(cluster: Cluster) -> None:
    topic = _topic(cluster)
    deserialized: list[bytes] = []

    def from_json(raw: bytes) -> dict[str, int]:
        deserialized.append(raw)
        loaded: dict[str, int] = json.loads(raw)
        return loaded

    async def main() -> list[tuple[int | None, dict[str, int] | None]]:
        async with Producer({"bootstrap.servers": cluster.bootstrap_servers},
                            key_serializer=lambda k: str(k).encode(),
                            value_serializer=_json) as p:
            await p.send(topic, {"n": 1}, key=7)
            await p.send(topic, None, key=8)                    # a tombstone stays null
            await p.send_batch(topic, [{"n": 2}, {"n": 3}], keys=[9, None])
        async with Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "auto.offset.reset": "earliest"},
                            key_deserializer=lambda raw: int(raw.decode()),
                            value_deserializer=from_json) as c:
            c.assign([(topic, 0)])
            got: list[tuple[int | None, dict[str, int] | None]] = []
            for _ in range(50):
                got += [(r.key, r.value) for r in await c.poll(200)]
                if len(got) >= 4:
                    break
            return got

    got = asyncio.run(main())
    assert got == [(7, {"n": 1}), (8, None), (9, {"n": 2}), (None, {"n": 3})]
    assert len(deserialized) == 3          # not called for the null value


def test_serializer_in_the_config_dict_of_the_sync_producer(cluster: Cluster) -> None:
    topic = _topic(cluster)
    with sync.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                        "value.serializer": _json}) as p:
        md = p.send(topic, {"a": 1})
    with sync.Consumer({"bootstrap.servers": cluster.bootstrap_servers}) as c:
        c.assign([(topic, 0)])
        c.seek((topic, 0), md.offset)
        values: list[bytes | None] = []
        for _ in range(20):
            values += [r.value for r in c.poll(200)]
            if values:
                break
    assert values == [b'{"a": 1}']


def test_values_without_len_are_sent_through_the_serializer(cluster: Cluster) -> None:
    topic = _topic(cluster)

    async def main() -> int:
        async with Producer({"bootstrap.servers": cluster.bootstrap_servers},
                            value_serializer=lambda n: n.to_bytes(4, "big")) as p:
            md = await p.send(topic, 5)
            return md.offset

    assert asyncio.run(main()) == 0


def test_a_serializer_that_returns_no_bytes_fails_the_send(cluster: Cluster) -> None:
    topic = _topic(cluster)

    async def main() -> None:
        async with Producer({"bootstrap.servers": cluster.bootstrap_servers},
                            value_serializer=lambda v: str(v)) as p:  # type: ignore[arg-type,return-value]
            with pytest.raises(TypeError, match="serializer returned a str"):
                await p.send(topic, 5)

    asyncio.run(main())


@pytest.mark.parametrize("name", ["key.serializer", "value.serializer", "oauth_cb"])
def test_a_callable_property_that_is_not_callable_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}: expected a callable, got str"):
        Producer({"bootstrap.servers": "localhost:9092", name: "json"})


def test_a_deserializer_that_is_not_callable_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"value\.deserializer: expected a callable, got int"):
        Consumer({"bootstrap.servers": "localhost:9092"}, value_deserializer=3)  # type: ignore[arg-type]

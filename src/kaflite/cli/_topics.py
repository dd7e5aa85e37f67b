"""A command's topic: it must exist, unless the user asks to create it (``--create``)."""

from __future__ import annotations

from kaflite.cli._errors import UnknownTopic
from kaflite.cli._options import client_config, props_for

__all__ = ["topic_partitions"]


async def topic_partitions(bootstrap: str, topic: str, create: bool,
                           props: list[str] | None = None) -> list[int]:
    """The topic's partitions; ``UnknownTopic`` if it does not exist, unless ``create``
    (then it is created with the cluster's defaults). ``props``: the user's ``-X``."""
    from kaflite.client import Admin, NewTopic
    from kaflite.protocol import errors

    async with Admin(client_config(bootstrap, "kaflite-cli", props_for("admin", props))) as admin:
        try:
            described = await admin.describe_topics([topic])
        except errors.UnknownTopicOrPartitionError:
            if not create:
                raise UnknownTopic(topic) from None
            await admin.create_topics([NewTopic(topic, -1, -1)])
            described = await admin.describe_topics([topic])
    return sorted(p.partition for p in described[topic].partitions)


"""What a broker process serves to the controller process (``RemoteController.services``).

Each service takes the call's JSON arguments and returns a JSON value (or an
awaitable of one): the controller process aggregates the connection registry
from them, forwards fault injection, and asks for a controlled shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflite.cluster.metadata_image import Json

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["services"]


def services(broker: Broker, stop: asyncio.Event) -> dict[str, Callable[[Json], object]]:
    async def shutdown(args: Json) -> None:
        await broker.stop()
        stop.set()

    return {"shutdown": shutdown}

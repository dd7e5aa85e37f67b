"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id (1).

Asked of the least loaded broker; v4+ batches keys (one here), older versions
take a single key. The answer's broker is registered in the pool and a
connection is opened on its *coordinator* channel, so the group (or
transaction) traffic never queues behind fetches or produces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.client.pool import COORDINATOR, BrokerAddress
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient

__all__ = ["GROUP", "TRANSACTION", "find_coordinator"]

GROUP, TRANSACTION = 0, 1


async def find_coordinator(client: BaseClient, key: str, key_type: int) -> int:
    """The coordinator's node id; raises the coordinator error or ConnectionClosed."""
    conn = client.pool.least_loaded()
    if conn is None:
        await client.metadata.refresh("FindCoordinator needs a broker")
        conn = client.pool.least_loaded()
    if conn is None:
        raise ConnectionClosed("no broker to ask for the coordinator")
    version = conn.version_for(10)
    if version >= 4:
        req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    else:
        req = FindCoordinatorRequest(key=key, key_type=key_type)
    try:
        resp: FindCoordinatorResponse = await conn.request(req, version=version)
    except (ConnectionClosed, TimeoutError, OSError):
        client.pool.discard(conn, "FindCoordinator failed")
        raise
    if version >= 4:
        c = resp.coordinators[0]
        code, node, host, port = c.error_code, c.node_id, c.host, c.port
    else:
        code, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
    if code:
        raise errors.error_for_code(code, f"FindCoordinator {key}")
    await client.pool.get(node, COORDINATOR, address=BrokerAddress(node, host, port))
    return node

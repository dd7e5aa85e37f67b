"""FindCoordinator (key 10): which broker coordinates a group or a transactional id.

Any broker answers. v0-v3 carry one key; v4+ (KIP-699) a batch of keys, each
with its own error. The answer is the leader of the key's partition of
``__consumer_offsets`` (GROUP) or ``__transaction_state`` (TRANSACTION), at its
endpoint of the listener the request came in on. When that topic does not exist
yet it is created and this request gets COORDINATOR_NOT_AVAILABLE, as from
Kafka, so the client asks again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.internal_topics import find_coordinator
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from kaflite.protocol.messages import find_coordinator_response as fcr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "error_message"]

# Kafka's default messages (Errors.message()), which FindCoordinator v1+ sends back.
_MESSAGES = {
    errors.CoordinatorNotAvailableError.code: "The coordinator is not available.",
    errors.NotCoordinatorError.code: "This is not the correct coordinator.",
    errors.InvalidRequestError.code: "This most likely occurs because of a request being "
                                     "malformed by the client library or the message was sent "
                                     "to an incompatible broker. See the broker logs for more "
                                     "details.",
}


def error_message(code: int) -> str | None:
    return _MESSAGES.get(code, errors.error_class(code).name)


def _locate(broker: Broker, listener: str, key: str, key_type: int) -> fcr.Coordinator:
    res = fcr.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=0, error_message=None)
    try:
        info = find_coordinator(broker.controller, broker.config.props, key, key_type)
        address = info.endpoint(listener)
        if address is None:   # the coordinator has no such listener (Kafka's answer)
            raise errors.CoordinatorNotAvailableError(f"broker {info.node_id} has no {listener}")
        res.node_id, (res.host, res.port) = info.node_id, address
    except errors.KafkaError as exc:
        res.error_code = exc.code
        res.error_message = error_message(exc.code)
    return res


async def handle_find_coordinator(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                  req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = header.request_api_version
    if version >= 4:
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            coordinators=[_locate(broker, conn.listener.name, key, req.key_type) for key in req.coordinator_keys])
    one = _locate(broker, conn.listener.name, req.key, req.key_type)
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=one.error_code,
        error_message=one.error_message if one.error_code else None,
        node_id=one.node_id, host=one.host, port=one.port)


HANDLERS = [Handler(FindCoordinatorRequest, 0, 6, handle_find_coordinator)]

"""UnregisterBroker (key 64): what ``kafka-cluster unregister --id N`` sends, to remove a
broker's registration from the cluster's metadata (a broker taken out of service).

Any broker answers (Kafka's brokers forward it to the active controller); the rules
are the controller's (``Leadership.unregister_broker``): BROKER_ID_NOT_REGISTERED for
an id that is not registered, else the broker is fenced and forgotten. Authorization
(ALTER on the cluster) is in ``kaflite.cluster.acl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import UnregisterBrokerRequest, UnregisterBrokerResponse

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]


async def handle_unregister_broker(broker: Broker, conn: ServerConnection,
                                   header: RequestHeader, req: UnregisterBrokerRequest
                                   ) -> UnregisterBrokerResponse:
    try:
        await broker.controller.unregister_broker_async(req.broker_id)
    except errors.KafkaError as exc:
        return UnregisterBrokerResponse(error_code=exc.code, error_message=exc.message)
    return UnregisterBrokerResponse(error_code=0, error_message=None)


HANDLERS = [Handler(UnregisterBrokerRequest, 0, 0, handle_unregister_broker)]

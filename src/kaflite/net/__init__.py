"""kaflite.net: the client side of a Kafka connection, shared by every user of one.

``BrokerConnection`` is one TCP connection to one broker: ApiVersions first,
requests multiplexed by correlation id, in flight up to a limit, answered in
order. The client (producer, consumer, admin), the brokers' replica fetchers and
the transaction coordinators' marker senders all use it. Importing this package
loads the codec and nothing of the client: not the producer, consumer or admin.
"""

from kaflite.net.connection import (
    BrokerConnection,
    ConnectionClosed,
    ConnectionStats,
    NoCommonVersion,
)

__all__ = ["BrokerConnection", "ConnectionClosed", "ConnectionStats", "NoCommonVersion"]

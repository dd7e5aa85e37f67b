"""kaflite.cluster: an embedded, multi-broker, Kafka-compatible cluster.

Real Kafka clients (librdkafka, Java, kafka-python, aiokafka, kcat) use it
unchanged. See ``Cluster``.
"""

from kaflite.cluster.cluster import Cluster

__all__ = ["Cluster"]

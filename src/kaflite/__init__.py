"""kaflite: Kafka for Python users.

A sans-I/O protocol codec (``kaflite.protocol``), an embedded Kafka-compatible
cluster, a smart asyncio client and a PySpark data source.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

"""kaflite.spark: read and write Kafka topics from PySpark, in batch and streaming.

    spark.read.format("kaflite")               # found with no import (pyspark_kaflite)
    import kaflite.spark                       # or registered with the active session
    kaflite.spark.register(spark)              # or explicitly, with any session
    spark = kaflite.spark.local_session()      # or a small local[2] session, registered

    events = (spark.readStream.format("kaflite")
              .option("kafka.bootstrap.servers", "localhost:9092")
              .option("subscribe", "events")
              .load())

The workers run the driver's interpreter unless the user chose one
(``_env.py``): an installed kaflite sets ``PYSPARK_DRIVER_PYTHON`` when no
PySpark variable is set, at every interpreter start (``kaflite-pyspark.pth``)
and again when this package is imported; registering with a session whose
master is local also points its ``sc.pythonExec`` here. So importing this
package works before or after the SparkSession is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite._lazy import lazy_names
from kaflite.spark._env import configure_python

configure_python()

from kaflite.spark._session import NoJavaError, local_session  # noqa: E402
from kaflite.spark.datasource import (  # noqa: E402
    AVAILABLE_NOW_WRAPPER,
    FORMAT,
    KafliteDataSource,
    enable_available_now,
    register,
    spark_schema,
)

if TYPE_CHECKING:
    from kaflite.spark._kafka import DataLossError
    from kaflite.spark.options import KafkaOptionError
    from kaflite.spark.writer import KafkaWriteError

# The errors live with the client-side modules; they are imported on first use (PEP 562),
# so that a Python worker unpickling the data source does not import the client.
__getattr__, __dir__ = lazy_names(__name__, {
    "DataLossError": "kaflite.spark._kafka", "KafkaOptionError": "kaflite.spark.options",
    "KafkaWriteError": "kaflite.spark.writer"})

__all__ = ["AVAILABLE_NOW_WRAPPER", "FORMAT", "DataLossError", "KafkaOptionError",
           "KafkaWriteError", "KafliteDataSource", "NoJavaError", "enable_available_now",
           "local_session", "register", "register_active", "spark_schema"]


def register_active() -> bool:
    """Register with the active SparkSession, if there is one."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover
        return False
    spark = SparkSession.getActiveSession()
    if spark is None:
        return False
    register(spark)
    return True


register_active()

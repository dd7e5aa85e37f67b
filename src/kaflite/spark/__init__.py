"""kaflite.spark: read and write Kafka topics from PySpark, in batch and streaming.

    import kaflite.spark                       # registers "kaflite" with the active session
    kaflite.spark.register(spark)              # or explicitly, with any session
    spark = kaflite.spark.local_session()      # or a small local[2] session, registered

    events = (spark.readStream.format("kaflite")
              .option("kafka.bootstrap.servers", "localhost:9092")
              .option("subscribe", "events")
              .load())

Importing the package also points ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON``
at this interpreter when they are unset (``_env.py``), so that ``local[*]``
executors can import kaflite. Import it before creating the SparkSession.
"""

from kaflite.spark._env import configure_python

configure_python()

from kaflite.spark._kafka import DataLossError  # noqa: E402
from kaflite.spark._session import NoJavaError, local_session  # noqa: E402
from kaflite.spark.datasource import (  # noqa: E402
    AVAILABLE_NOW_WRAPPER,
    FORMAT,
    KafliteDataSource,
    enable_available_now,
    register,
    spark_schema,
)
from kaflite.spark.options import KafkaOptionError  # noqa: E402
from kaflite.spark.writer import KafkaWriteError  # noqa: E402

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

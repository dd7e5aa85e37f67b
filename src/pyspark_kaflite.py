"""PySpark's registration hook for the ``kaflite`` format: no import needed.

PySpark 4 imports every top-level module named ``pyspark_*`` that defines a
``DefaultSource`` (a DataSource subclass) and registers it under
``DefaultSource.name()`` (pyspark/sql/worker/lookup_data_sources.py), the
first time a session looks for a Python data source. So, with kaflite
installed, ``spark.read.format("kaflite")`` works in any session whose JVM
runs a Python that can import kaflite (see kaflite/spark/_env.py).
"""

from kaflite.spark.datasource import KafliteDataSource as DefaultSource

__all__ = ["DefaultSource"]

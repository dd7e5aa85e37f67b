"""Make ``local[*]`` work out of the box: executors run the project's interpreter.

PySpark starts its Python workers with ``PYSPARK_PYTHON`` (default ``python3``
on PATH), which is often not the virtualenv kaflite is installed in: the
workers then fail to import ``kaflite``, or run another Python version than
the driver, which PySpark refuses. When the variables are unset we point both
at the interpreter running this module. A value the user set is left alone.
The variables must be set before the SparkContext starts, which is why
``kaflite.spark`` does this at import time.
"""

from __future__ import annotations

import os
import sys

__all__ = ["configure_python"]


def configure_python() -> dict[str, str]:
    """Set PYSPARK_PYTHON/PYSPARK_DRIVER_PYTHON to ``sys.executable`` when unset."""
    changed: dict[str, str] = {}
    if not sys.executable:
        return changed
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        if not os.environ.get(name):
            os.environ[name] = sys.executable
            changed[name] = sys.executable
    return changed

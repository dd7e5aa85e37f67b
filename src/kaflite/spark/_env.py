"""Which Python Spark's workers run: the driver's, without the user setting anything.

PySpark picks a worker interpreter in two places, and each defaults to
``python3`` on PATH, often not the virtualenv kaflite is installed in (the
workers then fail with ``No module named 'kaflite'``):

- the JVM, for the Python data sources it finds by itself (the ``pyspark_*``
  modules, our ``pyspark_kaflite``) and for the worker that looks for them:
  ``PYSPARK_DRIVER_PYTHON``, else ``PYSPARK_PYTHON``, read from the JVM's
  environment when the JVM starts;
- the driver's SparkContext, for UDFs and for sources registered with
  ``spark.dataSource.register``: ``sc.pythonExec``, read from
  ``PYSPARK_PYTHON`` when the context starts.

``default_driver_python`` is the rule the ``kaflite-pyspark.pth`` file of the
wheel applies at every interpreter start, and ``kaflite.spark`` again at
import: when neither variable is set, ``PYSPARK_DRIVER_PYTHON`` becomes this
interpreter. The driver is this interpreter, so the value is true wherever
the JVM runs; ``PYSPARK_PYTHON``, which Spark sends to remote executors, is
left alone.

What the ``.pth`` costs: every Python process of the environment (and its
children, which inherit the variable) sees ``PYSPARK_DRIVER_PYTHON`` set, not
only Spark drivers. Where Spark reads it: the JVM's default worker Python
(``PythonUtils.defaultPythonExec``: the lookup worker and static sources, the
executors of which get this path even on a cluster master, as they would
with the variable set by hand), the ``pyspark`` and ``spark-submit`` scripts
(which then start this interpreter as the driver), and YARN in cluster mode,
which hands it to the driver it starts on the cluster: a ``spark-submit
--deploy-mode cluster`` run from this environment must set one of the
variables, or its driver looks for this machine's path there. Setting
``PYSPARK_PYTHON`` or ``PYSPARK_DRIVER_PYTHON`` (e.g. ``PYSPARK_PYTHON=python3``)
turns it off.

``use_driver_python`` fixes ``sc.pythonExec`` of a session that is already
running, when its master is local (``local``, ``local[N]``,
``local-cluster[...]``: the executors share this machine) and the user chose
no worker Python (no ``PYSPARK_PYTHON``, no ``spark.pyspark.python``). With
any other master the executors run elsewhere, where a path on this machine
means nothing, so it changes nothing there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from typing import Protocol

__all__ = ["PYSPARK_DEFAULT", "configure_python", "default_driver_python", "is_local_master",
           "use_driver_python"]

PYSPARK_DEFAULT = "python3"   # what PySpark runs when nothing is set (pyspark/core/context.py)


class _Conf(Protocol):
    def get(self, key: str, defaultValue: str | None = None) -> str | None: ...


class _Context(Protocol):
    pythonExec: str
    master: str

    def getConf(self) -> _Conf: ...


def default_driver_python(environ: MutableMapping[str, str], executable: str) -> str | None:
    """Set ``PYSPARK_DRIVER_PYTHON`` to ``executable`` when neither variable is set.

    Returns the value set, or None when the user's setting (or no known
    interpreter) left the environment unchanged.
    """
    if not executable or environ.get("PYSPARK_PYTHON") or environ.get("PYSPARK_DRIVER_PYTHON"):
        return None
    environ["PYSPARK_DRIVER_PYTHON"] = executable
    return executable


def configure_python() -> str | None:
    """Apply ``default_driver_python`` to this process (before the JVM starts, it counts)."""
    return default_driver_python(os.environ, sys.executable)


def is_local_master(master: str) -> bool:
    """Whether the executors of ``master`` run on this machine."""
    return master.strip().lower().startswith("local")


def use_driver_python(sc: _Context) -> bool:
    """Point ``sc.pythonExec`` at this interpreter for a local master nobody configured.

    Returns whether it changed. Sources and UDFs wrapped after the change
    run there; those wrapped before keep the interpreter they were given.
    """
    if not sys.executable or not is_local_master(sc.master):
        return False
    if os.environ.get("PYSPARK_PYTHON") or sc.getConf().get("spark.pyspark.python"):
        return False
    if sc.pythonExec != PYSPARK_DEFAULT:
        return False
    sc.pythonExec = sys.executable
    return True

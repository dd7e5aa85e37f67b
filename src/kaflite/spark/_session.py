"""A small local SparkSession for development, tests and demos, with ``kaflite``
registered: two cores, two shuffle partitions, no UI, quiet logs."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LOOPBACK_DRIVER", "NoJavaError", "local_session", "require_java"]


class NoJavaError(RuntimeError):
    """PySpark needs a Java 17+ runtime, and there is none on PATH or in JAVA_HOME."""


def require_java() -> None:
    """Raise ``NoJavaError`` when PySpark would find no Java to start."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise NoJavaError("PySpark needs a Java 17+ runtime (none on PATH or in JAVA_HOME)")


# A local session's driver needs no address but loopback (Spark binds the host's by default).
LOOPBACK_DRIVER = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def local_session(app_name: str = "kaflite", **conf: str) -> SparkSession:
    """``local[2]`` with kaflite's format registered; ``conf`` adds Spark settings.

    The driver listens on loopback only: a local session needs no other address."""
    require_java()
    from pyspark.sql import SparkSession

    from kaflite.spark.datasource import register

    settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                "spark.sql.streaming.stopTimeout": "30s", **LOOPBACK_DRIVER, **conf}
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session

"""Spark sessions that keep Spark's logs off the terminal (the demo's, `kaflite pipeline`'s).

Spark's JVM logs through log4j2; ``quiet_session`` gives it a configuration
(``log4j2_config``) that writes every logger, at INFO, to one log file, and
starts the JVM with its stdout and stderr on the same file, both appending. So
the file also catches what the JVM prints outside log4j2 (before it starts, and
Spark's notices on stderr), and the output of Spark's Python workers (Spark
copies it to the JVM's stderr).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LOG4J2", "log4j2_config", "pipeline_session", "quiet_session"]

LOG4J2 = """\
# kaflite demo: every Spark logger, at INFO, to the demo's log file. A file appender, not
# the console: for a shell (PySpark's gateway is one) Spark filters console appenders
# down to WARN, whatever the root level says.
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n%ex
# Spark takes a shell's level from its main class's logger (WARN when unset), and says
# so on stderr; at the root's level it leaves the level alone and says nothing
logger.shell.name = org.apache.spark.api.python.PythonGatewayServer
logger.shell.level = info
# chatty at INFO and of no use here
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.parquet.name = org.apache.parquet
logger.parquet.level = warn
"""


def log4j2_config(log_file: Path) -> Path:
    """Write the log4j2 configuration beside ``log_file``; returns its path."""
    path = log_file.with_name("log4j2.properties")
    path.write_text(LOG4J2.format(log_file=log_file.as_posix()), encoding="utf-8")
    return path


def quiet_session(app_name: str, log_file: Path, settings: dict[str, str],
                  master: str = "local[2]") -> SparkSession:
    """A session whose JVM logs to ``log_file``, not to the terminal (the driver on
    loopback when ``master`` is a local one: it needs no other address).

    The JVM starts with its stdout and stderr on ``log_file`` (PySpark's
    ``launch_gateway`` takes Popen's arguments for this), and with a log4j2
    configuration that writes every logger there at INFO.
    """
    from pyspark import SparkConf, SparkContext, java_gateway
    from pyspark.sql import SparkSession

    from kaflite.spark._session import LOOPBACK_DRIVER

    conf = SparkConf().setMaster(master).setAppName(app_name)
    java_options = f"-Dlog4j2.configurationFile={log4j2_config(log_file).as_uri()}"
    loopback = LOOPBACK_DRIVER if master.startswith("local") else {}
    for key, value in {**loopback, **settings,
                       "spark.driver.extraJavaOptions": java_options}.items():
        conf.set(key, value)
    launch: Callable[..., object] = java_gateway.launch_gateway
    with log_file.open("ab") as log:  # the JVM keeps its own copy of the descriptor
        gateway = launch(conf, popen_kwargs={"stdout": log, "stderr": log})
    context = SparkContext(conf=conf, gateway=gateway)
    # PySpark's accumulator server (a socketserver thread in this process) prints a
    # traceback to the terminal when the JVM drops its connection mid-update, a race at
    # shutdown under load: it goes to the log file too.
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        def to_log(request: object, client_address: object) -> None:
            with log_file.open("a") as out:
                out.write(f"accumulator server: error on a request from {client_address}\n")
                traceback.print_exc(file=out)
        setattr(server, "handle_error", to_log)   # noqa: B010 (an instance's own hook)
    return SparkSession(context)


def pipeline_session(app_name: str, master: str, settings: dict[str, str],
                     log_file: Path | None) -> SparkSession:
    """A pipeline's session (``kaflite pipeline ...``): Spark's logs to ``log_file``
    (``quiet_session``), else to the terminal at ERROR."""
    from pyspark.sql import SparkSession

    if log_file is not None:
        return quiet_session(app_name, log_file, settings, master=master)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

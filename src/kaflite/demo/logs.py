"""Where the demo's logs go: one file, named in the plan and in the summary.

The terminal is for the story. Spark's JVM logs through log4j2; the demo
gives it a configuration (``log4j2_config``) that writes every logger, at
INFO, to the log file, and starts the JVM with its stdout and stderr on the
same file (``kaflite.demo.spark_step``), both appending. So the log file also
catches what the JVM prints outside log4j2 (before it starts, and Spark's
notices on stderr), and the output of Spark's Python workers (Spark copies it
to the JVM's stderr). Python's own warnings in the
demo's process (``logging``) go to the same file.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

__all__ = ["capture_python_logging", "choose_log_file", "log4j2_config"]

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


def choose_log_file(log_file: Path | None, data_dir: Path | None) -> Path:
    """The log file: ``log_file`` if given, else ``<data_dir>/logs/demo.log`` if the
    cluster's data is kept, else ``demo.log`` in a new temporary directory (kept
    after the run, so the summary can point at it)."""
    if log_file is not None:
        path = log_file
    elif data_dir is not None:
        path = data_dir / "logs" / "demo.log"
    else:
        path = Path(tempfile.mkdtemp(prefix="kaflite-demo-logs-")) / "demo.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path.resolve()


def log4j2_config(log_file: Path) -> Path:
    """Write the log4j2 configuration beside ``log_file``; returns its path."""
    path = log_file.with_name("log4j2.properties")
    path.write_text(LOG4J2.format(log_file=log_file.as_posix()), encoding="utf-8")
    return path


def capture_python_logging(log_file: Path) -> logging.Handler:
    """Send Python's warnings and errors (kaflite, py4j, pyspark) to ``log_file``.

    Without a handler, ``logging`` prints them on stderr; the caller removes
    the returned handler from the root logger when the run is over.
    """
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s (python): %(message)s", "%H:%M:%S"))
    logging.getLogger().addHandler(handler)
    return handler

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

from kaflite.pipelines.spark_logs import log4j2_config

__all__ = ["capture_python_logging", "choose_log_file", "log4j2_config"]


def choose_log_file(log_file: Path | None, data_dir: Path | None, name: str = "demo") -> Path:
    """The log file: ``log_file`` if given, else ``<data_dir>/logs/<name>.log`` if the
    cluster's data is kept, else ``<name>.log`` in a new temporary directory (kept
    after the run, so the summary can point at it)."""
    if log_file is not None:
        path = log_file
    elif data_dir is not None:
        path = data_dir / "logs" / f"{name}.log"
    else:
        path = Path(tempfile.mkdtemp(prefix=f"kaflite-{name}-logs-")) / f"{name}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path.resolve()


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

"""One-line errors with a hint, and exit codes a script can test (as kcat's).

Every ``kaflite`` command runs under ``main()``, which turns the errors a user can
meet into one line on stderr (``kaflite: <what happened>``) and a ``hint:`` line,
and exits with:

* 1: the cluster said no, or could not be reached (a Kafka error, no broker);
* 2: bad usage (typer's own, for options and arguments);
* 130: interrupted (Ctrl-C).

Anything else is a bug in kaflite and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from kaflite.config import ConfigError
from kaflite.protocol import KafkaError, errors

__all__ = ["UnknownTopic", "run_cli"]

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


class UnknownTopic(errors.UnknownTopicOrPartitionError):
    """A command was pointed at a topic that does not exist (and was not asked to
    create it)."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"unknown topic {topic!r}")
        self.topic = topic


def explain(exc: BaseException) -> tuple[str, str] | None:
    """(message, hint) for an error a user can meet; None for anything else."""
    from kaflite.cli._ports import PortInUse
    from kaflite.cli._state import AmbiguousCluster, NoClusterThere
    from kaflite.client.pool import NoBrokerAvailable
    from kaflite.net import ConnectionClosed

    if isinstance(exc, PortInUse):
        first = "wait a minute" if exc.closing else "stop that process"
        return (str(exc.strerror), f"{first}, or choose other ports (--base-port, "
                "--http-port; 0 takes any free port)")
    if isinstance(exc, AmbiguousCluster):
        return (str(exc), "say which with -b/--bootstrap (or --http), or "
                "KAFLITE_CLUSTER=<its data dir>, or run the command in the directory that "
                "holds its data")
    if isinstance(exc, NoClusterThere):
        return (str(exc), "start it with `kaflite up --data-dir DIR`, or unset KAFLITE_CLUSTER")
    if isinstance(exc, UnknownTopic):
        return (f"Unknown topic or partition: {exc.topic}",
                f"create it with `kaflite topics create {exc.topic}`, or pass --create")
    if isinstance(exc, NoBrokerAvailable | ConnectionClosed | ConnectionRefusedError):
        return (f"cannot reach the cluster: {exc}",
                "is a cluster running? `kaflite up` starts one; -b/--bootstrap (or "
                "KAFLITE_BOOTSTRAP) says where it is")
    if isinstance(exc, TimeoutError):
        return ("timed out waiting for the cluster",
                "check -b/--bootstrap, or raise the client's timeouts with -X")
    if isinstance(exc, ConfigError):
        return (f"bad client setting: {exc}",
                "see the client properties: kaflite follows Kafka's names and values")
    if isinstance(exc, KafkaError):
        return (f"{exc.name}: {exc.message or 'the cluster refused the request'}",
                "the cluster refused it; `kaflite topics describe`, `kaflite groups describe` "
                "show the current state")
    return None


def run_cli(app: Callable[[], object]) -> None:
    """Run the command line, turning known errors into one line and an exit code."""
    try:
        app()
    except KeyboardInterrupt:
        print("kaflite: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
        told = explain(exc)
        if told is None:
            raise
        message, hint = told
        print(f"kaflite: {message}", file=sys.stderr)
        print(f"hint: {hint}", file=sys.stderr)
        sys.exit(EXIT_FAILED)

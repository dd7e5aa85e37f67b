"""The kaflite console: a web console and JSON API for kaflite and Kafka clusters.

``ConsoleServer`` (``app.py``) serves it; ``EmbeddedBackend`` (a kaflite cluster in
this process) and ``ClientBackend`` (any Kafka cluster, through kaflite's clients)
answer it. The API contract is ``docs/console.md``.
"""

from __future__ import annotations

__all__ = ["ClientBackend", "ConsoleServer", "EmbeddedBackend"]

from kaflite.console.app import ConsoleServer
from kaflite.console.backend import ClientBackend
from kaflite.console.embedded import EmbeddedBackend

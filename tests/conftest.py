"""What every test directory shares: one way to wait for a condition.

``wait_for(cond, what, timeout)`` polls ``cond`` until it holds, and fails with
``timed out after N s waiting for <what>`` (plus ``state()``, when given, to
show what was seen instead). ``wait_for_async`` is the same on an event loop.
Both are bounded: a condition that never holds fails its test, it never hangs it.

The session also gets its own state directory (``KAFLITE_STATE_DIR``), so that a
``kaflite up`` started by a test and a developer's own never find each other.

``make test`` runs the suite on two pytest-xdist workers, with a scheduler of
its own (``pytest_xdist_make_scheduler``) that hands out whole groups: each test
module is one group, so its module-scoped cluster is started once. The
tests that start a JVM (Spark) form one group of their own, collected first: one
JVM at a time, and the longest group starts at once while the other worker takes
the rest.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator

import pytest

__all__ = ["wait_for", "wait_for_async"]

# Modules whose tests start a Spark JVM, and the one Spark test elsewhere.
JVM_MODULES = ("tests/spark/", "tests/demo/test_demo.py", "tests/test_readme.py")
JVM_TESTS = ("tests/verify/test_rounds.py::test_spark_stream_queue_under_all_faults",)


def _runs_a_jvm(nodeid: str) -> bool:
    return nodeid.startswith(JVM_MODULES) or nodeid.startswith(JVM_TESTS)


def _group(nodeid: str) -> str:
    return "jvm" if _runs_a_jvm(nodeid) else nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The JVM tests first (see the module's docstring); the order is kept within."""
    items.sort(key=lambda item: not _runs_a_jvm(item.nodeid))


@pytest.hookimpl(optionalhook=True)     # a pytest-xdist hook: only when it is installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Send each group (a module, or the JVM tests) to one worker, whole."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return ByGroup(config, log)     # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def _own_state_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="kaflite-state-")
    old = os.environ.get("KAFLITE_STATE_DIR")
    os.environ["KAFLITE_STATE_DIR"] = path
    yield path
    if old is None:
        os.environ.pop("KAFLITE_STATE_DIR", None)
    else:
        os.environ["KAFLITE_STATE_DIR"] = old
    shutil.rmtree(path, ignore_errors=True)


def _timed_out(what: str, timeout: float, state: Callable[[], object] | None) -> AssertionError:
    seen = f"; {state()}" if state is not None else ""
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")


def wait_for(cond: Callable[[], object], what: str, timeout: float = 30.0, *,
             interval: float = 0.05, state: Callable[[], object] | None = None) -> None:
    """Poll ``cond`` every ``interval`` seconds until it is true, for at most ``timeout``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, state)
        time.sleep(interval)


async def wait_for_async(cond: Callable[[], object], what: str, timeout: float = 30.0, *,
                         interval: float = 0.05,
                         state: Callable[[], object] | None = None) -> None:
    """``wait_for`` on the running event loop: sleeps without blocking it."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, state)
        await asyncio.sleep(interval)

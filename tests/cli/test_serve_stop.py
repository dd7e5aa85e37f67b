"""Ctrl-C always stops a long-running command (``kaflite up``, ``proxy``, ``console``).

A child process runs ``serve_until_interrupted`` with a 1 s grace and then a
"graceful stop" that never gives the loop back (``time.sleep`` on the loop, as a
wedged cluster's loop would be). SIGINT must end it: gracefully if the loop can
stop, by the watchdog after the grace if it cannot, and at once on a second
SIGINT. Each test bounds its wait and kills the child if it is still there.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

SCRIPT = """
import asyncio, sys, time
from kaflite.cli._serve import serve_until_interrupted

async def main() -> None:
    await serve_until_interrupted("the test", grace_s=float(sys.argv[1]))
    print("stopping", flush=True)
    if sys.argv[2] == "wedged":
        time.sleep(60)          # the loop never comes back
    print("stopped", flush=True)

asyncio.run(main())
"""


def start(grace: float, how: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(grace), how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("Ctrl-C stops the test")
    return proc


def finish(proc: subprocess.Popen[str], within: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {within} s after SIGINT")
    return proc.returncode, out, err


def test_a_graceful_stop_ends_normally() -> None:
    proc = start(30, "graceful")
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc, 20)
    assert code == 0 and "stopped" in out and "exiting now" not in err


def test_a_wedged_stop_is_cut_short_after_the_grace() -> None:
    proc = start(1, "wedged")
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc, 20)
    assert code == 128 + signal.SIGINT
    assert "stopping" in out and "stopped" not in out
    assert "still stopping after 1 s; exiting now" in err
    assert time.monotonic() - started >= 1     # not before the grace


def test_a_second_sigint_exits_at_once() -> None:
    proc = start(60, "wedged")
    assert proc.stdout is not None
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().startswith("stopping")
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc, 20)
    assert code == 128 + signal.SIGINT
    assert "interrupted again while stopping" in err

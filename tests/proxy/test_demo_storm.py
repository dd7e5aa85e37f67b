"""``kaflite demo --proxy``: the NOT_LEADER_OR_FOLLOWER storm through the shared VIP,
none through kaflite proxy, and every record delivered there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kaflite.demo.proxy_storm import run_proxy_storm


def test_storm_on_the_vip_and_none_through_the_proxy() -> None:
    # a round-robin can land each of the producer's connections on its own broker
    # (about one run in six): a few runs, at most three, until the storm shows
    for _ in range(3):
        naive, aware = run_proxy_storm(records=300, timeout_s=2.0)
        if naive.not_leader > 0:
            break
    assert naive.not_leader > 0 and naive.failed > 0
    assert aware.not_leader == 0 and aware.delivered == 300 and aware.failed == 0


def test_the_demo_option_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from kaflite.demo.proxy_storm import StormResult, print_storm

    print_storm([StormResult("naive (shared VIP)", 10, 290, 472, 526, 8.0),
                 StormResult("kaflite proxy", 300, 0, 0, 11, 0.1)], 300)
    out = capsys.readouterr().out
    aware = next(line for line in out.splitlines() if "kaflite proxy" in line).split()
    assert aware[2:5] == ["300", "0", "0"]     # delivered, failed, NOT_LEADER_OR_FOLLOWER
    help_text = subprocess.run([sys.executable, "-m", "kaflite.cli", "demo", "--help"],
                               capture_output=True, text=True, timeout=60).stdout
    assert "--proxy" in help_text

"""``python -m kaflite.verify``: arguments, and checking a saved history again."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kaflite.verify.__main__ import main, nemesis_kinds
from kaflite.verify.history import History
from kaflite.verify.nemesis import KINDS
from kaflite.verify.report import replay_command
from tests.verify.test_checker import Run


def test_nemesis_argument() -> None:
    assert nemesis_kinds("all") == KINDS
    assert nemesis_kinds("none") == ()
    assert nemesis_kinds("leader, crash") == ("leader", "crash")
    with pytest.raises(argparse.ArgumentTypeError, match="meteor"):
        nemesis_kinds("leader,meteor")


def test_check_a_saved_history_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    History(Run.clean().finish().ops).dump(good)
    History(Run.clean().send(6, 0, 3).finish().ops).dump(bad)
    assert main(["--check", str(good)]) == 0
    assert main(["--check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "lost-write" in out and "INVALID" in out


def test_the_replay_command_names_the_seed() -> None:
    command = replay_command({"client": "aiokafka", "workload": "queue", "nemesis": "all",
                              "seconds": 10.0, "seed": 77})
    assert command == ("python -m kaflite.verify --client aiokafka --workload queue "
                       "--nemesis all --seconds 10.0 --seed 77")
    assert replay_command({"client": "kaflite", "seed": 5, "request_log": True}).endswith(
        "--seed 5 --request-log")


def test_an_unknown_client_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--client", "kafka-go"])
    assert exit_.value.code == 2


def test_a_client_that_cannot_run_here_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Not run as a round that writes nothing and passes (the group soak did that)."""
    monkeypatch.setenv("KAFLITE_KAFKAJS_DIR", "/nonexistent")
    assert main(["--client", "kafkajs", "--seconds", "1"]) == 2
    assert "kafkajs cannot run here" in capsys.readouterr().out

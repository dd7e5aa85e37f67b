"""Which running cluster a command uses when it was not told (``kaflite.cli._state``), on
state files alone: no cluster runs here, the states name this test's own (live) pid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kaflite.cli import _state
from kaflite.cli._errors import explain
from kaflite.cli._state import (
    AmbiguousCluster,
    ClusterState,
    find_bootstrap,
    find_http,
    find_token,
    how_found,
)


def register(tmp_path: Path, n: int, bootstrap: str, data_dir: Path | None) -> ClusterState:
    state = ClusterState(f"cluster-{n}", bootstrap, f"http://127.0.0.1:{9990 + n}",
                         os.getpid(), None if data_dir is None else str(data_dir), f"t{n}")
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / f"up-{n}.json").write_text(state.to_json())
    return state


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFLITE_STATE_DIR", str(tmp_path / "state"))
    for name in ("KAFLITE_CLUSTER", "KAFLITE_BOOTSTRAP", "KAFLITE_HTTP", "KAFLITE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_state, "_SAID", set())


def test_the_cluster_whose_data_is_here_is_used_and_said_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: with several clusters running every command refused, even in the
    directory holding one's data. That one is used, and stderr says so in one line, once
    however many options of the command look the cluster up."""
    (tmp_path / "a" / "data").mkdir(parents=True)
    register(tmp_path, 1, "127.0.0.1:9092", tmp_path / "elsewhere")
    mine = register(tmp_path, 2, "127.0.0.1:19092", tmp_path / "a" / "data")
    register(tmp_path, 3, "127.0.0.1:29092", None)
    monkeypatch.chdir(tmp_path / "a")
    assert find_bootstrap() == mine.bootstrap and find_http() == mine.http
    assert find_token(str(mine.http)) == mine.token
    err = capsys.readouterr().err.splitlines()
    assert err == [f"kaflite: 3 clusters are running; using pid {os.getpid()} at "
                   f"127.0.0.1:19092 (its data is in {tmp_path / 'a' / 'data'}; "
                   "-b/--bootstrap chooses another)"], err
    assert how_found(mine, tmp_path / "a").startswith(
        "3 kaflite clusters are running: the commands find this one by themselves in ")
    assert how_found(mine, tmp_path / "elsewhere") == \
        "3 kaflite clusters are running: the commands find this one with -b 127.0.0.1:19092"


def test_else_the_one_on_kafkas_usual_port(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    register(tmp_path, 1, "127.0.0.1:19092", tmp_path / "x" / "data")
    usual = register(tmp_path, 2, "127.0.0.1:9092,127.0.0.1:9093", tmp_path / "y" / "data")
    monkeypatch.chdir(tmp_path)      # holds both data directories: that does not decide
    assert find_bootstrap() == usual.bootstrap
    assert "(it is on 127.0.0.1:9092;" in capsys.readouterr().err


def test_only_a_real_ambiguity_is_refused_and_says_how_to_choose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    register(tmp_path, 1, "127.0.0.1:19092", tmp_path / "x" / "data")
    register(tmp_path, 2, "127.0.0.1:29092", None)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(AmbiguousCluster) as caught:
        find_bootstrap()
    message, hint = explain(caught.value) or ("", "")
    assert message.startswith("2 kaflite clusters are running (pid ")
    assert f"data in {tmp_path / 'x' / 'data'}" in message
    assert hint.startswith("say which with -b/--bootstrap") and "directory" in hint
    assert find_bootstrap("127.0.0.1:29092") == "127.0.0.1:29092"    # told: no lookup


def test_one_cluster_needs_no_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    only = register(tmp_path, 1, "127.0.0.1:19092", None)
    monkeypatch.chdir(tmp_path)
    assert find_bootstrap() == only.bootstrap and capsys.readouterr().err == ""
    assert how_found(only, tmp_path) == "the kaflite commands find this cluster by themselves"

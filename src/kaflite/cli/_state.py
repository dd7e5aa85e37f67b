"""One cluster, one address: how the commands find the cluster ``kaflite up`` started.

``kaflite up`` writes a small JSON state file (its bootstrap servers, HTTP API,
the console token, pid and data directory; readable by its user only) in two places: ``kaflite-cluster.json`` in its data
directory, and an entry in the user's state directory (``$KAFLITE_STATE_DIR``,
else ``$XDG_STATE_HOME/kaflite``, else ``~/.local/state/kaflite``), removed when
it stops. A command that is not told where the cluster is (``-b``/``--http``,
``KAFLITE_BOOTSTRAP``/``KAFLITE_HTTP``) looks, in order, at:

1. ``KAFLITE_CLUSTER``: a state file, or a data directory holding one;
2. the live entries of the state directory: the one running ``kaflite up``; of
   several, the one whose data directory is under the current directory, else the
   one on ``127.0.0.1:9092`` (the command says which it chose); otherwise an error
   that names them;
3. Kafka's usual addresses, ``127.0.0.1:9092`` and kaflite's HTTP port 9990.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_HTTP",
    "STATE_FILE",
    "AmbiguousCluster",
    "ClusterState",
    "NoClusterThere",
    "Registration",
    "find_bootstrap",
    "find_http",
    "find_state",
    "find_token",
    "how_found",
    "state_dir",
]

STATE_FILE = "kaflite-cluster.json"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_HTTP_PORT = 9990
DEFAULT_HTTP = f"http://127.0.0.1:{DEFAULT_HTTP_PORT}"


class AmbiguousCluster(Exception):
    """More than one ``kaflite up`` is running and the command was not told which."""

    def __init__(self, states: list[ClusterState]) -> None:
        names = "; ".join(f"pid {s.pid}: {s.bootstrap}"
                          + (f", data in {s.data_dir}" if s.data_dir else "") for s in states)
        super().__init__(f"{len(states)} kaflite clusters are running ({names})")
        self.states = states


class NoClusterThere(LookupError):
    """``KAFLITE_CLUSTER`` names no running cluster."""


@dataclass(frozen=True)
class ClusterState:
    """What ``kaflite up`` tells other commands about the cluster it runs."""

    cluster_id: str
    bootstrap: str
    http: str | None
    pid: int
    data_dir: str | None
    token: str | None = None     # the console token (state-changing HTTP requests)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def load(cls, path: Path) -> ClusterState | None:
        """The state in ``path``; None if it is missing, unreadable or its process is gone."""
        try:
            raw = json.loads(path.read_text())
            state = cls(str(raw["cluster_id"]), str(raw["bootstrap"]),
                        None if raw.get("http") is None else str(raw["http"]),
                        int(raw["pid"]), raw.get("data_dir"),
                        None if raw.get("token") is None else str(raw["token"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return state if _alive(state.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # someone else's process: alive
        return True
    return True


def state_dir() -> Path:
    if explicit := os.environ.get("KAFLITE_STATE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "kaflite"


class Registration:
    """The state files of one running ``kaflite up``: written at start, removed at stop."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.paths = [state_dir() / f"up-{state.pid}.json"]
        if state.data_dir is not None:
            self.paths.append(Path(state.data_dir) / STATE_FILE)

    def write(self) -> Registration:
        for path in self.paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.touch(mode=0o600)
            tmp.chmod(0o600)
            tmp.write_text(self.state.to_json())
            tmp.replace(path)
        return self

    def remove(self) -> None:
        for path in self.paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def running() -> list[ClusterState]:
    """Every live ``kaflite up`` registered in the state directory (stale entries go)."""
    found = []
    directory = state_dir()
    for path in sorted(directory.glob("up-*.json")) if directory.is_dir() else []:
        state = ClusterState.load(path)
        if state is None:
            with contextlib.suppress(OSError):
                path.unlink()
        else:
            found.append(state)
    return found


def find_state() -> ClusterState | None:
    """The cluster a command should talk to when it was not told (see the module doc)."""
    if explicit := os.environ.get("KAFLITE_CLUSTER"):
        path = Path(explicit)
        state = ClusterState.load(path / STATE_FILE if path.is_dir() else path)
        if state is None:
            raise NoClusterThere(f"KAFLITE_CLUSTER={explicit}: no running kaflite cluster "
                                 "there")
        return state
    live = running()
    if len(live) > 1:
        chosen, why = _preferred(live)
        if chosen is None:
            raise AmbiguousCluster(live)
        said = f"kaflite: {len(live)} clusters are running; using pid {chosen.pid} " \
               f"at {chosen.bootstrap} ({why}; -b/--bootstrap chooses another)\n"
        if said not in _SAID:     # once per command, however many options look it up
            _SAID.add(said)
            sys.stderr.write(said)
        return chosen
    return live[0] if live else None


_SAID: set[str] = set()


def _preferred(live: list[ClusterState], here: Path | None = None
               ) -> tuple[ClusterState | None, str]:
    """Of several running clusters, the one whose data directory is under ``here`` (the
    current directory), else the one on Kafka's usual port; None when that does not
    decide."""
    here = (here or Path.cwd()).resolve()
    under = [s for s in live if s.data_dir is not None
             and Path(s.data_dir).resolve().is_relative_to(here)]
    if len(under) == 1:
        return under[0], f"its data is in {under[0].data_dir}"
    usual = [s for s in live if DEFAULT_BOOTSTRAP in s.bootstrap.split(",")]
    if len(usual) == 1:
        return usual[0], f"it is on {DEFAULT_BOOTSTRAP}"
    return None, ""


def how_found(state: ClusterState, here: Path) -> str:
    """For ``kaflite up``: how the commands find the cluster it runs (``state``), run in
    ``here``, now that it is registered."""
    live = running()
    if len(live) <= 1:
        return "the kaflite commands find this cluster by themselves"
    chosen, _ = _preferred(live, here)
    if chosen is not None and (chosen.pid, chosen.bootstrap) == (state.pid, state.bootstrap):
        return (f"{len(live)} kaflite clusters are running: the commands find this one by "
                f"themselves in {here} (and below); elsewhere -b {state.bootstrap}")
    return (f"{len(live)} kaflite clusters are running: the commands find this one with "
            f"-b {state.bootstrap}")


def find_bootstrap(given: str | None = None) -> str:
    """``given``, else the running cluster's bootstrap servers, else 127.0.0.1:9092."""
    if given:
        return given
    state = find_state()
    return state.bootstrap if state is not None else DEFAULT_BOOTSTRAP


def find_token(base: str) -> str | None:
    """The console token for the API at ``base``: ``$KAFLITE_TOKEN``, else the token of
    the running cluster whose API that is."""
    if explicit := os.environ.get("KAFLITE_TOKEN"):
        return explicit
    try:
        state = find_state()
    except (AmbiguousCluster, NoClusterThere):
        return None
    if state is not None and state.http is not None and \
            state.http.rstrip("/") == base.rstrip("/"):
        return state.token
    return None


def find_http(given: str | None = None) -> str:
    """``given``, else the running cluster's HTTP API, else port 9990 on loopback."""
    if given:
        return given
    state = find_state()
    if state is not None and state.http is not None:
        return state.http
    return DEFAULT_HTTP

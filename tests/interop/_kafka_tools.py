"""Running Apache Kafka's command-line tools from the fetched jars, and reading what
they print.

There is no Kafka tarball here and so no ``bin/kafka-*.sh``: each tool is its main
class, run as ``java -cp '<libs>/*' org.apache.kafka.tools.<Class> ...`` (every tool
the tests use is in ``kafka-tools-<version>.jar`` in Kafka 4.x, ``ConfigCommand`` and
``AclCommand`` included). The JVM flags are the Kafka nodes' (a small heap, C1 only):
a tool is a 1-2 s JVM start on this machine, and most of that is class loading.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kaflite.testing import ApacheKafka, ClusterUnderTest, KafliteCluster
from kaflite.testing._kafka_node import JVM_OPTS, java_executable

__all__ = ["Batch", "Lacking", "Ran", "Record", "ToolRunner", "dump_batches", "log_dirs", "partition_dirs"]

PACKAGE = "org.apache.kafka.tools."
TOOL_TIMEOUT_S = 90.0

#: bin/kafka-*.sh -> the main class it runs (Kafka 4.4.0's scripts)
MAIN_CLASSES = {
    "kafka-topics": "TopicCommand",
    "kafka-consumer-groups": "consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "consumer.group.ShareGroupCommand",
    "kafka-configs": "ConfigCommand",
    "kafka-acls": "AclCommand",
    "kafka-transactions": "TransactionsCommand",
    "kafka-console-producer": "ConsoleProducer",
    "kafka-console-consumer": "consumer.ConsoleConsumer",
    "kafka-get-offsets": "GetOffsetShell",
    "kafka-log-dirs": "LogDirsCommand",
    "kafka-features": "FeatureCommand",
    "kafka-metadata-quorum": "MetadataQuorumCommand",
    "kafka-dump-log": "DumpLogSegments",
}


class Lacking(AssertionError):
    """A tool failed, and its output names the missing piece a test's xfail names."""


@dataclass
class Ran:
    """One tool's run: its command line (for messages), exit status and output."""

    tool: str
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    log: str

    def __str__(self) -> str:
        return (f"{self.tool} {' '.join(self.args)} -> status {self.returncode}\n"
                f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
                f"\n--- log ---\n{self.log[-2000:]}")

    def ok(self, unless: str | None = None) -> str:
        """stdout, once the tool is known to have succeeded. A failure whose output
        contains ``unless`` raises ``Lacking``, which a strict xfail expects."""
        if self.returncode != 0 and unless and unless in self.stdout + self.stderr:
            raise Lacking(str(self))
        assert self.returncode == 0, str(self)
        return self.stdout


class ToolRunner:
    """Runs the tools against one cluster; each run's WARN log goes to a file of its own
    (the log4j2 configuration beside ``libs/``) and is shown when a run fails."""

    def __init__(self, libs: Path, logs: Path, bootstrap: str) -> None:
        self.libs = libs
        self.logs = logs
        self.bootstrap = bootstrap
        self._runs = itertools.count(1)

    def __call__(self, tool: str, *args: str, stdin: str | None = None,
                 timeout: float = TOOL_TIMEOUT_S) -> Ran:
        log = self.logs / f"{next(self._runs):02d}-{tool}.log"
        cmd = [java_executable(), *JVM_OPTS,
               f"-Dlog4j2.configurationFile={self.libs.parent / 'log4j2.properties'}",
               f"-Dkaflite.kafka.log={log}", "-cp", f"{self.libs}/*",
               PACKAGE + MAIN_CLASSES[tool], *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                              timeout=timeout, stdin=None if stdin is not None
                              else subprocess.DEVNULL)
        logged = log.read_text(errors="replace") if log.exists() else ""
        return Ran(tool, args, proc.returncode, proc.stdout, proc.stderr, logged)

    def admin(self, tool: str, *args: str, stdin: str | None = None) -> Ran:
        """A tool that takes ``--bootstrap-server`` (all but kafka-dump-log)."""
        return self(tool, "--bootstrap-server", self.bootstrap, *args, stdin=stdin)


def log_dirs(target: ClusterUnderTest) -> dict[int, Path]:
    """Each broker's log directory, by node id."""
    if isinstance(target, KafliteCluster):
        return {n: target.cluster.data_dir / f"broker-{n}" for n in target.node_ids}
    assert isinstance(target, ApacheKafka)
    return {n: node.directory / "data" for n, node in target.nodes.items()}


def partition_dirs(target: ClusterUnderTest, topic: str, partition: int) -> dict[int, Path]:
    """The directory of each replica of ``topic``-``partition``, by node id."""
    found = {}
    for node, root in log_dirs(target).items():
        hits = list(root.rglob(f"{topic}-{partition}"))
        if hits:
            found[node] = hits[0]
    return found


@dataclass
class Record:
    offset: int
    key: str | None
    value: str | None
    marker: str | None      # COMMIT or ABORT for a control record


@dataclass
class Batch:
    base_offset: int
    last_offset: int
    count: int
    transactional: bool
    control: bool
    crc: int
    valid: bool
    records: list[Record]


# DumpLogSegments prints a batch header line, then with --deep-iteration one "| offset:"
# line per record; with --print-data-log a record shows "key: ... payload: ...", a
# control record "endTxnMarker: COMMIT coordinatorEpoch: N".
_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*"
                    r"isTransactional: (true|false) isControl: (true|false) .*"
                    r"crc: (\d+) isvalid: (true|false)")
_RECORD = re.compile(r"^\| offset: (\d+) .*?(?:endTxnMarker: (\w+).*|key: (.*?) payload: (.*))$")


def dump_batches(output: str) -> dict[str, list[Batch]]:
    """The batches and records of each file in a ``--deep-iteration --print-data-log``
    dump, by the path the tool was given."""
    files: dict[str, list[Batch]] = {}
    batches: list[Batch] = []
    for line in output.splitlines():
        if line.startswith("Dumping "):
            batches = files.setdefault(line.removeprefix("Dumping ").strip(), [])
        elif m := _BATCH.match(line):
            batches.append(Batch(int(m[1]), int(m[2]), int(m[3]), m[4] == "true",
                                 m[5] == "true", int(m[6]), m[7] == "true", []))
        elif m := _RECORD.match(line):
            assert batches, f"a record before any batch: {line}"
            batches[-1].records.append(Record(int(m[1]), m[3], m[4], m[2]))
    return files

"""kaflite.verify: Jepsen-style workloads under a random nemesis, checked from their histories.

    python -m kaflite.verify --client confluent-kafka --workload queue --nemesis all \\
        --seconds 120 --seed 42

or from Python::

    from kaflite.verify import RunConfig, run
    history, result = run(RunConfig(client="kaflite", workload="txn", seconds=30, seed=7))
    assert result.valid, result.summary()

The parts:

================  ===============================================================
``history``       typed operation records, dumped and loaded as JSON lines
``checker``       a pure function from a history to anomalies, in Jepsen's terms
``nemesis``       a seeded schedule of combined faults, run against the cluster
``control``       the cluster under test, in a child process (SIGKILL-able)
``workload``      producers, consumers, transformers: what each one records
``clients``       one adapter per client library under test
``runner``        one run from start to check; ``__main__`` is its command line
``report``        the result as Jepsen-style tables, and the replay command
================  ===============================================================
"""

from kaflite.verify.checker import CheckResult, check
from kaflite.verify.history import History
from kaflite.verify.runner import RunConfig, run

__all__ = ["CheckResult", "History", "RunConfig", "check", "run"]

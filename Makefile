# `make test` and `make demo` do all the set-up: a .venv with the project and its extras.
# The install is skipped while pyproject.toml is unchanged (the stamp file is newer).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kaflite-installed
# Two workers: the suite is paced by waits (rebalances, JVM start), not only by CPU.
# Three took make test from 14:56 to 8:56 on the 2-core machine, but load-bound tests
# then failed (docs/benchmarks.md, "make test with three workers").
PYTEST_JOBS ?= 2
PEER_JOBS ?= 2
PYTEST_ARGS ?=

.PHONY: test interop demo lint check-java bytecode clean

$(STAMP): pyproject.toml hatch_build.py src/kaflite/protocol/records/_walk.c src/kaflite-pyspark.pth
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "kaflite needs Python 3.11 or later")'
	$(PYTHON) -m venv $(VENV)
	tools/install_venv.sh $(VENV) test,spark,jit
	@touch $(STAMP)

# The project's modules compiled ahead: where PYTHONDONTWRITEBYTECODE is set (as on the
# CI machine) every Python process compiled kaflite from source again, 1.1 s of the
# 2.0 s it took to import the CLI, in each CLI call, broker process and Spark worker.
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j 0 src >/dev/null

# PySpark needs a Java 17+ runtime on PATH or in JAVA_HOME.
check-java:
	@$(PY) tools/check_java.py

# mypy's cache lives beside Kafka's jars, outside the clone: a fresh clone's check then
# takes 2 s instead of 18 (mypy revalidates each cached module by its source's hash).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tools tests benchmarks
	MYPY_CACHE_DIR=$${KAFLITE_CACHE:-$$HOME/.cache/kaflite}/mypy $(VENV)/bin/mypy

test: $(STAMP) bytecode check-java lint
	@tools/ensure_kcat.sh
	@tools/ensure_kafkajs.sh
	@tools/ensure_chromium.sh
	$(PY) -m pytest -n $(PYTEST_JOBS) --durations=25 --ignore=tests/interop -m "not peer" $(PYTEST_ARGS)

# The peers (tests marked `peer`: Tansu's broker and kafkajs in Node, as programs of their
# own, and the queue and txn verify rounds of confluent-kafka, kafka-python and aiokafka; about 3
# minutes), then kaflite against Apache Kafka (tests/interop, 12 minutes on 2 shared
# cores, franz-go's kgo suite against both included): Kafka's jars come from Maven Central
# into ~/.cache/kaflite (tools/ensure_kafka.sh), and so do those of Spark's own Kafka
# connector (tools/ensure_spark_kafka.sh, for tests/interop/test_spark_kafka_format.py);
# franz-go's tests are built with Go (tools/ensure_franz_go.sh), and so is its fake cluster,
# one of the brokers of the client x broker matrix with Tansu (tools/ensure_kfake.sh); the `kaflite` format also runs on
# a Spark standalone master and two workers started from PySpark's spark-class (about 2 minutes,
# tests/interop/test_spark_standalone.py). One worker there: one cluster at a time. Without Java or Maven
# the Kafka cases skip, saying why (under CI=true they fail). kafka-python's own integration
# tests come from its PyPI sdist (tools/ensure_kafka_python_tests.sh); IBM/sarama's functional
# tests and toxiproxy are built with Go (tools/ensure_sarama.sh).
interop: $(STAMP) bytecode
	@tools/ensure_kafkajs.sh
	@tools/ensure_kfake.sh >/dev/null || echo "note: franz-go's kfake is not available; its tests will say why" >&2
	$(PY) -m pytest -n $(PEER_JOBS) --durations=10 --ignore=tests/interop -m peer $(PYTEST_ARGS)
	@tools/ensure_kafka.sh >/dev/null || echo "note: Apache Kafka is not available; its tests will say why" >&2
	@PYTHON=$(PY) tools/ensure_spark_kafka.sh >/dev/null || echo "note: Spark's Kafka connector is not available; its tests will say why" >&2
	@KAFLITE_PYTHON=$(PY) tools/ensure_kafka_python_tests.sh >/dev/null || echo "note: kafka-python's tests are not available; their test will say why" >&2
	@tools/ensure_sarama.sh >/dev/null || echo "note: sarama's functional tests are not available; their test will say why" >&2
	$(PY) -m pytest tests/interop --durations=15 $(PYTEST_ARGS)

demo: $(STAMP) bytecode check-java
	$(PY) -m kaflite.cli demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

"""Spark's workers run the driver's Python with nothing set by the user.

The two subprocess tests run a user's script the way a new user does: with
the virtualenv's interpreter, but a PATH without the virtualenv's bin
directory and no PYSPARK_PYTHON/PYSPARK_DRIVER_PYTHON. PATH starts with a
``python3`` (and ``python``) that fails, so a worker started from PATH fails
the read instead of passing by luck on a machine whose python3 has kaflite.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from kaflite.cluster import Cluster
from kaflite.spark._env import default_driver_python, is_local_master, use_driver_python
from tests.spark.conftest import produce, unique

PTH = Path(__file__).resolve().parents[2] / "src" / "kaflite-pyspark.pth"
SPARK_VARS = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
FAKE_PYTHON = "#!/bin/sh\necho \"a worker ran $0, not the driver's Python\" >&2\nexit 97\n"

READ = """
import json, sys
from pyspark.sql import SparkSession

def session():
    return (SparkSession.builder.master("local[1]").appName("kaflite-env-test")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate())

def read(spark, servers, topic):
    rows = (spark.read.format("kaflite").option("kafka.bootstrap.servers", servers)
            .option("subscribe", topic).load()
            .selectExpr("CAST(value AS STRING) AS value").collect())
    print("VALUES " + json.dumps(sorted(r.value for r in rows)))
"""

# The user builds the session first, then imports kaflite.spark.
SESSION_THEN_IMPORT = READ + """
spark = session()
import kaflite.spark
read(spark, sys.argv[1], sys.argv[2])
spark.stop()
"""

# The user never imports kaflite: PySpark finds the format by itself.
NO_IMPORT = READ + """
spark = session()
read(spark, sys.argv[1], sys.argv[2])
assert not [m for m in sys.modules if m.startswith("kaflite")], "the driver imported kaflite"
spark.stop()
"""


def user_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user who did not activate the venv and set no PySpark variable."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    for name in ("python3", "python"):
        (fake / name).write_text(FAKE_PYTHON)
        (fake / name).chmod(0o755)
    venv_bin = os.path.dirname(sys.executable)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and os.path.realpath(p) != os.path.realpath(venv_bin)]
    env = {k: v for k, v in os.environ.items() if k not in SPARK_VARS and k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join([str(fake), *path])
    return env


def hook_installed(env: dict[str, str]) -> bool:
    """Whether this interpreter's site-packages has kaflite's PySpark hook (.pth + module)."""
    probe = ("import importlib.util, os, sys; print(os.environ.get('PYSPARK_DRIVER_PYTHON') "
             "== sys.executable and importlib.util.find_spec('pyspark_kaflite') is not None)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip() == "True"


def run_user_script(script: str, env: dict[str, str], servers: str, topic: str,
                    tmp_path: Path) -> list[str]:
    path = tmp_path / "user_script.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path), servers, topic], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("VALUES ")]
    assert len(lines) == 1, proc.stdout
    values: list[str] = json.loads(lines[0].removeprefix("VALUES "))
    return values


@pytest.fixture()
def topic(kafka: Cluster, servers: str) -> tuple[str, list[str]]:
    name = unique("env")
    kafka.create_topic(name, 2, 1)
    values = [f"v{i:03d}" for i in range(40)]
    produce(servers, name, [{"value": v.encode(), "partition": i % 2}
                            for i, v in enumerate(values)])
    return name, values


def test_import_after_the_session_is_built(servers: str, topic: tuple[str, list[str]],
                                           tmp_path: Path) -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("PySpark needs a Java 17+ runtime")
    name, values = topic
    assert run_user_script(SESSION_THEN_IMPORT, user_env(tmp_path), servers, name,
                           tmp_path) == values


def test_format_found_with_no_import(servers: str, topic: tuple[str, list[str]],
                                     tmp_path: Path) -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("PySpark needs a Java 17+ runtime")
    env = user_env(tmp_path)
    if not hook_installed(env):
        pytest.skip(f"kaflite's PySpark hook (kaflite-pyspark.pth and pyspark_kaflite) is not "
                    f"installed in {sys.prefix}: reinstall kaflite there (make does)")
    name, values = topic
    assert run_user_script(NO_IMPORT, env, servers, name, tmp_path) == values


# -- the rule, without Spark ---------------------------------------------------------------
@pytest.mark.parametrize("given", [{}, {"PYSPARK_PYTHON": "/opt/py"},
                                   {"PYSPARK_DRIVER_PYTHON": "ipython"},
                                   {"PYSPARK_PYTHON": "", "PYSPARK_DRIVER_PYTHON": ""}])
def test_pth_line_applies_the_rule(given: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The .pth's one line and default_driver_python agree; a user's setting wins."""
    expected = dict(given)
    set_to = default_driver_python(expected, sys.executable)
    assert set_to == (sys.executable if not any(given.values()) else None)
    for name in SPARK_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    lines = [line for line in PTH.read_text().splitlines() if line.startswith("import ")]
    assert len(lines) == 1
    exec(lines[0], {})
    assert {k: os.environ[k] for k in SPARK_VARS if k in os.environ} == expected


class FakeContext:
    def __init__(self, master: str, python_exec: str = "python3",
                 conf: dict[str, str] | None = None) -> None:
        self.master = master
        self.pythonExec = python_exec
        self.conf = conf or {}

    def getConf(self) -> Any:
        return self

    def get(self, key: str, defaultValue: str | None = None) -> str | None:
        return self.conf.get(key, defaultValue)


def test_driver_python_only_for_a_local_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert is_local_master("local[2]") and is_local_master("local-cluster[2,1,1024]")
    assert not is_local_master("spark://host:7077") and not is_local_master("yarn")
    for master in ("local", "local[*]", "local[2,3]", "local-cluster[2,1,1024]"):
        sc = FakeContext(master)
        assert use_driver_python(sc) and sc.pythonExec == sys.executable
    for sc in (FakeContext("yarn"), FakeContext("k8s://https://h:443"),
               FakeContext("local[2]", python_exec="/opt/py/bin/python"),
               FakeContext("local[2]", conf={"spark.pyspark.python": "/opt/py"})):
        before = sc.pythonExec
        assert not use_driver_python(sc) and sc.pythonExec == before
    monkeypatch.setenv("PYSPARK_PYTHON", "python3")   # the user's explicit choice
    sc = FakeContext("local[2]")
    assert not use_driver_python(sc) and sc.pythonExec == "python3"

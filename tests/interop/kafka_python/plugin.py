"""A pytest plugin loaded into kafka-python's own integration suite (``-p``), pointing
its broker fixture at listeners that are already running (kaflite's, or Apache Kafka's
for comparison) instead of a Kafka it would spawn.

kafka-python's fixtures (``test/integration/fixtures.py``) have two modes: spawn a
broker from a Kafka distribution (``KafkaFixture.instance``), or use one already
running (``KafkaFixture(..., external=True)``, which its own ``KAFKA_URI`` selects for
PLAINTEXT). Here ``KafkaFixture.instance`` builds the external fixture for every
transport the suite asks for: PLAINTEXT, SASL_PLAINTEXT with PLAIN or SCRAM (user
``alice``), and SSL (``ssl_dir`` holding the CA as ``ca-cert``). Everything else,
the client parameters, topics, the tests themselves, is the suite's, unchanged.

The PyPI sdist carries ``test/integration`` but not ``test/service.py``, which the
fixtures import; its external half is a record of host and port with no-op methods,
given here as the same. Spawning is refused: there is no distribution to spawn.

One fix to kafka-python itself (``_track_metadata_requests``, off with
``KAFLITE_KPY_UNPATCHED=1``): kafka-python 3.0.12 forgets a subscription made while a
Metadata request is in flight. ``ClusterMetadata.set_topics`` flags an update, and the
answer to the request sent before (``topics=[]`` at bootstrap) clears the flag
(``update_metadata``: ``_need_update = len(_retry_topics) > 0``; its own comment "TODO:
handle future when old metadata request is currently in-flight"). The consumer then
asks for the topic's metadata only at ``metadata.max.age.ms`` (300 s) and reads nothing.
Seen on kaflite-3 in CI and under load (the consumer's log: subscribed at 21.468 s, the
bootstrap's answer with no topics at 21.469 s, then "Sleeping 299.99 for next Metadata
refresh"). The Java client fixed the same race in KAFKA-7831 by counting requests; the
fix here does as it does: an answer to a request built before the last
``request_update`` leaves the update flagged.

``KAFLITE_KPY_LISTENERS``: JSON ``{"PLAINTEXT": "host:port", "SASL_PLAINTEXT": ...,
"SSL": ...}``; ``KAFLITE_KPY_SSL_DIR``: the directory with ``ca-cert``;
``KAFLITE_KPY_DESELECT``: JSON, the node ids (or module paths) not to run, exactly
those: pytest's own ``--deselect`` takes prefixes, and ``test_delete_records`` is one
of another test's.
"""

from __future__ import annotations

import json
import os
import sys
import types
from typing import Any

import pytest

_SERVICE = "test.service"


class ExternalService:
    """A broker someone else runs (what kafka-python's ``test/service.py`` has)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def dump_logs(self) -> None:
        pass

    def wait_for(self, pattern: str, timeout: float = 30) -> None:
        pass


class SpawnedService:
    """Spawning a broker process: refused, there is no Kafka distribution here."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("kaflite's run of kafka-python's suite spawns no broker")


def _install_service_module() -> None:
    module = types.ModuleType(_SERVICE)
    module.ExternalService = ExternalService      # type: ignore[attr-defined]
    module.SpawnedService = SpawnedService        # type: ignore[attr-defined]
    sys.modules[_SERVICE] = module


def _listeners() -> dict[str, tuple[str, int]]:
    out = {}
    for transport, servers in json.loads(os.environ["KAFLITE_KPY_LISTENERS"]).items():
        host, _, port = servers.split(",")[0].rpartition(":")
        out[transport] = (host, int(port))
    return out


def _patch_instance() -> None:
    from test.integration import fixtures  # the suite's own module (on sys.path)

    listeners = _listeners()
    ssl_dir = os.environ.get("KAFLITE_KPY_SSL_DIR")
    kafka_fixture = fixtures.KafkaFixture

    def instance(cls: type, broker_id: int, zookeeper: object = None,
                 zk_chroot: object = None, host: str = "localhost", port: int | None = None,
                 external: bool = False, transport: str = "PLAINTEXT", replicas: int = 1,
                 partitions: int = 4, sasl_mechanism: str | None = None,
                 auto_create_topic: bool = True, tmp_dir: Any = None) -> Any:
        if transport.upper() not in listeners:
            raise RuntimeError(f"no {transport} listener was started for the suite")
        bound_host, bound_port = listeners[transport.upper()]
        fixture = kafka_fixture(bound_host, bound_port, broker_id, external=True,
                                transport=transport, replicas=replicas,
                                partitions=partitions, sasl_mechanism=sasl_mechanism,
                                auto_create_topic=auto_create_topic, tmp_dir=tmp_dir)
        if fixture.ssl_enabled:
            fixture.ssl_dir = ssl_dir
        return fixture

    kafka_fixture.instance = classmethod(instance)


def metadata_tracking(cls: Any) -> dict[str, Any]:
    """kafka-python's ``ClusterMetadata`` methods (``cls``'s), replaced so that an answer
    to a request built before the last ``request_update`` leaves the update flagged."""
    request_update = cls.request_update
    metadata_request = cls.metadata_request
    update_metadata = cls.update_metadata

    def wanted(self: Any) -> int:
        return int(getattr(self, "_kaflite_wanted", 0))

    def counted_request_update(self: Any) -> Any:
        self._kaflite_wanted = wanted(self) + 1
        return request_update(self)

    def counted_metadata_request(self: Any) -> Any:
        self._kaflite_sent = wanted(self)
        return metadata_request(self)

    def checked_update_metadata(self: Any, metadata: Any) -> Any:
        out = update_metadata(self, metadata)
        if int(getattr(self, "_kaflite_sent", 0)) < wanted(self):
            request_update(self)    # asked for after this answer's request was built
        return out

    return {"request_update": counted_request_update,
            "metadata_request": counted_metadata_request,
            "update_metadata": checked_update_metadata}


def _track_metadata_requests() -> None:
    from kafka.cluster import ClusterMetadata  # the client under test (on sys.path)

    for name, method in metadata_tracking(ClusterMetadata).items():
        setattr(ClusterMetadata, name, method)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unwanted = set(json.loads(os.environ.get("KAFLITE_KPY_DESELECT", "[]")))
    if not unwanted:
        return
    dropped = [i for i in items if {i.nodeid, i.nodeid.split("::")[0]} & unwanted]
    config.hook.pytest_deselected(items=dropped)
    items[:] = [i for i in items if i not in dropped]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> None:
    """Before the suite's conftest imports its fixtures module."""
    _install_service_module()
    _patch_instance()
    if os.environ.get("KAFLITE_KPY_UNPATCHED") != "1":
        _track_metadata_requests()

"""A pytest plugin: a ``kaflite_cluster`` fixture, with no Docker and no JVM.

Registered through the ``pytest11`` entry point, so installing kaflite is
enough. Configure it per test module or on the command line:

    pytest --kaflite-brokers 3 --kaflite-scope session

or override the ``kaflite_cluster_options`` fixture to pass ``Cluster``
arguments (``brokers``, ``config``, ``racks``, ``listeners``...); for a secured
cluster, for example::

    @pytest.fixture(scope="session")
    def kaflite_cluster_options():
        return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "config": {"sasl.users": "alice:alice-secret"}}

and ``cluster.bootstrap("SASL_PLAINTEXT")`` is that listener's address.
``kaflite_proxy`` puts a ``kaflite.proxy.Proxy`` in front of that cluster. The
fixture yields a running ``Cluster`` (in its own background thread);
``cluster.bootstrap_servers`` is the address to give any Kafka client (the
first listener's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, cast

import pytest

from kaflite.cluster.cluster import Cluster

if TYPE_CHECKING:
    from kaflite.proxy import Proxy


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kaflite")
    group.addoption("--kaflite-brokers", type=int, default=None,
                    help="brokers in the kaflite_cluster fixture (default 1)")
    group.addoption("--kaflite-scope", default="function",
                    choices=["function", "class", "module", "package", "session"],
                    help="scope of the kaflite_cluster fixture")


Scope = Literal["function", "class", "module", "package", "session"]


def _scope(fixture_name: str, config: pytest.Config) -> Scope:
    return cast(Scope, config.getoption("--kaflite-scope", default="function"))


@pytest.fixture(scope="session")
def kaflite_cluster_options() -> dict[str, Any]:
    """Keyword arguments for ``Cluster``; override this fixture to change them."""
    return {}


@pytest.fixture(scope=_scope)
def kaflite_cluster(request: pytest.FixtureRequest,
                    kaflite_cluster_options: dict[str, Any]) -> Iterator[Cluster]:
    options = dict(kaflite_cluster_options)
    brokers = request.config.getoption("--kaflite-brokers", default=None)
    if brokers is not None:
        options["brokers"] = brokers
    options.setdefault("brokers", 1)
    with Cluster(**options) as cluster:
        yield cluster


@pytest.fixture(scope=_scope)
def kaflite_proxy(kaflite_cluster: Cluster) -> Iterator[Proxy]:
    """A ``kaflite.proxy.Proxy`` in front of ``kaflite_cluster``: give clients
    ``kaflite_proxy.bootstrap_servers`` and every connection goes through it."""
    from kaflite.proxy import Proxy

    with Proxy(kaflite_cluster.bootstrap_servers) as proxy:
        yield proxy

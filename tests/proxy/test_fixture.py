"""The pytest plugin's ``kaflite_proxy`` fixture: a proxy in front of ``kaflite_cluster``."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_kaflite_proxy_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from confluent_kafka.admin import AdminClient

        def test_through_the_proxy(kaflite_cluster, kaflite_proxy):
            md = AdminClient({"bootstrap.servers": kaflite_proxy.bootstrap_servers}
                             ).list_topics(timeout=10)
            upstream = {kaflite_cluster.broker(n).port for n in kaflite_cluster.brokers}
            assert len(md.brokers) == 2
            assert not {b.port for b in md.brokers.values()} & upstream
            assert kaflite_proxy.connections(include_closed=True)
        """
    )
    result = pytester.runpytest_subprocess("--kaflite-brokers", "2", "-p", "no:cacheprovider",
                                           f"--rootdir={pytester.path}")
    result.assert_outcomes(passed=1)

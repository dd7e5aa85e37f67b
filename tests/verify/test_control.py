"""The checker's cluster process: how it is started and driven."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.verify.control import ClusterProcess, ControlError


def test_a_token_that_begins_with_a_dash_starts_the_cluster(tmp_path: Path) -> None:
    """``secrets.token_urlsafe`` may begin with "-": it must reach the process as the
    token, not as an option (argparse once refused it: 'expected one argument')."""
    cluster = ClusterProcess(tmp_path / "cluster", brokers=1)
    cluster.token = "-" + cluster.token
    with cluster:
        assert [b["id"] for b in cluster.view()["brokers"]] == [0]
        cluster.clear_rules()      # a state change: needs the token
        cluster.token = "wrong"
        with pytest.raises(ControlError) as refused:
            cluster.clear_rules()
        assert refused.value.status in (401, 403), refused.value

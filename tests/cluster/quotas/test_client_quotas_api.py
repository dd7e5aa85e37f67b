"""DescribeClientQuotas and AlterClientQuotas through kaflite's admin client."""

from __future__ import annotations

import pytest

from kaflite.client._quotas import ClientQuotaAlteration as Alter
from kaflite.client._quotas import QuotaFilterComponent as Filter
from kaflite.client.sync import Admin
from kaflite.cluster import Cluster
from kaflite.protocol import errors


def test_alter_describe_filters_and_bad_input() -> None:
    with Cluster(brokers=1) as cluster, \
            Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.alter_client_quotas([
            Alter({"user": "alice"}, {"producer_byte_rate": 1024}),
            Alter({"user": None}, {"consumer_byte_rate": 2048}),
            Alter({"user": "alice", "client-id": "app"}, {"request_percentage": 50})])
        everything = admin.describe_client_quotas()
        assert everything[(("user", "alice"),)] == {"producer_byte_rate": 1024}
        assert everything[(("user", None),)] == {"consumer_byte_rate": 2048}
        assert set(admin.describe_client_quotas([Filter.of_entity("user", "alice")])) == {
            (("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
        assert set(admin.describe_client_quotas([Filter.of_entity("user", "alice")],
                                                strict=True)) == {(("user", "alice"),)}
        assert set(admin.describe_client_quotas([Filter.of_default("user")])) == {
            (("user", None),)}
        with pytest.raises(errors.InvalidRequestError):
            admin.alter_client_quotas([Alter({"user": "bob"}, {"no_such_key": 1})])
        with pytest.raises(errors.InvalidRequestError):
            admin.alter_client_quotas([Alter({"user": "bob"}, {"producer_byte_rate": -5})])
        with pytest.raises(errors.InvalidRequestError):
            admin.describe_client_quotas([Filter("user", "x", 7)])
        admin.alter_client_quotas([Alter({"user": "bob"}, {"producer_byte_rate": 1})],
                                  validate_only=True)
        admin.alter_client_quotas([Alter({"user": "alice"}, {"producer_byte_rate": None})])
        after = admin.describe_client_quotas([Filter.of_any("user")], strict=True)
        assert after == {}   # bob was only validated, alice's only key removed


def test_more_than_ten_thousand_quota_changes_in_one_request_fail_whole() -> None:
    """Kafka's controller writes at most 10,000 records a request, one a quota that changes:
    more fail every entry with POLICY_VIOLATION and change nothing. Values set again
    unchanged do not count; removals of quotas that are there do."""
    users = [f"u-{i}" for i in range(10_001)]
    with Cluster(brokers=1) as cluster, \
            Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        with pytest.raises(errors.PolicyViolationError,
                           match="excessively large batch operation"):
            admin.alter_client_quotas([Alter({"user": u}, {"producer_byte_rate": 1024})
                                       for u in users])
        assert admin.describe_client_quotas() == {}
        admin.alter_client_quotas([Alter({"user": u}, {"producer_byte_rate": 1024})
                                   for u in users[:10_000]])
        # the same 10,000 values again and one new one: one change
        admin.alter_client_quotas([Alter({"user": u}, {"producer_byte_rate": 1024})
                                   for u in users])
        assert len(admin.describe_client_quotas()) == 10_001
        # 10,001 removals at once are refused; 10,000 go through
        with pytest.raises(errors.PolicyViolationError):
            admin.alter_client_quotas([Alter({"user": u}, {"producer_byte_rate": None})
                                       for u in users])
        assert len(admin.describe_client_quotas()) == 10_001
        admin.alter_client_quotas([Alter({"user": u}, {"producer_byte_rate": None})
                                   for u in users[1:]])
        assert admin.describe_client_quotas() == {(("user", "u-0"),): {"producer_byte_rate": 1024}}

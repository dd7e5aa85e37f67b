"""Group configs (ConfigResource GROUP): Kafka's names and checks, DescribeConfigs and
IncrementalAlterConfigs, the heartbeat interval a consumer group's next heartbeat
gets, the typed accessor, and persistence across a restart."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from kaflite.client.admin import Admin, ConfigResource
from kaflite.cluster import Cluster
from kaflite.cluster.group_configs import validate_group_configs
from kaflite.config import ConfigError
from kaflite.protocol import errors
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest

GROUP = 32
CONFIG = {"offsets.topic.num.partitions": 1, "group.consumer.min.heartbeat.interval.ms": 1000,
          "group.consumer.heartbeat.interval.ms": 2000,
          "group.consumer.min.session.timeout.ms": 10000}


@pytest.mark.parametrize(("configs", "message"), [
    ({"consumer.heartbeat.interval.ms": "4999"},
     "consumer.heartbeat.interval.ms must be greater than or equal to "
     "group.consumer.min.heartbeat.interval.ms"),
    ({"consumer.session.timeout.ms": "60001"},
     "consumer.session.timeout.ms must be less than or equal to "
     "group.consumer.max.session.timeout.ms"),
    ({"share.record.lock.duration.ms": "14999"},
     "share.record.lock.duration.ms must be greater than or equal to "
     "group.share.min.record.lock.duration.ms"),
    ({"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "45000",
      "group.x": "1"}, "Unknown group config name: group.x"),
    ({"share.auto.offset.reset": "newest"}, "share.auto.offset.reset"),
    ({"share.isolation.level": "none"}, "share.isolation.level"),
    ({"consumer.session.timeout.ms": "abc"}, "Not a number of type INT"),
    ({"share.delivery.count.limit": "1"}, "Value must be at least 2"),
    ({"share.delivery.count.limit": "11"},
     "share.delivery.count.limit must be less than or equal to "
     "group.share.max.delivery.count.limit"),
    ({"share.partition.max.record.locks": "99"}, "Value must be at least 100"),
    ({"share.partition.max.record.locks": "4001"},
     "share.partition.max.record.locks must be less than or equal to "
     "group.share.max.partition.max.record.locks"),
])
def test_kafkas_checks(configs: dict[str, str | None], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_group_configs(configs, {})


def test_bounds_come_from_the_broker() -> None:
    props = {"group.consumer.min.heartbeat.interval.ms": "1000",
             "group.consumer.min.session.timeout.ms": "1500"}
    assert validate_group_configs({"consumer.heartbeat.interval.ms": "1000",
                                   "consumer.session.timeout.ms": "1500",
                                   "share.auto.offset.reset": "by_duration:PT1H30M",
                                   "share.isolation.level": "read_committed"}, props) == {
        "consumer.heartbeat.interval.ms": "1000", "consumer.session.timeout.ms": "1500",
        "share.auto.offset.reset": "by_duration:PT1H30M",
        "share.isolation.level": "read_committed"}
    with pytest.raises(ConfigError, match=r"must be greater than consumer\.heartbeat"):
        validate_group_configs({"consumer.heartbeat.interval.ms": "1500",
                                "consumer.session.timeout.ms": "1500"}, props)


class Member:
    """One KIP-848 member sending raw heartbeats to its coordinator."""

    def __init__(self, admin: Admin, group: str) -> None:
        self.admin, self.group = admin, group
        self.member_id, self.epoch = uuid.uuid4().hex[:22], 0

    async def heartbeat(self) -> int:
        """One heartbeat; the interval the coordinator answered."""
        node = await self.admin._coordinator(self.group)
        resp = await self.admin._request(node, ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[]))
        assert resp.error_code == 0, resp
        self.epoch = resp.member_epoch
        return int(resp.heartbeat_interval_ms)


def test_describe_alter_apply_and_persist(tmp_path: Path) -> None:
    res = ConfigResource(GROUP, "g1")

    async def alter_and_describe(cluster: Cluster) -> None:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            member = Member(admin, "g1")
            assert await member.heartbeat() == 2000
            entries = {e.name: e for e in (await admin.describe_config_entries([res]))[res]}
            assert entries["consumer.heartbeat.interval.ms"].value == "2000"   # the broker's
            assert entries["consumer.heartbeat.interval.ms"].source == "DEFAULT_CONFIG"
            assert entries["share.isolation.level"].value == "read_uncommitted"
            with pytest.raises(errors.InvalidConfigError, match="must be greater than or"):
                await admin.alter_configs({res: {"consumer.heartbeat.interval.ms": "999"}})
            with pytest.raises(errors.InvalidConfigError, match="Unknown group config"):
                await admin.alter_configs({res: {"consumer.nope": "1"}})
            assert entries["share.delivery.count.limit"].value == "5"
            assert entries["share.partition.max.record.locks"].value == "2000"
            await admin.alter_configs({res: {"consumer.heartbeat.interval.ms": "3000",
                                             "share.record.lock.duration.ms": "20000",
                                             "share.delivery.count.limit": "3",
                                             "share.partition.max.record.locks": "150"}})
            entries = {e.name: e for e in (await admin.describe_config_entries([res]))[res]}
            assert (entries["consumer.heartbeat.interval.ms"].value,
                    entries["consumer.heartbeat.interval.ms"].source) == \
                ("3000", "DYNAMIC_GROUP_CONFIG")
            assert await member.heartbeat() == 3000      # the member's next heartbeat
            assert await Member(admin, "g2").heartbeat() == 2000

    with Cluster(brokers=1, config=CONFIG, data_dir=tmp_path) as cluster:
        cluster.create_topic("t", 2, 1)
        asyncio.run(alter_and_describe(cluster))
        settings = cluster.brokers[0].groups.group_config("g1")
        assert (settings.consumer_heartbeat_interval_ms, settings.share_record_lock_duration_ms,
                settings.share_delivery_count_limit,
                settings.share_partition_max_record_locks) == (3000, 20000, 3, 150)
        share = cluster.brokers[0].share
        assert share is not None    # what the share-partitions of the group run with
        assert (share.settings("g1").delivery_count_limit,
                share.settings("g1").partition_max_record_locks) == (3, 150)
        assert cluster.brokers[0].groups.group_config("other").consumer_heartbeat_interval_ms \
            == 2000

    with Cluster(brokers=1, config=CONFIG, data_dir=tmp_path) as cluster:   # a restart
        assert cluster.brokers[0].groups.group_config("g1").consumer_heartbeat_interval_ms \
            == 3000


def test_group_settings_are_known_broker_configs() -> None:
    from kaflite.cluster.configs import BrokerConfig

    props = {"group.consumer.heartbeat.interval.ms": "6000", "group.max.size": "5",
             "group.share.record.lock.duration.ms": "20000", "no.such.setting": "1"}
    assert BrokerConfig.from_props(props).unused() == ["no.such.setting"]

"""What each topic, group and client metrics config means on kaflite, in kaflite's words
(the ``documentation`` DescribeConfigs gives them; broker configs are in
``kaflite.cluster.config_docs``). Data only: every topic config kaflite describes
(``configs.TOPIC_CONFIGS``), every group config and every client metrics config has its
sentence, which says plainly when kaflite does not act on the config.
"""

from __future__ import annotations

__all__ = ["CLIENT_METRICS", "GROUP", "TOPIC"]

_IGNORED = " kaflite stores and describes it, but its logs do not act on it."

#: topic config -> what it controls on kaflite
TOPIC: dict[str, str] = {
    "cleanup.policy": "delete: kaflite removes old segments by retention.ms and "
                      "retention.bytes; compact: it keeps the latest record of each key; "
                      "both: both.",
    "compression.type": "The codec a topic's batches should be stored with; kaflite "
                        "stores every batch as the producer compressed it." + _IGNORED,
    "delete.retention.ms": "How long, in milliseconds, compaction keeps a tombstone (a "
                           "null-value record) before it removes it.",
    "file.delete.delay.ms": "How long a deleted segment's files wait before they are "
                            "removed." + _IGNORED,
    "flush.messages": "kaflite fsyncs the partition's log after this many records (the "
                      "default: never; the OS writes the pages back).",
    "flush.ms": "A time-based fsync of the log." + _IGNORED,
    "follower.replication.throttled.replicas": "The replicas, as partition:brokerId or *, "
                                               "whose fetching the follower's "
                                               "follower.replication.throttled.rate limits "
                                               "while they are not caught up.",
    "index.interval.bytes": "Bytes of log between two entries of a segment's indexes.",
    "leader.replication.throttled.replicas": "The replicas, as partition:brokerId or *, "
                                             "whose leader limits what it sends followers "
                                             "out of the ISR to its "
                                             "leader.replication.throttled.rate.",
    "max.compaction.lag.ms": "On a compacted topic, the age, in milliseconds, at which the "
                             "active segment rolls, so that its records become compactable.",
    "max.message.bytes": "The largest record batch, in bytes, kaflite appends to the "
                         "topic; a larger one is refused.",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime "
                              "makes kaflite stamp each batch with its append time.",
    "message.timestamp.before.max.ms": "With CreateTime: how far, in milliseconds, a "
                                       "record's timestamp may lie before the broker's "
                                       "clock.",
    "message.timestamp.after.max.ms": "With CreateTime: how far, in milliseconds, a "
                                      "record's timestamp may lie after the broker's "
                                      "clock.",
    "min.cleanable.dirty.ratio": "The share of uncompacted log that starts a compaction; "
                                 "kaflite does not wait for it." + _IGNORED,
    "min.compaction.lag.ms": "The least age, in milliseconds, of a record compaction may "
                             "remove.",
    "min.insync.replicas": "How many in-sync replicas an acks=all write needs; with fewer "
                           "kaflite answers NOT_ENOUGH_REPLICAS.",
    "preallocate": "Whether a new segment file is created at its full size." + _IGNORED,
    "retention.bytes": "The most bytes kaflite keeps per partition before it deletes the "
                       "oldest segments (-1: no limit).",
    "retention.ms": "How long, in milliseconds, kaflite keeps a segment after its newest "
                    "record (-1: forever).",
    "segment.bytes": "The size, in bytes, at which kaflite starts a new segment (kaflite "
                     "accepts sizes from 14 bytes, for tests).",
    "segment.index.bytes": "The size of a segment's index files." + _IGNORED,
    "segment.jitter.ms": "A random shortening of segment.ms." + _IGNORED,
    "segment.ms": "The age, in milliseconds, at which kaflite starts a new segment even if "
                  "it is not full.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become "
                                      "leader; kaflite never elects one, whatever this "
                                      "says.",
}

#: group config -> what it controls on kaflite (it overrides the broker's setting for one
#: group, from the member's next heartbeat)
GROUP: dict[str, str] = {
    "consumer.session.timeout.ms": "This consumer group's session timeout, in "
                                   "milliseconds: a member silent this long is removed.",
    "consumer.heartbeat.interval.ms": "How often, in milliseconds, this consumer group's "
                                      "members are asked to heartbeat.",
    "share.session.timeout.ms": "This share group's session timeout, in milliseconds: a "
                                "member silent this long is removed.",
    "share.heartbeat.interval.ms": "How often, in milliseconds, this share group's members "
                                   "are asked to heartbeat.",
    "share.record.lock.duration.ms": "How long, in milliseconds, a member of this share "
                                     "group holds the records it fetched.",
    "share.delivery.count.limit": "How many times this share group is given a record "
                                  "before it is archived.",
    "share.partition.max.record.locks": "The most records of one partition this share "
                                        "group may hold acquired at once.",
    "share.auto.offset.reset": "Where this share group starts on a partition it has no "
                               "state for: latest, earliest or by_duration:<ISO-8601>.",
    "share.isolation.level": "read_committed: this share group sees committed transactional "
                             "records only; read_uncommitted: it sees all.",
}

#: client metrics config -> what it controls on kaflite (KIP-714 subscriptions)
CLIENT_METRICS: dict[str, str] = {
    "metrics": "Prefixes of the metric names matching clients are asked to push "
               "(* for all of them).",
    "interval.ms": "How often, in milliseconds, matching clients push their metrics "
                   "(100 to 3600000).",
    "match": "selector=regex terms a client must all match (client_id, "
             "client_software_name ...); none matches every client.",
}

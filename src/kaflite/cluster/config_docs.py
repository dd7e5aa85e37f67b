"""What each config means on kaflite, in kaflite's words: the ``documentation`` of a
DescribeConfigs answer (v3 and later, when the request sets ``include_documentation``).

Kafka answers with its ConfigDef's doc string; kaflite takes the facts from Kafka (names,
types, defaults: ``_kafka_broker_configs``) but writes its own text, which says what the
config does on kaflite. A broker config kaflite reads has its own sentence here
(``BROKER``, ``tests/cluster/test_config_docs.py`` finds them in the source); every other
Kafka broker config gets ``NOT_ACTED``, as it is: accepted, stored and described, and
otherwise ignored. Topic, group and client metrics configs each have their own sentence.
A name Kafka does not know has no documentation (null, as Kafka answers), but for the
few kaflite reads itself (``kaflite.*``, ``sasl.users``, ``super.users``).
"""

from __future__ import annotations

from kaflite.cluster._kafka_broker_configs import CONFIGS
from kaflite.cluster.config_docs_topic import CLIENT_METRICS, GROUP, TOPIC

__all__ = ["BROKER", "CLIENT_METRICS", "GROUP", "NOT_ACTED", "TOPIC", "broker_doc"]

#: the documentation of a Kafka broker config kaflite does not act on
NOT_ACTED = ("Apache Kafka's broker config; kaflite accepts and describes it, but its "
             "broker does not act on it.")

_SYNONYM_ONLY = ("The broker-wide default of topic config {}; kaflite stores and describes "
                 "it, but its logs do not act on it.")
_DYNAMIC_ONLY = ("kaflite checks a dynamic change of it as Kafka does, then stores and "
                 "describes it; it has no {} to resize.")
_COORDINATOR_TOPIC = "How many partitions kaflite creates {} with, when it first needs it."

#: broker config -> what it controls on kaflite
BROKER: dict[str, str] = {
    # -- identity and listeners -------------------------------------------------------
    "node.id": "This broker's id, which kaflite gives each broker when the cluster starts "
               "and writes to its data directory's meta.properties; read-only.",
    "broker.id": "The same id as node.id: kaflite describes the broker's id under both "
                 "names; read-only.",
    "process.roles": "Always 'broker': kaflite's controller is not a separate Kafka node, "
                     "so every broker describes itself as a broker alone.",
    "broker.rack": "The rack kaflite's cluster gave this broker (its racks argument): "
                   "kaflite spreads a topic's replicas across racks and reports the rack "
                   "in Metadata.",
    "log.dirs": "The directory that holds this broker's partition logs and checkpoints; "
                "kaflite uses one directory per broker.",
    "listeners": "The addresses this broker listens on, as NAME://host:port, comma "
                 "separated; port 0 picks a free port and the bound one is described.",
    "advertised.listeners": "The addresses this broker gives clients in Metadata, per "
                            "listener name; they default to the bound listeners.",
    "listener.security.protocol.map": "Which security protocol (PLAINTEXT, SSL, "
                                      "SASL_PLAINTEXT, SASL_SSL) each listener name speaks.",
    "inter.broker.listener.name": "The listener a kaflite broker uses to reach the other "
                                  "brokers (replica fetches, transaction markers).",
    "security.inter.broker.protocol": "The security protocol of the listener brokers use "
                                      "between themselves, when inter.broker.listener.name "
                                      "is not set.",
    # -- requests and connections -----------------------------------------------------
    "socket.request.max.bytes": "The largest request frame, in bytes, a kaflite broker "
                                "reads; a larger one closes the connection.",
    "queued.max.request.bytes": "Bytes of requests a kaflite broker holds in memory at "
                                "once; when full it stops reading from busy connections "
                                "(kaflite's default is 256 MiB, not unbounded).",
    "connections.max.idle.ms": "Milliseconds after which a kaflite broker closes a client "
                               "connection that has sent nothing.",
    "connections.max.reauth.ms": "The longest a SASL session lasts, in milliseconds, "
                                 "before the client must authenticate again (0: no "
                                 "limit); an OAUTHBEARER token's expiry caps it too.",
    "unstable.api.versions.enable": "When true, a kaflite broker also serves the request "
                                    "versions Kafka's schemas mark unstable.",
    "request.timeout.ms": "How long, in milliseconds, a kaflite broker waits for the "
                          "replicas to acknowledge the transaction markers it writes.",
    "telemetry.max.bytes": "The largest metrics payload, in bytes, a kaflite broker takes "
                           "from a client's PushTelemetry.",
    "quota.window.num": "How many windows kaflite keeps to measure a client's rate against "
                        "its quotas.",
    "quota.window.size.seconds": "The length, in seconds, of each window kaflite measures "
                                 "a client's rate over for its quotas.",
    "max.connections": _DYNAMIC_ONLY.format("connection limit"),
    "max.connection.creation.rate": _DYNAMIC_ONLY.format("connection rate limit"),
    "num.network.threads": _DYNAMIC_ONLY.format("network thread pool"),
    "log.cleaner.threads": _DYNAMIC_ONLY.format("cleaner thread pool"),
    "log.cleaner.dedupe.buffer.size": _DYNAMIC_ONLY.format("cleaner buffer"),
    # -- topics -----------------------------------------------------------------------
    "auto.create.topics.enable": "When true, a kaflite broker creates a topic a client "
                                 "asks Metadata for (and allows auto-creation) that does "
                                 "not exist yet.",
    "num.partitions": "Partitions of a topic created without a partition count "
                      "(auto-created, or CreateTopics with -1).",
    "default.replication.factor": "Replication factor of a topic created without one; "
                                  "auto-created topics take at most the live brokers.",
    "delete.topic.enable": "kaflite always lets a client delete a topic (subject to ACLs); "
                           "it stores and describes this setting but does not read it.",
    "min.insync.replicas": "The broker-wide default of topic config min.insync.replicas: "
                           "the in-sync replicas an acks=all write needs on kaflite.",
    "message.max.bytes": "The broker-wide default of topic config max.message.bytes: the "
                         "largest record batch, in bytes, kaflite appends.",
    "compression.type": "The broker-wide default of topic config compression.type; kaflite "
                        "stores the batches as the producer compressed them whatever it "
                        "says.",
    "unclean.leader.election.enable": "kaflite never elects a leader from outside the ISR; "
                                      "it stores and describes this setting but does not "
                                      "act on it.",
    "producer.id.expiration.ms": "kaflite's logs forget an idle producer after a day, "
                                 "Kafka's default; the broker does not read this setting.",
    "cordoned.log.dirs": "The log directories Kafka stops placing new replicas in "
                         "(KIP-1066); kaflite refuses a change of it below metadata.version "
                         "4.3-IV0, as Kafka does, then stores and describes it, but cordons "
                         "nothing.",
    # -- the log: broker-wide defaults of topic configs --------------------------------
    "log.cleanup.policy": "The broker-wide default of topic config cleanup.policy: delete "
                          "old segments, compact by key, or both.",
    "log.retention.ms": "The broker-wide default of topic config retention.ms: how long, "
                        "in milliseconds, kaflite keeps a record (-1: forever).",
    "log.retention.minutes": "log.retention.ms in minutes, used when log.retention.ms is "
                             "not set.",
    "log.retention.hours": "log.retention.ms in hours, used when neither "
                           "log.retention.ms nor log.retention.minutes is set.",
    "log.retention.bytes": "The broker-wide default of topic config retention.bytes: the "
                           "most bytes kaflite keeps per partition (-1: no limit).",
    "log.retention.check.interval.ms": "How often, in milliseconds, a kaflite broker "
                                       "deletes the segments past their retention.",
    "log.segment.bytes": "The broker-wide default of topic config segment.bytes: the size, "
                         "in bytes, at which kaflite starts a new segment.",
    "log.roll.ms": "The broker-wide default of topic config segment.ms: the age, in "
                   "milliseconds, at which kaflite starts a new segment.",
    "log.roll.hours": "log.roll.ms in hours, used when log.roll.ms is not set.",
    "log.roll.jitter.ms": _SYNONYM_ONLY.format("segment.jitter.ms"),
    "log.roll.jitter.hours": "log.roll.jitter.ms in hours, which kaflite stores and "
                             "describes, but its logs do not act on.",
    "log.index.interval.bytes": "The broker-wide default of topic config "
                                "index.interval.bytes: bytes of log between two offset "
                                "index entries.",
    "log.index.size.max.bytes": _SYNONYM_ONLY.format("segment.index.bytes"),
    "log.segment.delete.delay.ms": _SYNONYM_ONLY.format("file.delete.delay.ms"),
    "log.preallocate": _SYNONYM_ONLY.format("preallocate"),
    "log.flush.interval.messages": "The broker-wide default of topic config "
                                   "flush.messages: kaflite fsyncs a log after this many "
                                   "records.",
    "log.flush.interval.ms": _SYNONYM_ONLY.format("flush.ms"),
    "log.message.timestamp.type": "The broker-wide default of topic config "
                                  "message.timestamp.type: keep the producer's "
                                  "timestamps (CreateTime) or stamp the append time.",
    "log.message.timestamp.before.max.ms": "The broker-wide default of topic config "
                                           "message.timestamp.before.max.ms: how far, in "
                                           "milliseconds, a CreateTime may lie in the past.",
    "log.message.timestamp.after.max.ms": "The broker-wide default of topic config "
                                          "message.timestamp.after.max.ms: how far, in "
                                          "milliseconds, a CreateTime may lie in the future.",
    "log.cleaner.delete.retention.ms": "The broker-wide default of topic config "
                                       "delete.retention.ms: how long, in milliseconds, "
                                       "compaction keeps a tombstone.",
    "log.cleaner.min.compaction.lag.ms": "The broker-wide default of topic config "
                                         "min.compaction.lag.ms: the least age, in "
                                         "milliseconds, of a record compaction may drop.",
    "log.cleaner.max.compaction.lag.ms": "The broker-wide default of topic config "
                                         "max.compaction.lag.ms: a compacted topic's "
                                         "segment rolls at this age, in milliseconds.",
    "log.cleaner.min.cleanable.ratio": _SYNONYM_ONLY.format("min.cleanable.dirty.ratio"),
    # -- replication and liveness ------------------------------------------------------
    "replica.lag.time.max.ms": "A follower that has not caught up for this long, in "
                               "milliseconds, leaves the ISR on kaflite.",
    "replica.fetch.wait.max.ms": "The longest, in milliseconds, a follower's fetch waits "
                                 "at the leader for new records.",
    "replica.fetch.max.bytes": "The bytes per partition a follower asks for in one fetch.",
    # replication throttling (KIP-73, kaflite.cluster.quotas.replication); the rates are
    # dynamic only and outside Kafka's broker ConfigDef
    "leader.replication.throttled.rate": "Bytes per second this broker, as a leader, sends "
                                         "of the partitions its topics' "
                                         "leader.replication.throttled.replicas name it for; "
                                         "above it, a follower out of the ISR gets none of "
                                         "them. Set dynamically only.",
    "follower.replication.throttled.rate": "Bytes per second this broker's replica fetchers "
                                           "fetch of the partitions its topics' "
                                           "follower.replication.throttled.replicas name it "
                                           "for; above it, those not caught up are left out "
                                           "of its fetches. Set dynamically only.",
    "replica.alter.log.dirs.io.max.bytes.per.second": "Kafka's limit on moving replicas "
                                                      "between log directories; kaflite "
                                                      "checks, stores and describes it, but "
                                                      "has one directory per broker and "
                                                      "nothing to throttle.",
    "replication.quota.window.num": "How many windows kaflite keeps to measure the "
                                    "replication throttle's rates.",
    "replication.quota.window.size.seconds": "The length, in seconds, of each window "
                                             "kaflite measures the replication throttle's "
                                             "rates over.",
    "replica.fetch.backoff.ms": "How long, in milliseconds, a follower waits after a "
                                "failed fetch before it tries again.",
    "replica.high.watermark.checkpoint.interval.ms": "How often, in milliseconds, a kaflite "
                                                     "broker writes its partitions' high "
                                                     "watermarks to disk.",
    "broker.heartbeat.interval.ms": "How often, in milliseconds, a broker of a "
                                    "multi-process kaflite cluster heartbeats the "
                                    "controller.",
    "broker.session.timeout.ms": "A broker whose heartbeats stop for this long, in "
                                 "milliseconds, is fenced by kaflite's controller.",
    # -- security ----------------------------------------------------------------------
    "authorizer.class.name": "Any non-empty class name turns on kaflite's ACL authorizer; "
                             "kaflite does not load the class.",
    "allow.everyone.if.no.acl.found": "With the authorizer on: when true, a resource with "
                                      "no ACL is open to everyone.",
    "sasl.enabled.mechanisms": "The SASL mechanisms a listener offers (PLAIN, "
                               "SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER).",
    "sasl.jaas.config": "The JAAS login line kaflite reads a listener's PLAIN users "
                        "(user_<name>=...) and the inter-broker login from.",
    "sasl.mechanism.inter.broker.protocol": "The SASL mechanism a kaflite broker uses to "
                                            "log in to the other brokers.",
    "sasl.oauthbearer.jwks.endpoint.url": "Where kaflite fetches the keys that sign "
                                          "OAUTHBEARER tokens; without it, it takes "
                                          "unsecured tokens.",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "How often, in milliseconds, kaflite "
                                                 "fetches the JWKS keys again.",
    "sasl.oauthbearer.expected.issuer": "The iss claim kaflite requires of an OAUTHBEARER "
                                        "token (none: any).",
    "sasl.oauthbearer.expected.audience": "The aud values, comma separated, one of which "
                                          "an OAUTHBEARER token must carry (none: any).",
    "sasl.oauthbearer.sub.claim.name": "The token claim kaflite takes the principal's name "
                                       "from.",
    "sasl.oauthbearer.scope.claim.name": "The token claim kaflite takes the scopes from.",
    "sasl.oauthbearer.clock.skew.seconds": "The clock difference, in seconds, kaflite "
                                           "allows when it checks a signed token's times.",
    "ssl.keystore.type": "The keystore format; kaflite reads PEM only and refuses another "
                         "type.",
    "ssl.keystore.location": "The file holding the listener's certificate and private key.",
    "ssl.keystore.password": "kaflite's PEM keystores have no store password: as Kafka, "
                             "it refuses one with a PEM keystore.",
    "ssl.keystore.key": "The listener's private key, as PEM text in the config.",
    "ssl.keystore.certificate.chain": "The listener's certificate chain, as PEM text in the "
                                      "config.",
    "ssl.key.password": "The password of the listener's encrypted private key.",
    "ssl.truststore.type": "The truststore format; kaflite reads PEM only and refuses "
                           "another type.",
    "ssl.truststore.location": "The file of CA certificates a listener trusts for client "
                               "certificates, and a broker for the other brokers'.",
    "ssl.truststore.password": "kaflite's PEM truststores have no password: as Kafka, it "
                               "refuses one with a PEM truststore.",
    "ssl.truststore.certificates": "The trusted CA certificates, as PEM text in the config.",
    "ssl.client.auth": "Whether a TLS listener asks for (requested) or demands (required) a "
                       "client certificate, or neither (none).",
    "ssl.endpoint.identification.algorithm": "https: a broker checks the other brokers' "
                                             "host names against their certificates; "
                                             "empty: it does not.",
    "ssl.allow.dn.changes": "When true, a keystore reloaded while the broker runs may "
                            "carry a certificate of another subject.",
    "ssl.allow.san.changes": "When true, a reloaded certificate may drop SubjectAltNames "
                             "the old one had.",
    "delegation.token.secret.key": "The key kaflite signs delegation tokens with; "
                                   "delegation tokens are off without it.",
    "delegation.token.max.lifetime.ms": "The longest, in milliseconds, a delegation token "
                                        "lives, renewals included.",
    "delegation.token.expiry.time.ms": "How long, in milliseconds, a delegation token "
                                       "lives until it is renewed.",
    "delegation.token.expiry.check.interval.ms": "How often, in milliseconds, kaflite "
                                                 "removes expired delegation tokens.",
    "sasl.users": "kaflite's own: PLAIN and SCRAM users as user:password pairs, comma "
                  "separated, besides those of sasl.jaas.config.",
    "super.users": "With the authorizer on: principals (User:name), separated by ';', "
                   "allowed everything whatever the ACLs.",
    # -- groups and offsets -------------------------------------------------------------
    "offsets.topic.num.partitions": _COORDINATOR_TOPIC.format("__consumer_offsets"),
    "offsets.topic.replication.factor": "Replication factor of __consumer_offsets; kaflite "
                                        "caps it at the live brokers.",
    "offsets.topic.segment.bytes": "Segment size, in bytes, of __consumer_offsets.",
    "offsets.topic.compression.codec": "kaflite writes the group coordinator's records "
                                       "uncompressed; it stores and describes this "
                                       "setting but does not act on it.",
    "offsets.commit.timeout.ms": "How long, in milliseconds, an offset commit waits for "
                                 "__consumer_offsets' replicas.",
    "offsets.retention.minutes": "How long, in minutes, kaflite keeps an empty group's "
                                 "committed offsets.",
    "offsets.retention.check.interval.ms": "How often, in milliseconds, kaflite expires "
                                           "old committed offsets.",
    "offsets.load.buffer.size": "Bytes read at a time when a new group coordinator loads "
                                "its __consumer_offsets partition.",
    "offset.metadata.max.bytes": "The longest metadata string, in bytes, an offset commit "
                                 "may carry.",
    "group.initial.rebalance.delay.ms": "How long, in milliseconds, a new classic group "
                                        "waits for more members before its first "
                                        "rebalance.",
    "group.min.session.timeout.ms": "The shortest session timeout, in milliseconds, a "
                                    "classic group member may ask for.",
    "group.max.session.timeout.ms": "The longest session timeout, in milliseconds, a "
                                    "classic group member may ask for.",
    "group.max.size": "The most members a classic group may have.",
    "group.coordinator.rebalance.protocols": "The group protocols kaflite serves: classic "
                                             "and, when listed, consumer (KIP-848).",
    "group.consumer.session.timeout.ms": "A consumer group member that does not heartbeat "
                                         "for this long, in milliseconds, is removed.",
    "group.consumer.min.session.timeout.ms": "The least consumer.session.timeout.ms, in "
                                             "milliseconds, a group config may set.",
    "group.consumer.max.session.timeout.ms": "The most consumer.session.timeout.ms, in "
                                             "milliseconds, a group config may set.",
    "group.consumer.heartbeat.interval.ms": "How often, in milliseconds, kaflite asks a "
                                            "consumer group member to heartbeat.",
    "group.consumer.min.heartbeat.interval.ms": "The least "
                                                "consumer.heartbeat.interval.ms, in "
                                                "milliseconds, a group config may set.",
    "group.consumer.max.heartbeat.interval.ms": "The most consumer.heartbeat.interval.ms, "
                                                "in milliseconds, a group config may set.",
    "group.consumer.max.size": "The most members a consumer group may have.",
    "group.consumer.assignors": "The server-side assignors of consumer groups (uniform, "
                                "range); the first is the default.",
    "group.consumer.migration.policy": "Whether a group may move between the classic and "
                                       "consumer protocols: bidirectional, upgrade, "
                                       "downgrade or disabled.",
    # -- share groups (KIP-932) ------------------------------------------------------
    "group.share.session.timeout.ms": "A share group member that does not heartbeat for "
                                      "this long, in milliseconds, is removed.",
    "group.share.min.session.timeout.ms": "The least share.session.timeout.ms, in "
                                          "milliseconds, a group config may set.",
    "group.share.max.session.timeout.ms": "The most share.session.timeout.ms, in "
                                          "milliseconds, a group config may set.",
    "group.share.heartbeat.interval.ms": "How often, in milliseconds, kaflite asks a share "
                                         "group member to heartbeat.",
    "group.share.min.heartbeat.interval.ms": "The least share.heartbeat.interval.ms, in "
                                             "milliseconds, a group config may set.",
    "group.share.max.heartbeat.interval.ms": "The most share.heartbeat.interval.ms, in "
                                             "milliseconds, a group config may set.",
    "group.share.max.size": "The most members a share group may have.",
    "group.share.assignors": "The share group assignor; kaflite has the simple one only.",
    "group.share.record.lock.duration.ms": "How long, in milliseconds, a share consumer "
                                           "holds the records it fetched before they are "
                                           "offered again.",
    "group.share.min.record.lock.duration.ms": "The least share.record.lock.duration.ms, "
                                               "in milliseconds, a group config may set.",
    "group.share.max.record.lock.duration.ms": "The most share.record.lock.duration.ms, in "
                                               "milliseconds, a group config may set.",
    "group.share.delivery.count.limit": "How many times a record is delivered to a share "
                                        "group before it is archived.",
    "group.share.min.delivery.count.limit": "The least share.delivery.count.limit a group "
                                            "config may set.",
    "group.share.max.delivery.count.limit": "The most share.delivery.count.limit a group "
                                            "config may set.",
    "group.share.partition.max.record.locks": "The most records of one partition a share "
                                              "group may hold acquired at once.",
    "group.share.min.partition.max.record.locks": "The least "
                                                  "share.partition.max.record.locks a "
                                                  "group config may set.",
    "group.share.max.partition.max.record.locks": "The most "
                                                  "share.partition.max.record.locks a "
                                                  "group config may set.",
    "group.share.max.share.sessions": "The most share fetch sessions a kaflite broker "
                                      "keeps.",
    "share.coordinator.state.topic.num.partitions": _COORDINATOR_TOPIC.format(
        "__share_group_state"),
    "share.coordinator.state.topic.replication.factor": "Replication factor of "
                                                        "__share_group_state; kaflite caps "
                                                        "it at the live brokers.",
    "share.coordinator.state.topic.min.isr": "min.insync.replicas of __share_group_state "
                                             "(at most its replication factor).",
    "share.coordinator.state.topic.segment.bytes": "Segment size, in bytes, of "
                                                   "__share_group_state.",
    "share.coordinator.write.timeout.ms": "How long, in milliseconds, a share state write "
                                          "waits for __share_group_state's replicas.",
    "share.coordinator.load.buffer.size": "Bytes read at a time when a new share "
                                          "coordinator loads its state partition.",
    "share.coordinator.snapshot.update.records.per.snapshot": "How many state updates of "
                                                              "a share partition kaflite "
                                                              "writes between two "
                                                              "snapshots.",
    # -- transactions ------------------------------------------------------------------
    "transaction.state.log.num.partitions": _COORDINATOR_TOPIC.format("__transaction_state"),
    "transaction.state.log.replication.factor": "Replication factor of "
                                                "__transaction_state; kaflite caps it at "
                                                "the live brokers.",
    "transaction.state.log.min.isr": "min.insync.replicas of __transaction_state (at most "
                                     "its replication factor).",
    "transaction.state.log.segment.bytes": "Segment size, in bytes, of __transaction_state.",
    "transaction.state.log.load.buffer.size": "Bytes read at a time when a new transaction "
                                              "coordinator loads its partition.",
    "transaction.max.timeout.ms": "The longest transaction timeout, in milliseconds, a "
                                  "producer may ask for.",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "How often, in "
                                                                   "milliseconds, kaflite "
                                                                   "aborts transactions "
                                                                   "past their timeout.",
    "transactional.id.expiration.ms": "How long, in milliseconds, kaflite keeps an idle "
                                      "transactional id.",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "How often, in "
                                                                  "milliseconds, kaflite "
                                                                  "removes expired "
                                                                  "transactional ids.",
    "transaction.partition.verification.enable": "When true, a leader checks with the "
                                                 "coordinator that a transactional batch's "
                                                 "partition was added (KIP-890).",
    "transaction.two.phase.commit.enable": "kaflite has no two-phase commit (KIP-939): it "
                                           "must stay false, and kaflite refuses true.",
    "add.partitions.to.txn.retry.backoff.ms": "How long, in milliseconds, a leader waits "
                                              "before it asks a busy coordinator again to "
                                              "add a partition.",
    "add.partitions.to.txn.retry.backoff.max.ms": "How long, in milliseconds, a leader "
                                                  "keeps asking a busy coordinator before "
                                                  "it answers the producer.",
    # -- kaflite's own: the request log --------------------------------------------------
    "kaflite.request.log.enable": "kaflite's own: when true, every broker writes a record "
                                  "of each request it serves to __kaflite_requests.",
    "kaflite.request.log.num.partitions": "kaflite's own: partitions of __kaflite_requests "
                                          "(0: one per broker).",
    "kaflite.request.log.replication.factor": "kaflite's own: replication factor of "
                                              "__kaflite_requests.",
    "kaflite.request.log.retention.ms": "kaflite's own: how long, in milliseconds, "
                                        "__kaflite_requests keeps its records.",
    "kaflite.request.log.buffer.records": "kaflite's own: request records a broker buffers "
                                          "before it drops new ones.",
    "kaflite.request.log.flush.ms": "kaflite's own: how often, in milliseconds, a broker "
                                    "appends its buffered request records.",
}


def broker_doc(name: str) -> str | None:
    """A broker config's documentation: its own sentence, ``NOT_ACTED`` for another Kafka
    config, None for a name neither Kafka nor kaflite knows."""
    doc = BROKER.get(name)
    if doc is None and name in CONFIGS:
        return NOT_ACTED
    return doc

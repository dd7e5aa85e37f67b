// Apache Kafka's Java Admin client driven against a cluster under test
// (tests/interop/test_java_client.py). Run as a single source file, compiled at each run
// against the kafka-clients jar that tools/ensure_kafka.sh fetched; no jar of it is committed.
//
//   admin BOOTSTRAP PREFIX   one scripted session over every Admin method, each answer
//                            printed as "RESULT admin.<method>[.<case>]=<value>"
//
// The test runs it against kaflite and against Apache Kafka and compares the two maps, so
// every value printed is normalized to what both brokers should agree on: the names this
// run made are printed with PREFIX replaced by "P"; ids (topic, producer, member, cluster),
// node ids, ports, sizes and wall-clock times are left out or reduced to what they say
// (present, equal to another, counts). A method that fails prints ERROR:<exception class>.
// Every step catches its own failure, so one refusal never hides the rest.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.function.Predicate;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.AlterPartitionReassignmentsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeShareGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class AdminDriver {
    private static final long SETTLE_MS = 20_000;

    private static String prefix;
    private static String bootstrap;
    private static Admin admin;
    private static List<Integer> nodes;
    private static short rf;

    interface Call {
        Object call() throws Exception;
    }

    // -- printing -----------------------------------------------------------------------

    /** PREFIX replaced by P: the names are the same on both targets but this one. */
    private static String n(Object value) {
        return String.valueOf(value).replace(prefix, "P").replace('\n', ' ');
    }

    private static String error(Throwable e) {
        Throwable cause = e;
        while ((cause instanceof ExecutionException || cause instanceof java.util.concurrent.CompletionException)
               && cause.getCause() != null) {
            cause = cause.getCause();
        }
        System.out.println("NOTE " + cause.getClass().getSimpleName() + ": " + n(cause.getMessage()));
        return "ERROR:" + cause.getClass().getSimpleName();
    }

    private static void step(String key, Call call) {
        String value;
        long began = System.currentTimeMillis();
        try {
            value = n(call.call());
        } catch (Exception e) {
            value = error(e);
        }
        System.out.println("RESULT admin." + key + "=" + value);
        long took = System.currentTimeMillis() - began;
        if (took > 2000) {
            System.out.println("SLOW admin." + key + " " + took + " ms");
        }
        System.out.flush();
    }

    /** A future's value as text, or ERROR:<class>: for per-item results. */
    private static String get(KafkaFuture<?> future) {
        try {
            Object got = future.get();
            return got == null ? "ok" : n(got);
        } catch (Exception e) {
            return error(e);
        }
    }

    private static <K> String each(Map<K, ? extends KafkaFuture<?>> futures) {
        Map<String, String> out = new TreeMap<>();
        futures.forEach((k, f) -> out.put(n(k), get(f)));
        return out.toString();
    }

    private static <T> T until(Call get, Predicate<Object> ok) throws Exception {
        long deadline = System.currentTimeMillis() + SETTLE_MS;
        while (true) {
            Object got;
            try {
                got = get.call();
            } catch (Exception e) {
                got = e;
            }
            if (ok.test(got) || System.currentTimeMillis() > deadline) {
                if (got instanceof Exception e) {
                    throw e;
                }
                @SuppressWarnings("unchecked") T t = (T) got;
                return t;
            }
            Thread.sleep(200);
        }
    }

    private static boolean answered(Object got) {
        return !(got instanceof Exception);
    }

    private static boolean sixTopics(Object got) {
        return got instanceof Collection<?> c && c.size() == 6;
    }

    private static String ops(Set<AclOperation> ops) {
        return ops == null ? "null" : new TreeSet<>(ops.stream().map(Enum::name).toList()).toString();
    }

    private static int node(Node node) {
        return node == null ? -1 : node.id();
    }

    private static String tps(Collection<TopicPartition> tps) {
        return new TreeSet<>(tps.stream().map(AdminDriver::n).toList()).toString();
    }

    // -- clients ------------------------------------------------------------------------

    private static Properties common(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "20000");
        return p;
    }

    private static KafkaConsumer<String, String> consumer(String group, String protocol, String instance) {
        Properties p = common(group + "-member");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (instance != null) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
            // the static member outlives its consumer until the admin removes it
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "120000");
        }
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    private static void await(KafkaConsumer<String, String> c, int partitions) {
        long deadline = System.currentTimeMillis() + SETTLE_MS * 2;
        while (c.assignment().size() < partitions && System.currentTimeMillis() < deadline) {
            c.poll(Duration.ofMillis(100));
        }
    }

    private static void awaitTopic(String topic, int partitions) throws Exception {
        until(() -> admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic),
              d -> d instanceof TopicDescription t && t.partitions().size() == partitions
                   && t.partitions().stream().allMatch(p -> p.leader() != null));
    }

    // -- the session --------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        if (!args[0].equals("admin")) {
            throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        bootstrap = args[1];
        prefix = args[2];
        try (Admin a = Admin.create(common("java-admin-driver"))) {
            admin = a;
            nodes = a.describeCluster().nodes().get().stream().map(Node::id).sorted().toList();
            rf = (short) Math.min(3, nodes.size());
            System.out.println("RESULT brokers=" + nodes.size());
            topics();
            configs();
            long base = records();
            offsets(base);
            groups();
            logDirs();
            reassignments();
            security();
            features();
            transactions();
            shareGroups();
            cluster();
            deletions();
        }
    }

    private static void topics() throws Exception {
        step("createTopics.validateOnly", () -> admin.createTopics(
            List.of(new NewTopic(prefix + "-v", 3, rf)),
            new CreateTopicsOptions().validateOnly(true)).all().get());
        step("createTopics", () -> {
            NewTopic a = new NewTopic(prefix + "-a", 3, rf).configs(Map.of(
                "retention.ms", "3600000", "max.message.bytes", "200000", "cleanup.policy", "delete"));
            NewTopic b = new NewTopic(prefix + "-b", Optional.of(1), Optional.empty());
            NewTopic c = new NewTopic(prefix + "-c", 2, rf);
            NewTopic d = new NewTopic(prefix + "-d", 1, rf);
            NewTopic s = new NewTopic(prefix + "-s", 1, rf);
            NewTopic ra = new NewTopic(prefix + "-r", 2, rf);
            CreateTopicsResult r = admin.createTopics(List.of(a, b, c, d, s, ra));
            String out = each(r.values());
            StringBuilder more = new StringBuilder(out);
            for (String t : List.of(a.name(), b.name())) {
                more.append(" ").append(n(t)).append(":").append(r.numPartitions(t).get())
                    .append("x").append(r.replicationFactor(t).get())
                    .append(",id=").append(r.topicId(t).get() != null);
            }
            Config config = r.config(a.name()).get();
            for (String name : List.of("retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes")) {
                ConfigEntry e = config.get(name);
                more.append(" ").append(name).append("=")
                    .append(e == null ? "absent" : e.value() + "/" + e.source());
            }
            return more;
        });
        for (String t : List.of("-a", "-b", "-c", "-d", "-s", "-r")) {
            awaitTopic(prefix + t, t.equals("-a") ? 3 : t.equals("-c") || t.equals("-r") ? 2 : 1);
        }
        step("createTopics.errors", () -> each(admin.createTopics(List.of(
            new NewTopic(prefix + "-a", 1, rf),
            new NewTopic(prefix + "-zero", 0, rf),
            new NewTopic(prefix + "-rf", 1, (short) (nodes.size() + 1)),
            new NewTopic(prefix + "-cfg", 1, rf).configs(Map.of("no.such.config", "1")),
            new NewTopic(prefix + "-bad", 1, rf).configs(Map.of("retention.ms", "soon")))).values()));
        // Kafka's brokers learn of a change from the controller a little after it is
        // answered, and the admin asks any of them: what reads a change waits for it
        step("listTopics", () -> until(() -> new TreeSet<>(admin.listTopics().names().get().stream()
            .filter(t -> t.startsWith(prefix)).map(AdminDriver::n).toList()), AdminDriver::sixTopics));
        step("listTopics.listings", () -> until(() -> admin.listTopics(new ListTopicsOptions().listInternal(true))
            .listings().get().stream().filter(l -> l.name().startsWith(prefix))
            .map(l -> n(l.name()) + ":" + l.isInternal()).sorted().toList(), AdminDriver::sixTopics));
        step("describeTopics", () -> until(() -> {
            TopicDescription d = admin.describeTopics(List.of(prefix + "-a"),
                new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames().get()
                .get(prefix + "-a");
            StringBuilder out = new StringBuilder(n(d.name()) + " internal=" + d.isInternal()
                + " id=" + (d.topicId() != null && !d.topicId().equals(Uuid.ZERO_UUID)));
            for (TopicPartitionInfo p : d.partitions()) {
                out.append(" ").append(p.partition()).append(":replicas=").append(p.replicas().size())
                    .append(",isr=").append(p.isr().size())
                    .append(",leaderInReplicas=").append(p.replicas().contains(p.leader()))
                    .append(",leaderFirst=").append(p.replicas().get(0).equals(p.leader()))
                    .append(",elr=").append(p.elr() == null ? "null" : p.elr().size());
            }
            out.append(" ops=").append(ops(d.authorizedOperations()));
            return out;
        }, AdminDriver::answered));
        step("describeTopics.byId", () -> until(() -> {
            Uuid id = admin.describeTopics(List.of(prefix + "-b")).allTopicNames().get()
                .get(prefix + "-b").topicId();
            TopicDescription d = admin.describeTopics(TopicCollection.ofTopicIds(List.of(id)))
                .allTopicIds().get().get(id);
            return n(d.name()) + " partitions=" + d.partitions().size() + " sameId=" + id.equals(d.topicId());
        }, AdminDriver::answered));
        step("describeTopics.unknownName", () -> admin.describeTopics(List.of(prefix + "-nope"))
            .allTopicNames().get());
        step("describeTopics.unknownId", () -> admin.describeTopics(
            TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).allTopicIds().get());
        step("createPartitions.validateOnly", () -> admin.createPartitions(
            Map.of(prefix + "-b", NewPartitions.increaseTo(5)),
            new CreatePartitionsOptions().validateOnly(true)).all().get());
        step("createPartitions", () -> each(admin.createPartitions(Map.of(
            prefix + "-b", NewPartitions.increaseTo(3),
            prefix + "-c", NewPartitions.increaseTo(1),
            prefix + "-d", NewPartitions.increaseTo(1),
            prefix + "-nope", NewPartitions.increaseTo(2))).values()));
        awaitTopic(prefix + "-b", 3);
        step("createPartitions.described", () -> until(() -> admin.describeTopics(List.of(prefix + "-b"))
            .allTopicNames().get().get(prefix + "-b").partitions().size(), size -> Integer.valueOf(3).equals(size)));
    }

    private static void configs() throws Exception {
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-a");
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, prefix + "-sg");
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(nodes.get(0)));
        ConfigResource brokers = new ConfigResource(ConfigResource.Type.BROKER, "");
        List<String> topicKeys = List.of("retention.ms", "max.message.bytes", "cleanup.policy",
                                         "segment.bytes", "compression.type", "min.insync.replicas");
        List<String> groupKeys = List.of("share.auto.offset.reset", "share.record.lock.duration.ms",
                                         "consumer.session.timeout.ms", "share.isolation.level");
        List<String> brokerKeys = List.of("message.max.bytes", "auto.create.topics.enable",
                                          "log.retention.hours", "num.partitions", "default.replication.factor",
                                          "log.cleaner.threads", "compression.type");
        configs("describeConfigs.topic", topic, topicKeys, got -> got.contains("3600000"));
        configs("describeConfigs.group", group, groupKeys, null);
        configs("describeConfigs.broker", broker, brokerKeys, null);
        configs("describeConfigs.unknownTopic", new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-nope"),
                List.of("retention.ms"), null);
        step("incrementalAlterConfigs.validateOnly", () -> each(admin.incrementalAlterConfigs(Map.of(
            topic, List.of(op("retention.ms", "1", AlterConfigOp.OpType.SET))),
            new AlterConfigsOptions().validateOnly(true)).values()));
        step("incrementalAlterConfigs.topic", () -> each(admin.incrementalAlterConfigs(Map.of(topic, List.of(
            op("retention.ms", "7200000", AlterConfigOp.OpType.SET),
            op("max.message.bytes", null, AlterConfigOp.OpType.DELETE),
            op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND)))).values()));
        configs("incrementalAlterConfigs.topic.described", topic, topicKeys,
                got -> got.contains("7200000") && got.contains("compact"));
        step("incrementalAlterConfigs.topic.subtract", () -> admin.incrementalAlterConfigs(Map.of(topic, List.of(
            op("cleanup.policy", "compact", AlterConfigOp.OpType.SUBTRACT)))).all().get());
        configs("incrementalAlterConfigs.topic.subtracted", topic, List.of("cleanup.policy"),
                got -> !got.contains("compact"));
        step("incrementalAlterConfigs.errors", () -> each(admin.incrementalAlterConfigs(Map.of(
            topic, List.of(op("no.such.config", "1", AlterConfigOp.OpType.SET)),
            new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-b"),
            List.of(op("retention.ms", "soon", AlterConfigOp.OpType.SET)),
            new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-nope"),
            List.of(op("retention.ms", "1000", AlterConfigOp.OpType.SET)))).values()));
        step("incrementalAlterConfigs.group", () -> admin.incrementalAlterConfigs(Map.of(group, List.of(
            op("share.auto.offset.reset", "earliest", AlterConfigOp.OpType.SET),
            op("share.record.lock.duration.ms", "20000", AlterConfigOp.OpType.SET)))).all().get());
        configs("incrementalAlterConfigs.group.described", group, groupKeys, got -> got.contains("20000"));
        step("incrementalAlterConfigs.group.unknownKey", () -> admin.incrementalAlterConfigs(Map.of(group,
            List.of(op("no.such.config", "1", AlterConfigOp.OpType.SET)))).all().get());
        step("incrementalAlterConfigs.group.badValue", () -> admin.incrementalAlterConfigs(Map.of(group,
            List.of(op("share.auto.offset.reset", "sometimes", AlterConfigOp.OpType.SET)))).all().get());
        // broker configs: one broker's, then the cluster-wide default; put back afterwards,
        // since the module's other tests share the cluster
        step("incrementalAlterConfigs.broker", () -> admin.incrementalAlterConfigs(Map.of(broker, List.of(
            op("message.max.bytes", "1048600", AlterConfigOp.OpType.SET)))).all().get());
        step("incrementalAlterConfigs.brokerDefault", () -> admin.incrementalAlterConfigs(Map.of(brokers,
            List.of(op("log.retention.ms", "604800001", AlterConfigOp.OpType.SET)))).all().get());
        configs("incrementalAlterConfigs.broker.described", broker, List.of("message.max.bytes", "log.retention.ms"),
                got -> got.contains("1048600") && got.contains("604800001"));
        step("incrementalAlterConfigs.broker.reverted", () -> admin.incrementalAlterConfigs(Map.of(
            broker, List.of(op("message.max.bytes", null, AlterConfigOp.OpType.DELETE)))).all().get());
        step("incrementalAlterConfigs.brokerDefault.reverted", () -> admin.incrementalAlterConfigs(Map.of(
            brokers, List.of(op("log.retention.ms", null, AlterConfigOp.OpType.DELETE)))).all().get());
        configs("incrementalAlterConfigs.broker.reverted", broker, List.of("message.max.bytes", "log.retention.ms"),
                got -> !got.contains("1048600") && !got.contains("604800001"));
        step("incrementalAlterConfigs.brokerReadOnly", () -> admin.incrementalAlterConfigs(Map.of(broker,
            List.of(op("log.dirs", "/nowhere", AlterConfigOp.OpType.SET)))).all().get());
    }

    /** One RESULT per config name: "value/source[/ro][/secret]" (after ``until`` holds of
     * the whole description, when given). */
    private static void configs(String key, ConfigResource res, List<String> names, Predicate<String> until) {
        Map<String, String> got;
        try {
            got = until == null ? describeConfigs(res, names)
                : AdminDriver.<Map<String, String>>until(() -> describeConfigs(res, names),
                                                         d -> until.test(String.valueOf(d)));
        } catch (Exception e) {
            System.out.println("RESULT admin." + key + "=" + error(e));
            return;
        }
        got.forEach((name, value) -> System.out.println("RESULT admin." + key + "." + name + "=" + value));
    }

    private static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    private static Map<String, String> describeConfigs(ConfigResource res, List<String> names) throws Exception {
        Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
        Map<String, String> out = new TreeMap<>();
        for (String name : names) {
            ConfigEntry e = config.get(name);
            out.put(name, e == null ? "absent" : e.value() + "/" + e.source() + (e.isReadOnly() ? "/ro" : "")
                + (e.isSensitive() ? "/secret" : ""));
        }
        return out;
    }

    /** Records for the offset methods: P-a partition 0 gets ten, stamped a second apart from
     * BASE (recent, so no retention check removes them); partition 1 gets five. */
    private static long records() throws Exception {
        long base = (System.currentTimeMillis() / 1000 - 600) * 1000;
        Properties p = common("java-admin-producer");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(prefix + "-a", 0, base + 1000L * i, "k", "v" + i)).get();
            }
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(prefix + "-a", 1, base, "k", "w" + i)).get();
            }
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(prefix + "-s", 0, null, "s" + i)).get();
            }
        }
        return base;
    }

    private static void offsets(long base) throws Exception {
        TopicPartition a0 = new TopicPartition(prefix + "-a", 0);
        TopicPartition a1 = new TopicPartition(prefix + "-a", 1);
        TopicPartition a2 = new TopicPartition(prefix + "-a", 2);
        Map<String, OffsetSpec> specs = Map.of("earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
            "maxTimestamp", OffsetSpec.maxTimestamp(), "forTimestamp", OffsetSpec.forTimestamp(base + 4500),
            "forTimestampPast", OffsetSpec.forTimestamp(base + 60_000), "earliestLocal", OffsetSpec.earliestLocal(),
            "latestTiered", OffsetSpec.latestTiered());
        for (var spec : new TreeMap<>(specs).entrySet()) {
            step("listOffsets." + spec.getKey(), () -> {
                ListOffsetsResult r = admin.listOffsets(Map.of(a0, spec.getValue(), a1, spec.getValue(),
                                                               a2, spec.getValue()));
                Map<String, String> out = new TreeMap<>();
                for (TopicPartition tp : List.of(a0, a1, a2)) {
                    String v;
                    try {
                        ListOffsetsResult.ListOffsetsResultInfo info = r.partitionResult(tp).get();
                        long ts = info.timestamp();
                        v = info.offset() + "@" + (ts >= base ? "base+" + (ts - base) : String.valueOf(ts))
                            + ",epoch=" + info.leaderEpoch().isPresent();
                    } catch (Exception e) {
                        v = error(e);
                    }
                    out.put(n(tp), v);
                }
                return out;
            });
        }
        // the client waits for the partition to appear in the metadata: a short deadline
        step("listOffsets.unknown", () -> admin.listOffsets(Map.of(new TopicPartition(prefix + "-a", 9),
            OffsetSpec.latest()), new ListOffsetsOptions().timeoutMs(3000)).all().get());
        step("deleteRecords", () -> {
            Map<String, String> out = new TreeMap<>();
            admin.deleteRecords(Map.of(a0, RecordsToDelete.beforeOffset(4), a1, RecordsToDelete.beforeOffset(99)))
                .lowWatermarks().forEach((tp, f) -> {
                    String v;
                    try {
                        v = String.valueOf(f.get().lowWatermark());
                    } catch (Exception e) {
                        v = error(e);
                    }
                    out.put(n(tp), v);
                });
            return out;
        });
        step("deleteRecords.earliest", () -> admin.listOffsets(Map.of(a0, OffsetSpec.earliest()))
            .partitionResult(a0).get().offset());
        step("describeProducers", () -> {
            var states = admin.describeProducers(List.of(a0, a2)).all().get();
            Map<String, String> out = new TreeMap<>();
            states.forEach((tp, s) -> out.put(n(tp), s.activeProducers().stream()
                .map(p -> "epoch=" + p.producerEpoch() + ",lastSeq=" + p.lastSequence()
                     + ",txnStart=" + p.currentTransactionStartOffset())
                .toList().toString()));
            return out;
        });
    }

    private static String describeGroup(String key, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group),
            new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
            .describedGroups().get(group).get();
        List<String> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            members.add(n(m.clientId()) + ":" + m.groupInstanceId().map(AdminDriver::n).orElse("-")
                + ":" + tps(m.assignment().topicPartitions())
                + ":target=" + m.targetAssignment().map(t -> tps(t.topicPartitions())).orElse("-")
                + ":atGroupEpoch=" + m.memberEpoch().equals(d.groupEpoch()) + ":upgraded=" + m.upgraded().orElse(null));
        }
        // the epochs themselves, apart: how often a broker bumps them is its own business
        System.out.println("RESULT admin." + key + ".epochs=" + d.groupEpoch().orElse(-99) + "/"
            + d.targetAssignmentEpoch().orElse(-99) + " members=" + d.members().stream()
            .map(m -> m.memberEpoch().orElse(-99)).toList()
            + " targetAtGroupEpoch=" + d.groupEpoch().equals(d.targetAssignmentEpoch()));
        return n(d.groupId()) + " type=" + d.type() + " state=" + d.groupState() + " simple="
            + d.isSimpleConsumerGroup() + " assignor=" + d.partitionAssignor() + " members=" + members
            + " coordinator=" + nodes.contains(node(d.coordinator())) + " ops=" + ops(d.authorizedOperations());
    }

    private static String offsetsOf(String group) throws Exception {
        Map<String, String> out = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach((tp, o) ->
            out.put(n(tp), o == null ? "null" : o.offset() + ":" + o.metadata() + ":" + o.leaderEpoch()));
        return out.toString();
    }

    @SuppressWarnings("removal")
    private static void groups() throws Exception {
        String classic = prefix + "-g1";
        String modern = prefix + "-g2";
        String plain = prefix + "-g3";
        TopicPartition a0 = new TopicPartition(prefix + "-a", 0);
        TopicPartition a1 = new TopicPartition(prefix + "-a", 1);
        TopicPartition a2 = new TopicPartition(prefix + "-a", 2);
        Map<TopicPartition, OffsetAndMetadata> commits = Map.of(a0, new OffsetAndMetadata(5, "m0"),
            a1, new OffsetAndMetadata(2, ""), a2, new OffsetAndMetadata(0));
        // a classic static member, left behind when its consumer closes
        try (KafkaConsumer<String, String> c = consumer(classic, "classic", prefix + "-inst")) {
            c.subscribe(List.of(prefix + "-a"));
            await(c, 3);
            c.commitSync(commits);
            step("describeConsumerGroups.classic", () -> describeGroup("describeConsumerGroups.classic", classic));
        }
        try (KafkaConsumer<String, String> c = consumer(modern, "consumer", null)) {
            c.subscribe(List.of(prefix + "-a"));
            await(c, 3);
            c.commitSync(commits);
            step("describeConsumerGroups.consumer", () -> describeGroup("describeConsumerGroups.consumer", modern));
            step("alterConsumerGroupOffsets.activeConsumer", () -> admin.alterConsumerGroupOffsets(modern,
                Map.of(a0, new OffsetAndMetadata(1))).all().get());
            step("deleteConsumerGroupOffsets.activeConsumer", () -> admin.deleteConsumerGroupOffsets(modern,
                Set.of(a0)).all().get());
            step("deleteConsumerGroups.activeConsumer", () -> admin.deleteConsumerGroups(List.of(modern))
                .all().get());
        }
        step("describeConsumerGroups.consumerLeft", () -> until(() -> describeGroup("describeConsumerGroups.consumerLeft", modern),
            d -> String.valueOf(d).contains("state=Empty")));
        step("describeConsumerGroups.unknown", () -> describeGroup("describeConsumerGroups.unknown", prefix + "-nope"));
        step("describeClassicGroups", () -> {
            var d = admin.describeClassicGroups(List.of(classic)).describedGroups().get(classic).get();
            return n(d.groupId()) + " protocol=" + d.protocol() + " data=" + d.protocolData() + " state="
                + d.state() + " members=" + d.members().size();
        });
        step("describeClassicGroups.consumerGroup", () -> admin.describeClassicGroups(List.of(modern))
            .describedGroups().get(modern).get().state());
        step("listConsumerGroupOffsets", () -> offsetsOf(classic));
        step("listConsumerGroupOffsets.partitions", () -> {
            Map<String, String> out = new TreeMap<>();
            admin.listConsumerGroupOffsets(Map.of(modern, new ListConsumerGroupOffsetsSpec()
                .topicPartitions(List.of(a0, new TopicPartition(prefix + "-b", 0)))))
                .partitionsToOffsetAndMetadata(modern).get()
                .forEach((tp, o) -> out.put(n(tp), o == null ? "null" : String.valueOf(o.offset())));
            return out;
        });
        step("listConsumerGroupOffsets.unknown", () -> offsetsOf(prefix + "-nope"));
        // the static member is still there: the group refuses offset changes and deletion
        step("alterConsumerGroupOffsets.staticMember", () -> admin.alterConsumerGroupOffsets(classic,
            Map.of(a0, new OffsetAndMetadata(1))).all().get());
        step("deleteConsumerGroupOffsets.subscribed", () -> admin.deleteConsumerGroupOffsets(classic,
            Set.of(a0)).partitionResult(a0).get());
        step("deleteConsumerGroups.notEmpty", () -> admin.deleteConsumerGroups(List.of(classic)).all().get());
        step("removeMembersFromConsumerGroup.unknown", () -> admin.removeMembersFromConsumerGroup(classic,
            new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove(prefix + "-other"))))
            .all().get());
        step("removeMembersFromConsumerGroup", () -> admin.removeMembersFromConsumerGroup(classic,
            new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove(prefix + "-inst"))))
            .all().get());
        step("removeMembersFromConsumerGroup.described", () -> until(() -> describeGroup("removeMembersFromConsumerGroup.described", classic),
            d -> String.valueOf(d).contains("state=Empty")));
        step("removeMembersFromConsumerGroup.all", () -> admin.removeMembersFromConsumerGroup(classic,
            new RemoveMembersFromConsumerGroupOptions()).all().get());
        // an admin-made group: offsets only
        step("alterConsumerGroupOffsets.newGroup", () -> admin.alterConsumerGroupOffsets(plain,
            Map.of(a0, new OffsetAndMetadata(3, "x"), a1, new OffsetAndMetadata(1))).all().get());
        step("alterConsumerGroupOffsets.empty", () -> admin.alterConsumerGroupOffsets(classic,
            Map.of(a0, new OffsetAndMetadata(7, "again"))).all().get());
        step("alterConsumerGroupOffsets.unknownTopic", () -> admin.alterConsumerGroupOffsets(plain,
            Map.of(new TopicPartition(prefix + "-nope", 0), new OffsetAndMetadata(1))).all().get());
        step("alterConsumerGroupOffsets.listed", () -> offsetsOf(classic) + " " + offsetsOf(plain));
        step("deleteConsumerGroupOffsets", () -> admin.deleteConsumerGroupOffsets(classic, Set.of(a1))
            .all().get());
        step("deleteConsumerGroupOffsets.unknownGroup", () -> admin.deleteConsumerGroupOffsets(
            prefix + "-nope", Set.of(a1)).all().get());
        step("deleteConsumerGroupOffsets.listed", () -> offsetsOf(classic));
        step("describeConsumerGroups.adminMade", () -> describeGroup("describeConsumerGroups.adminMade", plain));
        step("listConsumerGroups", () -> admin.listConsumerGroups().all().get().stream()
            .filter(g -> g.groupId().startsWith(prefix))
            .map(g -> n(g.groupId()) + ":" + g.type().orElse(null) + ":" + g.groupState().orElse(null)
                 + ":" + g.isSimpleConsumerGroup())
            .sorted().toList());
        step("listGroups", () -> listGroups(new ListGroupsOptions()));
        step("listGroups.consumer", () -> listGroups(ListGroupsOptions.forConsumerGroups()));
        step("listGroups.empty", () -> listGroups(new ListGroupsOptions().inGroupStates(
            Set.of(org.apache.kafka.common.GroupState.EMPTY))));
    }

    private static List<String> listGroups(ListGroupsOptions options) throws Exception {
        return admin.listGroups(options).all().get().stream()
            .filter(g -> g.groupId().startsWith(prefix))
            .map((GroupListing g) -> n(g.groupId()) + ":" + g.type().orElse(null) + ":" + g.protocol()
                 + ":" + g.groupState().orElse(null))
            .sorted().toList();
    }

    private static void logDirs() throws Exception {
        step("describeLogDirs", () -> {
            Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(nodes).allDescriptions().get();
            List<String> out = new ArrayList<>();
            for (int id : nodes) {
                Map<String, LogDirDescription> dirs = all.get(id);
                int replicas = 0;
                boolean sized = true;
                for (LogDirDescription d : dirs.values()) {
                    for (var e : d.replicaInfos().entrySet()) {
                        if (e.getKey().topic().startsWith(prefix + "-a")) {
                            replicas++;
                            sized &= e.getKey().partition() != 0 || e.getValue().size() > 0;
                        }
                    }
                }
                LogDirDescription first = dirs.values().iterator().next();
                out.add("dirs=" + dirs.size() + ",aReplicas=" + replicas + ",a0Sized=" + sized
                        + ",error=" + first.error() + ",total=" + first.totalBytes().isPresent()
                        + ",usable=" + first.usableBytes().isPresent() + ",cordoned=" + first.isCordoned());
            }
            return out;
        });
        step("describeReplicaLogDirs", () -> {
            TopicPartitionReplica r = new TopicPartitionReplica(prefix + "-a", 0, nodes.get(0));
            TopicPartitionReplica missing = new TopicPartitionReplica(prefix + "-nope", 0, nodes.get(0));
            var all = admin.describeReplicaLogDirs(List.of(r, missing)).all().get();
            var info = all.get(r);
            var none = all.get(missing);
            return "dir=" + (info.getCurrentReplicaLogDir() != null) + ",future=" + info.getFutureReplicaLogDir()
                + ",lag=" + info.getCurrentReplicaOffsetLag() + " missing=" + none.getCurrentReplicaLogDir();
        });
        step("alterReplicaLogDirs", () -> admin.alterReplicaLogDirs(Map.of(
            new TopicPartitionReplica(prefix + "-a", 0, nodes.get(0)), "/nowhere")).all().get());
    }

    private static List<Integer> replicasOf(TopicPartition tp) throws Exception {
        return admin.describeTopics(List.of(tp.topic())).allTopicNames().get().get(tp.topic())
            .partitions().get(tp.partition()).replicas().stream().map(Node::id).toList();
    }

    private static void reassignments() throws Exception {
        // P-r: two partitions of every broker (up to three); its first is reordered, which
        // moves no data, so that its preferred leader is no longer the leader
        TopicPartition r0 = new TopicPartition(prefix + "-r", 0);
        TopicPartition r1 = new TopicPartition(prefix + "-r", 1);
        List<Integer> before = replicasOf(r0);
        List<Integer> reversed = new ArrayList<>(before);
        java.util.Collections.reverse(reversed);
        step("alterPartitionReassignments.reorder", () -> admin.alterPartitionReassignments(Map.of(
            r0, Optional.of(new NewPartitionReassignment(reversed)))).all().get());
        step("alterPartitionReassignments.reordered", () -> until(() -> replicasOf(r0), r -> reversed.equals(r))
            .equals(reversed));
        step("listPartitionReassignments", () -> admin.listPartitionReassignments().reassignments().get()
            .keySet().stream().filter(tp -> tp.topic().startsWith(prefix)).map(AdminDriver::n).sorted().toList());
        // one replica of r1's own: a change of replication factor unless there is one broker
        List<Integer> one = List.of(replicasOf(r1).get(0));
        step("alterPartitionReassignments.noRfChange", () -> admin.alterPartitionReassignments(Map.of(
            r1, Optional.of(new NewPartitionReassignment(one))),
            new AlterPartitionReassignmentsOptions().allowReplicationFactorChange(false)).all().get());
        step("alterPartitionReassignments.errors", () -> each(admin.alterPartitionReassignments(Map.of(
            r1, Optional.of(new NewPartitionReassignment(List.of(99))),
            new TopicPartition(prefix + "-b", 0), Optional.empty(),
            new TopicPartition(prefix + "-nope", 0), Optional.of(new NewPartitionReassignment(one)))).values()));
        // r0's preferred leader is now its old last replica: an election moves leadership
        // there (with one broker there is nothing to move)
        step("electLeaders.preferred", () -> electionErrors(admin.electLeaders(ElectionType.PREFERRED, Set.of(
            r0, r1, new TopicPartition(prefix + "-nope", 0))).partitions().get()));
        step("electLeaders.preferred.result", () -> until(() -> {
            TopicPartitionInfo p = admin.describeTopics(List.of(r0.topic())).allTopicNames().get()
                .get(r0.topic()).partitions().get(0);
            return p.leader().id() == p.replicas().get(0).id();
        }, ok -> Boolean.TRUE.equals(ok)));
        step("electLeaders.unclean", () -> electionErrors(admin.electLeaders(ElectionType.UNCLEAN, Set.of(r1))
            .partitions().get()));
    }

    private static String electionErrors(Map<TopicPartition, Optional<Throwable>> got) {
        Map<String, String> out = new TreeMap<>();
        got.forEach((tp, e) -> out.put(n(tp), e.map(AdminDriver::error).orElse("elected")));
        return out.toString();
    }

    private static void security() throws Exception {
        AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, prefix + "-a", PatternType.LITERAL),
            new AccessControlEntry("User:" + prefix, "*", AclOperation.READ, AclPermissionType.ALLOW));
        step("createAcls", () -> admin.createAcls(List.of(binding)).all().get());
        step("describeAcls", () -> admin.describeAcls(AclBindingFilter.ANY).values().get().size());
        step("deleteAcls", () -> admin.deleteAcls(List.of(binding.toFilter())).all().get().size());
        String user = prefix + "-user";
        step("alterUserScramCredentials", () -> each(admin.alterUserScramCredentials(List.of(
            new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "pw"),
            new UserScramCredentialUpsertion(prefix + "-weak",
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1), "pw"),
            new UserScramCredentialUpsertion(prefix + "-many",
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100_000), "pw"))).values()));
        step("alterUserScramCredentials.secondMechanism", () -> admin.alterUserScramCredentials(List.of(
            new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "pw")))
            .all().get());
        // one user altered twice in one request
        step("alterUserScramCredentials.twice", () -> each(admin.alterUserScramCredentials(List.of(
            new UserScramCredentialUpsertion(prefix + "-twice",
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "pw"),
            new UserScramCredentialUpsertion(prefix + "-twice",
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "pw"))).values()));
        Call scram = () -> {
            Map<String, UserScramCredentialsDescription> got = admin.describeUserScramCredentials().all().get();
            Map<String, String> out = new TreeMap<>();
            got.forEach((u, d) -> {
                if (u.startsWith(prefix)) {
                    out.put(n(u), d.credentialInfos().stream().map(i -> i.mechanism() + ":" + i.iterations())
                        .sorted().toList().toString());
                }
            });
            return out;
        };
        step("describeUserScramCredentials", () -> until(scram, d -> String.valueOf(d).contains("SHA_512")));
        step("describeUserScramCredentials.unknown", () -> admin.describeUserScramCredentials(
            List.of(prefix + "-nobody")).all().get());
        step("alterUserScramCredentials.delete", () -> each(admin.alterUserScramCredentials(List.of(
            new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512),
            new UserScramCredentialDeletion(prefix + "-nobody", ScramMechanism.SCRAM_SHA_256))).values()));
        step("describeUserScramCredentials.afterDelete", () -> until(scram,
            d -> !String.valueOf(d).contains("SHA_512")));

        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user,
                                                                ClientQuotaEntity.CLIENT_ID, prefix + "-cid"));
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(
            ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        Call quotas = () -> {
            Map<String, String> out = new TreeMap<>();
            admin.describeClientQuotas(ClientQuotaFilter.contains(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)))).entities().get()
                .forEach((e, q) -> out.put(n(new TreeMap<>(e.entries())), new TreeMap<>(q).toString()));
            return out;
        };
        step("alterClientQuotas", () -> admin.alterClientQuotas(List.of(
            new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                                                      new ClientQuotaAlteration.Op("request_percentage", 50.0))),
            new ClientQuotaAlteration(new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user)),
                List.of(new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))))).all().get());
        step("describeClientQuotas", () -> until(quotas, d -> String.valueOf(d).contains("2048")));
        step("describeClientQuotas.exact", () -> until(() -> admin.describeClientQuotas(filter).entities().get().size(),
            size -> Integer.valueOf(1).equals(size)));
        step("alterClientQuotas.remove", () -> admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
            List.of(new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get());
        step("describeClientQuotas.afterRemove", () -> until(quotas, d -> !String.valueOf(d).contains("producer")));
        step("alterClientQuotas.unknownKey", () -> admin.alterClientQuotas(List.of(new ClientQuotaAlteration(
            entity, List.of(new ClientQuotaAlteration.Op("no_such_quota", 1.0))))).all().get());
        step("describeDelegationToken", () -> admin.describeDelegationToken().delegationTokens().get());
        step("createDelegationToken", () -> admin.createDelegationToken().delegationToken().get());
    }

    private static void features() throws Exception {
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
        for (String name : List.of("metadata.version", "transaction.version", "group.version", "share.version",
                                   "kraft.version", "streams.version", "eligible.leader.replicas.version")) {
            step("describeFeatures.finalized." + name, () -> {
                var v = f.finalizedFeatures().get(name);
                return v == null ? "absent" : v.minVersionLevel() + "-" + v.maxVersionLevel();
            });
            step("describeFeatures.supported." + name, () -> {
                var v = f.supportedFeatures().get(name);
                return v == null ? "absent" : v.minVersion() + "-" + v.maxVersion();
            });
        }
        step("describeFeatures.epoch", () -> f.finalizedFeaturesEpoch().isPresent());
        short tv = f.finalizedFeatures().containsKey("transaction.version")
            ? f.finalizedFeatures().get("transaction.version").maxVersionLevel() : 0;
        step("updateFeatures.validateOnly.same", () -> each(admin.updateFeatures(Map.of(
            "transaction.version", new FeatureUpdate(tv, FeatureUpdate.UpgradeType.UPGRADE)),
            new UpdateFeaturesOptions().validateOnly(true)).values()));
        step("updateFeatures.validateOnly.downgrade", () -> each(admin.updateFeatures(Map.of(
            "transaction.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
            new UpdateFeaturesOptions().validateOnly(true)).values()));
        step("updateFeatures.validateOnly.unknown", () -> each(admin.updateFeatures(Map.of(
            "no.such.feature", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
            new UpdateFeaturesOptions().validateOnly(true)).values()));
        step("updateFeatures.validateOnly.tooNew", () -> each(admin.updateFeatures(Map.of(
            "transaction.version", new FeatureUpdate((short) 99, FeatureUpdate.UpgradeType.UPGRADE)),
            new UpdateFeaturesOptions().validateOnly(true)).values()));
    }

    private static String txnState(String id) throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(id)).description(id).get();
        return d.state() + " partitions=" + tps(d.topicPartitions()) + " timeout=" + d.transactionTimeoutMs()
            + " started=" + d.transactionStartTimeMs().isPresent() + " epoch=" + d.producerEpoch()
            + " coordinator=" + nodes.contains(d.coordinatorId());
    }

    private static void transactions() throws Exception {
        String tid = prefix + "-tx";
        TopicPartition b0 = new TopicPartition(prefix + "-b", 0);
        Properties p = common("java-admin-txn");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        try {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(b0.topic(), 0, null, "t" + i)).get();
            }
            // left open: a hanging transaction for the admin to find, abort and fence
            step("describeTransactions", () -> txnState(tid));
            step("describeTransactions.unknown", () -> txnState(prefix + "-notx"));
            step("listTransactions", () -> admin.listTransactions().all().get().stream()
                .filter(t -> t.transactionalId().startsWith(prefix))
                .map((TransactionListing t) -> n(t.transactionalId()) + ":" + t.state()).sorted().toList());
            step("listTransactions.pattern", () -> admin.listTransactions(new ListTransactionsOptions()
                .filterOnTransactionalIdPattern(prefix + "-t.*")).all().get().size());
            step("listTransactions.completed", () -> admin.listTransactions(new ListTransactionsOptions()
                .filterStates(List.of(org.apache.kafka.clients.admin.TransactionState.COMPLETE_COMMIT)))
                .all().get().stream().filter(t -> t.transactionalId().startsWith(prefix)).count());
            step("listOffsets.readCommitted", () -> {
                var rc = admin.listOffsets(Map.of(b0, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(b0).get().offset();
                var ru = admin.listOffsets(Map.of(b0, OffsetSpec.latest())).partitionResult(b0).get().offset();
                return "committed=" + rc + " uncommitted=" + ru;
            });
            ProducerState state = admin.describeProducers(List.of(b0)).partitionResult(b0).get()
                .activeProducers().get(0);
            step("describeProducers.transactional", () -> "epoch=" + state.producerEpoch() + ",lastSeq="
                + state.lastSequence() + ",txnStart=" + state.currentTransactionStartOffset()
                + ",coordinatorEpoch=" + state.coordinatorEpoch());
            step("abortTransaction", () -> admin.abortTransaction(new AbortTransactionSpec(b0, state.producerId(),
                (short) state.producerEpoch(), state.coordinatorEpoch().orElse(0))).all().get());
            step("abortTransaction.described", () -> until(() -> admin.describeProducers(List.of(b0))
                .partitionResult(b0).get().activeProducers().get(0).currentTransactionStartOffset(),
                o -> String.valueOf(o).contains("empty")));
            step("fenceProducers", () -> admin.fenceProducers(List.of(tid)).all().get());
            step("fenceProducers.unknown", () -> admin.fenceProducers(List.of(prefix + "-notx")).all().get());
            // the coordinator aborts the open transaction, then the fencing InitProducerId
            // leaves it Empty at a new epoch
            step("fenceProducers.described", () -> until(() -> txnState(tid),
                s -> String.valueOf(s).startsWith("Empty")));
            step("fenceProducers.producerCommits", () -> {
                producer.commitTransaction();
                return "committed";
            });
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
    }

    private static String shareGroup(String key, String group) throws Exception {
        ShareGroupDescription d = admin.describeShareGroups(List.of(group),
            new DescribeShareGroupsOptions().includeAuthorizedOperations(true)).describedGroups().get(group).get();
        System.out.println("RESULT admin." + key + ".epochs=" + d.groupEpoch() + "/" + d.targetAssignmentEpoch()
            + " members=" + d.members().stream().map(m -> m.memberEpoch()).toList()
            + " targetAtGroupEpoch=" + (d.groupEpoch() == d.targetAssignmentEpoch()));
        return n(d.groupId()) + " state=" + d.groupState() + " members=" + d.members().stream()
            .map(m -> n(m.clientId()) + ":" + tps(m.assignment().topicPartitions())
                 + ":atGroupEpoch=" + (m.memberEpoch() == d.groupEpoch())).sorted().toList()
            + " coordinator=" + nodes.contains(node(d.coordinator())) + " ops=" + ops(d.authorizedOperations());
    }

    private static String shareOffsets(String group) throws Exception {
        Map<TopicPartition, SharePartitionOffsetInfo> got = admin.listShareGroupOffsets(
            Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
        Map<String, String> out = new TreeMap<>();
        got.forEach((tp, o) -> out.put(n(tp), o == null ? "null"
            : o.startOffset() + ",lag=" + o.lag().map(String::valueOf).orElse("-")));
        return out.toString();
    }

    private static void shareGroups() throws Exception {
        String group = prefix + "-sg";
        TopicPartition s0 = new TopicPartition(prefix + "-s", 0);
        Properties p = common(prefix + "-share");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put("share.acknowledgement.mode", "explicit");
        try (KafkaShareConsumer<String, String> c =
                 new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(s0.topic()));
            int got = 0;
            long deadline = System.currentTimeMillis() + SETTLE_MS;
            while (got < 5 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    got++;
                }
                c.commitSync();
            }
            System.out.println("RESULT share_read=" + got);
            step("describeShareGroups", () -> shareGroup("describeShareGroups", group));
            // the lag is 0 once the acknowledgements are written (both brokers); where the
            // start offset then stands is printed as it is
            step("listShareGroupOffsets", () -> until(() -> shareOffsets(group),
                                                      o -> String.valueOf(o).contains("lag=0")));
            step("alterShareGroupOffsets.active", () -> admin.alterShareGroupOffsets(group, Map.of(s0, 0L))
                .all().get());
            step("deleteShareGroups.active", () -> admin.deleteShareGroups(List.of(group)).all().get());
            step("listGroups.share", () -> listGroups(ListGroupsOptions.forShareGroups()));
        }
        step("describeShareGroups.left", () -> until(() -> shareGroup("describeShareGroups.left", group),
            d -> String.valueOf(d).contains("state=Empty")));
        step("listShareGroupOffsets.left", () -> shareOffsets(group));
        step("alterShareGroupOffsets", () -> admin.alterShareGroupOffsets(group, Map.of(s0, 2L)).all().get());
        step("alterShareGroupOffsets.listed", () -> until(() -> shareOffsets(group),
            o -> String.valueOf(o).contains("=2")));
        step("alterShareGroupOffsets.unknownTopic", () -> admin.alterShareGroupOffsets(group, Map.of(
            new TopicPartition(prefix + "-nope", 0), 0L)).all().get());
        step("listShareGroupOffsets.unknown", () -> shareOffsets(prefix + "-nope"));
        step("describeShareGroups.unknown", () -> shareGroup("describeShareGroups.unknown", prefix + "-nope"));
        step("deleteShareGroupOffsets", () -> admin.deleteShareGroupOffsets(group, Set.of(s0.topic())).all().get());
        step("deleteShareGroupOffsets.listed", () -> shareOffsets(group));
        step("deleteShareGroups", () -> each(admin.deleteShareGroups(List.of(group, prefix + "-nope"))
            .deletedGroups()));
        step("deleteShareGroups.described", () -> shareGroup("deleteShareGroups.described", group));
    }

    private static void cluster() throws Exception {
        step("describeCluster", () -> {
            DescribeClusterResult r = admin.describeCluster(new DescribeClusterOptions()
                .includeAuthorizedOperations(true));
            Collection<Node> all = r.nodes().get();
            return "nodes=" + all.size() + " controller=" + nodes.contains(node(r.controller().get()))
                + " clusterId=" + (r.clusterId().get() != null) + " ops=" + ops(r.authorizedOperations().get());
        });
        step("describeCluster.fenced", () -> admin.describeCluster(new DescribeClusterOptions()
            .includeFencedBrokers(true)).nodes().get().stream().filter(Node::isFenced).count());
        step("describeMetadataQuorum", () -> {
            QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
            return "leader=" + nodes.contains(q.leaderId()) + " voters=" + q.voters().size()
                + " observers=" + q.observers().size() + " hw=" + (q.highWatermark() > 0)
                + " nodes=" + q.nodes().size();
        });
        step("listConfigResources", () -> admin.listConfigResources(Set.of(ConfigResource.Type.GROUP,
            ConfigResource.Type.TOPIC), new org.apache.kafka.clients.admin.ListConfigResourcesOptions())
            .all().get().stream().filter(r -> r.name().startsWith(prefix))
            .map(r -> r.type() + ":" + n(r.name())).sorted().toList());
        step("listConfigResources.clientMetrics", () -> admin.listConfigResources(
            Set.of(ConfigResource.Type.CLIENT_METRICS), new org.apache.kafka.clients.admin.ListConfigResourcesOptions())
            .all().get().size());
    }

    private static void deletions() throws Exception {
        Uuid d = admin.describeTopics(List.of(prefix + "-d")).allTopicNames().get().get(prefix + "-d").topicId();
        step("deleteConsumerGroups", () -> each(admin.deleteConsumerGroups(List.of(
            prefix + "-g1", prefix + "-g2", prefix + "-g3", prefix + "-nope")).deletedGroups()));
        step("deleteConsumerGroups.listed", () -> listGroups(new ListGroupsOptions()));
        step("deleteTopics", () -> each(admin.deleteTopics(TopicCollection.ofTopicNames(List.of(
            prefix + "-c", prefix + "-nope"))).topicNameValues()));
        step("deleteTopics.byId", () -> admin.deleteTopics(TopicCollection.ofTopicIds(List.of(d))).all().get());
        step("deleteTopics.unknownId", () -> admin.deleteTopics(TopicCollection.ofTopicIds(
            List.of(Uuid.randomUuid()))).all().get());
        step("deleteTopics.listed", () -> until(() -> new TreeSet<>(admin.listTopics().names().get().stream()
            .filter(t -> t.startsWith(prefix)).map(AdminDriver::n).toList()),
            s -> !String.valueOf(s).contains("P-c") && !String.valueOf(s).contains("P-d")));
    }
}

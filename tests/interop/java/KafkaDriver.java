// Apache Kafka's Java client driven against a cluster under test (tests/interop/test_java_client.py).
// Run as a single source file (java -cp 'libs/*' KafkaDriver.java MODE ...): it is compiled
// at each run against the kafka-clients jar that tools/ensure_kafka.sh fetched, so no jar of
// it is ever committed. It prints "RESULT key=value" lines for the test to check.
//
//   groups BOOTSTRAP TOPIC PROTOCOL N   idempotent acks=all producer, then one consumer of
//                                        group.protocol PROTOCOL (classic or consumer)
//   transactions BOOTSTRAP TOPIC        commit, abort, commit; a read_committed consumer
//   rebootstrap BOOTSTRAP TOPIC PARTS N  a producer, a group consumer and an admin
//                                        (metadata.recovery.strategy=rebootstrap) work on
//                                        the cluster, print "READY", wait for a line on
//                                        stdin (the test replaces the cluster meanwhile),
//                                        then produce and consume N records again
//   share BOOTSTRAP TOPIC N M           KafkaShareConsumer (KIP-932), explicit acknowledgement:
//                                        one member reads N records produced before it joined
//                                        (the group reads from the earliest offset, a group
//                                        config), accepting all but a few it releases once
//                                        and one it rejects; then a second member joins and
//                                        the two split M more records of the one partition

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaDriver {
    private static final long DEADLINE_MS = 60_000;

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        switch (mode) {
            case "groups" -> groups(bootstrap, topic, args[3], Integer.parseInt(args[4]));
            case "transactions" -> transactions(bootstrap, topic);
            case "rebootstrap" -> rebootstrap(bootstrap, topic, Integer.parseInt(args[3]),
                                              Integer.parseInt(args[4]));
            case "share" -> share(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            case "telemetry" -> telemetry(bootstrap, topic, Integer.parseInt(args[3]));
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    private static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "java-driver");
        return p;
    }

    private static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(common(bootstrap))) {
            int brokers = admin.describeCluster().nodes().get().size();
            short replicas = (short) Math.min(3, brokers);
            admin.createTopics(List.of(new NewTopic(topic, partitions, replicas))).all().get();
            System.out.println("RESULT brokers=" + brokers);
        }
    }

    private static KafkaProducer<String, String> producer(Properties p) {
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    private static KafkaConsumer<String, String> consumer(Properties p) {
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    private static void groups(String bootstrap, String topic, String protocol, int n) throws Exception {
        createTopic(bootstrap, topic, 3);
        Properties p = common(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        try (KafkaProducer<String, String> producer = producer(p)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, "k" + (i % 7), "v" + i)));
            }
            for (Future<RecordMetadata> ack : acks) {
                ack.get();
            }
        }
        System.out.println("RESULT produced=" + n);
        Properties c = common(bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        Set<String> seen = new HashSet<>();
        int records = 0;
        try (KafkaConsumer<String, String> consumer = consumer(c)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (seen.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    seen.add(r.value());
                    records++;
                }
            }
            consumer.commitSync();
            System.out.println("RESULT assigned=" + consumer.assignment().size());
            long committed = 0;
            for (var entry : consumer.committed(consumer.assignment()).entrySet()) {
                committed += entry.getValue() == null ? 0 : entry.getValue().offset();
            }
            System.out.println("RESULT committed=" + committed);
        }
        System.out.println("RESULT consumed=" + records);
        System.out.println("RESULT distinct=" + seen.size());
    }

    /** A producer with the defaults (enable.metrics.push=true, KIP-714) sending one record
     *  every 100 ms for {@code millis}: the broker's subscription decides what it pushes. */
    private static void telemetry(String bootstrap, String topic, int millis) throws Exception {
        createTopic(bootstrap, topic, 1);
        Properties p = common(bootstrap);
        p.put("client.id", "java-telemetry");
        int sent = 0;
        try (KafkaProducer<String, String> producer = producer(p)) {
            long end = System.currentTimeMillis() + millis;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(topic, "k", "v" + sent)).get();
                sent++;
                Thread.sleep(100);
            }
        }
        System.out.println("RESULT produced=" + sent);
    }

    private static void transactions(String bootstrap, String topic) throws Exception {
        createTopic(bootstrap, topic, 1);
        Properties p = common(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-tid");
        try (KafkaProducer<String, String> producer = producer(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, "c" + i));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, "a" + i));
            }
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "c10"));
            producer.commitTransaction();
        }
        Properties c = common(bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        TopicPartition tp = new TopicPartition(topic, 0);
        Set<String> committed = new TreeSet<>();
        try (KafkaConsumer<String, String> consumer = consumer(c)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    committed.add(r.value());
                }
                Map<TopicPartition, Long> end = consumer.endOffsets(List.of(tp));
                if (committed.size() >= 11 && consumer.position(tp) >= end.get(tp)) {
                    break;
                }
            }
        }
        System.out.println("RESULT read_committed=" + String.join(",", committed));
    }

    private static Set<String> drain(KafkaConsumer<String, String> consumer, Set<String> want) {
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (!seen.containsAll(want) && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                seen.add(r.value());
            }
        }
        return seen;
    }

    private static void rebootstrap(String bootstrap, String topic, int parts, int n) throws Exception {
        Properties p = common(bootstrap);
        p.put("metadata.recovery.strategy", "rebootstrap");
        Properties c = (Properties) p.clone();
        c.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < parts; i++) {
            tps.add(new TopicPartition(topic, i));
        }
        try (Admin admin = Admin.create(p);
             KafkaProducer<String, String> producer = producer(p);
             KafkaConsumer<String, String> consumer = consumer(c)) {
            System.out.println("RESULT cluster_before=" + admin.describeCluster().clusterId().get());
            consumer.subscribe(List.of(topic));
            Set<String> before = new HashSet<>();
            for (int i = 0; i < parts; i++) {
                producer.send(new ProducerRecord<>(topic, i, null, "before-" + i)).get();
                before.add("before-" + i);
            }
            System.out.println("RESULT before_consumed=" + drain(consumer, before).size());
            System.out.println("READY");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            // Every position was 1: at 0 again means a member reading the new cluster.
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            boolean settled = false;
            while (!settled && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200));
                settled = consumer.assignment().containsAll(tps);
                for (TopicPartition tp : tps) {
                    settled = settled && consumer.position(tp) == 0;
                }
            }
            System.out.println("RESULT settled=" + settled);
            Set<String> after = new HashSet<>();
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, "after-" + i)).get();
                after.add("after-" + i);
            }
            System.out.println("RESULT after_produced=" + n);
            Set<String> seen = drain(consumer, after);
            seen.retainAll(after);
            System.out.println("RESULT after_consumed=" + seen.size());
            System.out.println("RESULT cluster_after=" + admin.describeCluster().clusterId().get());
        }
    }
    private static KafkaShareConsumer<String, String> shareConsumer(String bootstrap, String group,
                                                                   String clientId) {
        Properties p = common(bootstrap);
        p.put("client.id", clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put("share.acknowledgement.mode", "explicit");
        // a few records a fetch, so that two members of one partition both get some
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5");
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /** Each record its own batch: a share fetch acquires whole batches. */
    private static void produceEach(String bootstrap, String topic, String prefix, int n) throws Exception {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<String, String> producer = producer(p)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, prefix + i)).get();
            }
        }
    }

    private static void share(String bootstrap, String topic, int n, int m) throws Exception {
        createTopic(bootstrap, topic, 1);
        String group = topic + "-share";
        produceEach(bootstrap, topic, "s", n);
        try (Admin admin = Admin.create(common(bootstrap))) {
            // a share group starts at the log's end unless told otherwise
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                .all().get();
            // Kafka's brokers learn of it from the controller a little later, and the group's
            // coordinator reads it when the partition is first assigned: wait until a few
            // reads in a row (from whichever broker the admin asks) have it
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            for (int seen = 0; seen < 5 && System.currentTimeMillis() < deadline; ) {
                ConfigEntry e = admin.describeConfigs(List.of(res)).all().get().get(res)
                    .get("share.auto.offset.reset");
                seen = e != null && "earliest".equals(e.value()) ? seen + 1 : 0;
                Thread.sleep(50);
            }
        }
        Set<String> release = Set.of("s3", "s5", "s7");
        String reject = "s9";
        Map<String, Integer> accepted = new HashMap<>();
        List<String> deliveries = new ArrayList<>();     // value:delivery count of the released ones
        int rejectedSeen = 0;
        try (KafkaShareConsumer<String, String> first = shareConsumer(bootstrap, group, "share-1")) {
            first.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            int redelivered = 0;
            while ((accepted.size() < n - 1 || redelivered < release.size())
                   && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : first.poll(Duration.ofMillis(200))) {
                    int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                    if (release.contains(r.value())) {
                        deliveries.add(r.value() + ":" + count);
                    }
                    if (release.contains(r.value()) && count == 1) {
                        first.acknowledge(r, AcknowledgeType.RELEASE);
                    } else if (r.value().equals(reject)) {
                        rejectedSeen++;
                        first.acknowledge(r, AcknowledgeType.REJECT);
                    } else {
                        if (release.contains(r.value())) {
                            redelivered++;
                        }
                        accepted.merge(r.value(), 1, Integer::sum);
                        first.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                first.commitSync();
            }
            // once everything is acknowledged, nothing comes back
            for (int i = 0; i < 5; i++) {
                for (ConsumerRecord<String, String> r : first.poll(Duration.ofMillis(200))) {
                    accepted.merge(r.value(), 1, Integer::sum);
                    first.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                first.commitSync();
            }
            System.out.println("RESULT accepted=" + accepted.values().stream().mapToInt(x -> x).sum());
            System.out.println("RESULT accepted_distinct=" + accepted.size());
            System.out.println("RESULT rejected_deliveries=" + rejectedSeen);
            System.out.println("RESULT released_deliveries=" + String.join(",", new TreeSet<>(deliveries)));

            // a second member: the simple assignor gives the one partition to both
            try (KafkaShareConsumer<String, String> second = shareConsumer(bootstrap, group, "share-2");
                 Admin admin = Admin.create(common(bootstrap))) {
                second.subscribe(List.of(topic));
                deadline = System.currentTimeMillis() + DEADLINE_MS;
                int assigned = 0;
                while (assigned < 2 && System.currentTimeMillis() < deadline) {
                    first.poll(Duration.ofMillis(100));
                    second.poll(Duration.ofMillis(100));
                    ShareGroupDescription d = admin.describeShareGroups(List.of(group))
                        .describedGroups().get(group).get();
                    assigned = (int) d.members().stream()
                        .filter(x -> !x.assignment().topicPartitions().isEmpty()).count();
                }
                System.out.println("RESULT members_assigned=" + assigned);
                produceEach(bootstrap, topic, "t", m);
                List<Map<String, Integer>> got = List.of(new HashMap<>(), new HashMap<>());
                List<KafkaShareConsumer<String, String>> members = List.of(first, second);
                deadline = System.currentTimeMillis() + DEADLINE_MS;
                int total = 0;
                while (total < m && System.currentTimeMillis() < deadline) {
                    for (int i = 0; i < 2; i++) {
                        for (ConsumerRecord<String, String> r : members.get(i).poll(Duration.ofMillis(100))) {
                            got.get(i).merge(r.value(), 1, Integer::sum);
                            members.get(i).acknowledge(r, AcknowledgeType.ACCEPT);
                            total++;
                        }
                        members.get(i).commitSync();
                    }
                }
                for (int round = 0; round < 3; round++) {
                    for (int i = 0; i < 2; i++) {
                        for (ConsumerRecord<String, String> r : members.get(i).poll(Duration.ofMillis(100))) {
                            got.get(i).merge(r.value(), 1, Integer::sum);
                            members.get(i).acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        members.get(i).commitSync();
                    }
                }
                Set<String> union = new HashSet<>(got.get(0).keySet());
                union.addAll(got.get(1).keySet());
                int deliveredTwice = 0;
                for (String v : union) {
                    if (got.get(0).getOrDefault(v, 0) + got.get(1).getOrDefault(v, 0) > 1) {
                        deliveredTwice++;
                    }
                }
                System.out.println("RESULT split_distinct=" + union.size());
                System.out.println("RESULT split_twice=" + deliveredTwice);
                System.out.println("RESULT split_both=" + (!got.get(0).isEmpty() && !got.get(1).isEmpty()));
                System.out.println("RESULT split_counts=" + got.get(0).size() + "+" + got.get(1).size());
            }
        }
    }
}

// Apache Kafka's Java client driven against a cluster under test (tests/interop/test_java_client.py).
// Run as a single source file (java -cp 'libs/*' KafkaDriver.java MODE ...): it is compiled
// at each run against the kafka-clients jar that tools/ensure_kafka.sh fetched, so no jar of
// it is ever committed. It prints "RESULT key=value" lines for the test to check.
//
//   groups BOOTSTRAP TOPIC PROTOCOL N   idempotent acks=all producer, then one consumer of
//                                        group.protocol PROTOCOL (classic or consumer)
//   transactions BOOTSTRAP TOPIC        commit, abort, commit; a read_committed consumer

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
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
}

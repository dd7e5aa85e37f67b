// Replays metadata log files through Apache Kafka's own metadata image code (the
// MetadataDelta a KRaft broker or controller applies) and prints the image it ends
// with, one fact a line, for tests/interop/test_metadata_log_decoder.py.
//
//   java -cp '<kafka libs>/*' MetadataReplay.java FILE...
//
// Each FILE is a log segment (.log), replayed on top of the image so far, or a
// snapshot (.checkpoint), replayed from an empty image. Each record is read with
// MetadataRecordSerde (the frame and the version it names) and replayed with
// MetadataDelta.replay, which checks it against the image (a partition change of an
// unknown topic, a directory list that does not fit the replicas, ... throw). After
// each file the image is printed:
//
//   file <path>
//   feature <name> <level>
//   metadata.version <level> <Kafka's name>
//   broker <id> fenced=<bool>
//   partition <topic> <index> replicas=<list> isr=<list> leader=<id> leaderEpoch=<n>
//       partitionEpoch=<n> directories=<list> elr=<list>        (one line)
//   acls <count>
//   scram <mechanism> <user>
//   nextProducerId <n>
import java.io.File;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.image.TopicImage;
import org.apache.kafka.metadata.BrokerRegistration;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

public class MetadataReplay {
    public static void main(String[] args) throws Exception {
        MetadataImage image = MetadataImage.EMPTY;
        for (String path : args) {
            MetadataImage base = path.endsWith(".checkpoint") ? MetadataImage.EMPTY : image;
            MetadataDelta delta = new MetadataDelta.Builder().setImage(base).build();
            try (FileRecords records = FileRecords.open(new File(path))) {
                for (RecordBatch batch : records.batches()) {
                    if (batch.isControlBatch()) {
                        continue;
                    }
                    for (Record record : batch) {
                        ByteBuffer value = record.value();
                        ApiMessageAndVersion message = MetadataRecordSerde.INSTANCE.read(
                            new ByteBufferAccessor(value), value.remaining());
                        delta.replay(message.message());
                    }
                }
            }
            image = delta.apply(MetadataProvenance.EMPTY);
            print(path, image);
        }
    }

    private static void print(String path, MetadataImage image) {
        System.out.println("file " + path);
        for (Map.Entry<String, Short> e : new TreeMap<>(image.features().finalizedVersions()).entrySet()) {
            System.out.println("feature " + e.getKey() + " " + e.getValue());
        }
        MetadataVersion mv = image.features().metadataVersionOrThrow();
        System.out.println("metadata.version " + mv.featureLevel() + " " + mv);
        for (BrokerRegistration b : new TreeMap<>(image.cluster().brokers()).values()) {
            System.out.println("broker " + b.id() + " fenced=" + b.fenced());
        }
        for (TopicImage topic : new TreeMap<>(image.topics().topicsByName()).values()) {
            for (Map.Entry<Integer, PartitionRegistration> e : new TreeMap<>(topic.partitions()).entrySet()) {
                PartitionRegistration p = e.getValue();
                StringBuilder dirs = new StringBuilder("[");
                for (Uuid d : p.directories) {
                    dirs.append(dirs.length() > 1 ? ", " : "").append(d);
                }
                System.out.println("partition " + topic.name() + " " + e.getKey()
                    + " replicas=" + Arrays.toString(p.replicas) + " isr=" + Arrays.toString(p.isr)
                    + " leader=" + p.leader + " leaderEpoch=" + p.leaderEpoch
                    + " partitionEpoch=" + p.partitionEpoch + " directories=" + dirs + "]"
                    + " elr=" + Arrays.toString(p.elr));
            }
        }
        System.out.println("acls " + image.acls().acls().size());
        image.scram().mechanisms().forEach((mechanism, users) -> users.keySet().stream().sorted()
            .forEach(user -> System.out.println("scram " + mechanism.mechanismName() + " " + user)));
        System.out.println("nextProducerId " + image.producerIds().nextProducerId());
    }
}

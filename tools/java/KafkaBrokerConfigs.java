// Prints Apache Kafka's broker configs, one a line: name, type, internal, default
// (tab-separated; the default as ConfigDef writes it, <NULL> or <NO_DEFAULT> when there
// is none). What src/kaflite/cluster/_kafka_broker_configs.py tabulates. Run it with
// Java's single-file launcher against a Kafka distribution's jars:
//
//   java -cp "$HOME/.cache/kaflite/kafka-4.4.0/libs/*" tools/java/KafkaBrokerConfigs.java
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.AbstractKafkaConfig;

public class KafkaBrokerConfigs {
    public static void main(String[] args) {
        for (ConfigDef.ConfigKey key : AbstractKafkaConfig.CONFIG_DEF.configKeys().values()) {
            String value;
            if (!key.hasDefault()) {
                value = "<NO_DEFAULT>";
            } else if (key.defaultValue == null) {
                value = "<NULL>";
            } else {
                value = ConfigDef.convertToString(key.defaultValue, key.type);
            }
            System.out.println(key.name + "\t" + key.type + "\t" + key.internalConfig + "\t" + value);
        }
    }
}

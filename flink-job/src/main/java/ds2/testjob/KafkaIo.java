package ds2.testjob;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
// The connector as Flink SQL users deploy it (flink-sql-connector-kafka in Flink's lib/, see
// conf/kafka/pom.xml) carries kafka-clients relocated under this prefix.
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.security.scram.ScramLoginModule;

/**
 * The Kafka source and sink of the test job, on the Flink Kafka connector.
 *
 * <p>The login comes from a client config file ({@code scripts/kafka.sh client-config}: bootstrap servers,
 * SASL mechanism, user and password, in librdkafka's key names), read where the job's main method runs,
 * so that no secret is a program argument.
 */
final class KafkaIo {
    private KafkaIo() {}

    /** The Java client's properties for the login in {@code clientConfig}. */
    static Properties clientProperties(String clientConfig) {
        Properties file = new Properties();
        try (Reader r = Files.newBufferedReader(Path.of(clientConfig))) {
            file.load(r);
        } catch (IOException e) {
            throw new IllegalArgumentException("--kafka-client-config " + clientConfig + ": cannot be read (" + e + ")");
        }
        Properties p = new Properties();
        p.setProperty("bootstrap.servers", required(file, "bootstrap.servers", clientConfig));
        p.setProperty("security.protocol", required(file, "security.protocol", clientConfig));
        p.setProperty("sasl.mechanism", required(file, "sasl.mechanism", clientConfig));
        String user = required(file, "sasl.username", clientConfig);
        String password = required(file, "sasl.password", clientConfig);
        if (!user.matches("[A-Za-z0-9._-]+") || !password.matches("[A-Za-z0-9._-]+")) {
            throw new IllegalArgumentException("--kafka-client-config " + clientConfig
                    + ": sasl.username and sasl.password must be letters, digits, '.', '_' or '-'");
        }
        p.setProperty("sasl.jaas.config", ScramLoginModule.class.getName()
                + " required username=\"" + user + "\" password=\"" + password + "\";");
        return p;
    }

    private static String required(Properties file, String key, String where) {
        String v = file.getProperty(key);
        if (v == null || v.isBlank()) {
            throw new IllegalArgumentException("--kafka-client-config " + where + ": no " + key);
        }
        return v.trim();
    }

    /**
     * Lines from {@code topic} in consumer group {@code group}: from the group's committed offsets, or the
     * earliest for a partition it never committed. Restored from a savepoint, the offsets in its state win,
     * and the splits (partitions) are spread over the new readers.
     */
    @SuppressWarnings("deprecation") // kafka-clients 4 deprecates OffsetResetStrategy; the connector's API takes it
    static KafkaSource<String> source(String topic, String group, Properties login, String partitionFetchBytes) {
        Properties consumer = new Properties();
        consumer.putAll(login);
        if (partitionFetchBytes != null) {
            // The reader's pendingRecords is the high watermark of its last fetch less its position: while it
            // drains one large fetch (back-pressured) the lag it reports shrinks although records arrive.
            consumer.setProperty("max.partition.fetch.bytes", Integer.toString(Integer.parseInt(partitionFetchBytes)));
        }
        return KafkaSource.<String>builder()
                .setTopics(topic)
                .setGroupId(group)
                .setProperties(consumer)
                .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                .setValueOnlyDeserializer(new SimpleStringSchema())
                // Commit the read offsets on checkpoints: the group's lag is then visible to Kafka's tools.
                .setProperty("commit.offsets.on.checkpoint", "true")
                .build();
    }

    /**
     * "key count" lines to {@code topic}, at least once: a replay after a restore repeats a count already
     * written, never a different one, so the largest count per key is the keyed state's final value.
     */
    static KafkaSink<Tuple2<Integer, Long>> sink(String topic, Properties login) {
        return KafkaSink.<Tuple2<Integer, Long>>builder()
                .setKafkaProducerConfig(login)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(topic)
                        .setValueSerializationSchema(new CountLine())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                .build();
    }

    /** A count as the line "k<key> <count>" (a class: the sink builder cannot infer a lambda's types). */
    static final class CountLine implements SerializationSchema<Tuple2<Integer, Long>> {
        private static final long serialVersionUID = 1L;

        @Override
        public byte[] serialize(Tuple2<Integer, Long> c) {
            return ("k" + c.f0 + " " + c.f1).getBytes(StandardCharsets.UTF_8);
        }
    }
}

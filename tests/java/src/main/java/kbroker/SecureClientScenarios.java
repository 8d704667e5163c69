package kbroker;

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client over a secured listener, its security settings (security.protocol, ssl.*,
 * sasl.*) read from a properties file, run by tests/security:
 *
 * <pre>
 *   secure-produce-consume BOOTSTRAP TOPIC GROUP CLIENT_PROPERTIES N
 * </pre>
 *
 * creates TOPIC (2 partitions), produces N records, consumes them in GROUP with commits and
 * prints one JSON line: {"produced": N, "consumed": [values sorted], "committed": {p: offset}};
 * on failure {"error": "..."} (exit 1). Timeouts in CLIENT_PROPERTIES (default.api.timeout.ms,
 * delivery.timeout.ms, request.timeout.ms) replace the scenario's own, so a client meant to fail
 * gives up in seconds.
 */
final class SecureClientScenarios {
    private SecureClientScenarios() {
    }

    static boolean handles(String command) {
        return command.equals("secure-produce-consume");
    }

    static String usage() {
        return "  secure-produce-consume BOOTSTRAP TOPIC GROUP CLIENT_PROPERTIES N";
    }

    static void run(String[] args) throws Exception {
        if (args.length != 6) {
            throw new IllegalArgumentException("usage:\n" + usage());
        }
        String bootstrap = args[1];
        String topic = args[2];
        String group = args[3];
        Properties security = new Properties();
        try (InputStream in = new FileInputStream(args[4])) {
            security.load(in);
        }
        int n = Integer.parseInt(args[5]);

        Properties adminProps = new Properties();
        adminProps.putAll(security);
        adminProps.put("bootstrap.servers", bootstrap);
        adminProps.putIfAbsent("default.api.timeout.ms", 40_000);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all()
                    .get(20, TimeUnit.SECONDS);
        }

        Properties producerProps = new Properties();
        producerProps.putAll(security);
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.putIfAbsent(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20_000);
        producerProps.putIfAbsent(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, ClientScenarios.bytes("k" + i),
                        ClientScenarios.bytes("v" + i))).get(20, TimeUnit.SECONDS);
            }
        }

        Properties consumerProps = new Properties();
        consumerProps.putAll(security);
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        List<String> consumed = new ArrayList<>();
        Map<Object, Object> committed = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps,
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (consumed.size() < n && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    consumed.add(ClientScenarios.string(r.value()));
                }
                consumer.commitSync();
            }
            for (int p = 0; p < 2; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                OffsetAndMetadata om = consumer.committed(java.util.Set.of(tp)).get(tp);
                committed.put(Integer.toString(p), om == null ? null : om.offset());
            }
        }
        consumed.sort(null);
        ClientScenarios.Json committedJson = new ClientScenarios.Json();
        committed.forEach((k, v) -> committedJson.put((String) k, v));
        ClientScenarios.emit(new ClientScenarios.Json().put("produced", n).put("consumed", consumed)
                .put("committed", committedJson));
    }
}

package kbroker;

import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client over a SASL listener (tests/security/test_sasl_other_clients.py):
 *
 * <pre>
 *   java -cp client-scenarios.jar kbroker.SaslScenarios produce-consume BOOTSTRAP TOPIC GROUP N PROPS [SECONDS]
 *   java -cp client-scenarios.jar kbroker.SaslScenarios delegation-tokens BOOTSTRAP PROPS
 * </pre>
 *
 * PROPS is a properties file with the client's security settings (security.protocol,
 * sasl.mechanism, sasl.jaas.config). Produces N records, then consumes them in GROUP and commits;
 * with SECONDS, keeps polling that long afterwards (re-authentication happens meanwhile) and then
 * produces and consumes N more. Prints one JSON line per record read, {"done":true} at the end,
 * or {"error":CLASS,"message":...} and exit status 2 when the client fails (a wrong password).
 */
public final class SaslScenarios {
    private SaslScenarios() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("delegation-tokens")) {
            delegationTokens(args[1], args[2]);
            System.exit(0);
        }
        if (args.length < 6 || !args[0].equals("produce-consume")) {
            System.err.println("usage: produce-consume BOOTSTRAP TOPIC GROUP N PROPS [SECONDS]");
            System.exit(64);
        }
        String bootstrap = args[1];
        String topic = args[2];
        String group = args[3];
        int n = Integer.parseInt(args[4]);
        Properties security = new Properties();
        try (InputStream in = new FileInputStream(args[5])) {
            security.load(in);
        }
        int seconds = args.length > 6 ? Integer.parseInt(args[6]) : 0;
        try {
            run(bootstrap, topic, group, n, security, seconds);
        } catch (Throwable t) {
            Throwable root = t;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            ClientScenarios.emit(new ClientScenarios.Json().put("error", t.getClass().getName())
                    .put("root", root.getClass().getName()).put("message", String.valueOf(root.getMessage())));
            System.exit(2);
        }
        System.exit(0);
    }

    /**
     * Admin.createDelegationToken and Admin.describeDelegationToken: one JSON line each with
     * the token's id, or the exception the client raised and its root cause.
     */
    static void delegationTokens(String bootstrap, String propsFile) throws Exception {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(propsFile)) {
            props.load(in);
        }
        props.put(org.apache.kafka.clients.admin.AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrap);
        props.put(org.apache.kafka.clients.admin.AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG,
                15000);
        props.put(org.apache.kafka.clients.admin.AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG,
                15000);
        try (org.apache.kafka.clients.admin.Admin admin =
                     org.apache.kafka.clients.admin.Admin.create(props)) {
            ClientScenarios.Json created = new ClientScenarios.Json().put("api", "create");
            try {
                created.put("token_id", admin.createDelegationToken().delegationToken()
                        .get(15, java.util.concurrent.TimeUnit.SECONDS).tokenInfo().tokenId());
            } catch (java.util.concurrent.ExecutionException e) {
                created.put("error", e.getCause().getClass().getName())
                        .put("message", String.valueOf(e.getCause().getMessage()));
            }
            ClientScenarios.emit(created);
            ClientScenarios.Json described = new ClientScenarios.Json().put("api", "describe");
            try {
                described.put("tokens", admin.describeDelegationToken().delegationTokens()
                        .get(15, java.util.concurrent.TimeUnit.SECONDS).size());
            } catch (java.util.concurrent.ExecutionException e) {
                described.put("error", e.getCause().getClass().getName())
                        .put("message", String.valueOf(e.getCause().getMessage()));
            }
            ClientScenarios.emit(described);
        }
    }

    static void run(String bootstrap, String topic, String group, int n, Properties security,
                    int seconds) throws Exception {
        Properties producerProps = new Properties();
        producerProps.putAll(security);
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        Properties consumerProps = new Properties();
        consumerProps.putAll(security);
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps)) {
            consumer.subscribe(List.of(topic));
            produce(producer, topic, 0, n);
            read(consumer, n);
            if (seconds > 0) {
                long end = System.currentTimeMillis() + seconds * 1000L;
                while (System.currentTimeMillis() < end) {
                    consumer.poll(Duration.ofMillis(200));
                    producer.partitionsFor(topic);
                }
                produce(producer, topic, n, n);
                read(consumer, n);
            }
        }
        ClientScenarios.emit(new ClientScenarios.Json().put("done", true));
    }

    static void produce(KafkaProducer<byte[], byte[]> producer, String topic, int from, int n)
            throws Exception {
        for (int i = from; i < from + n; i++) {
            producer.send(new ProducerRecord<>(topic, ("java-" + i).getBytes(StandardCharsets.UTF_8))).get();
        }
    }

    static void read(KafkaConsumer<byte[], byte[]> consumer, int n) {
        List<String> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (got.size() < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                String value = new String(record.value(), StandardCharsets.UTF_8);
                got.add(value);
                ClientScenarios.emit(new ClientScenarios.Json().put("value", value));
            }
        }
        if (got.size() < n) {
            throw new IllegalStateException("read " + got.size() + " of " + n + " records");
        }
        consumer.commitSync();
    }
}

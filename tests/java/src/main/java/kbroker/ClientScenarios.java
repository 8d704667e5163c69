package kbroker;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Scenarios run by tests/integration/test_java_client.py with the real Java client
 * (org.apache.kafka:kafka-clients). Every line on stdout is one JSON object; client logs and
 * stack traces go to stderr.
 *
 * <pre>
 *   produce-consume BOOTSTRAP TOPIC CODEC N
 *   group-consume BOOTSTRAP TOPIC GROUP ASSIGNOR MAX_SECONDS [--static INSTANCE_ID] [--prop k=v]...
 *       (ASSIGNOR "consumer" or "consumer:uniform|range": group.protocol=consumer, KIP-848)
 *   admin BOOTSTRAP TOPIC
 *   group-host BOOTSTRAP TOPIC ASSIGNOR SESSION_TIMEOUT_MS   (see GroupHost)
 *   cluster-admin, validate-position                        (see ClusterScenarios)
 *   txn-... and streams-wordcount                           (see TransactionScenarios)
 * </pre>
 */
public final class ClientScenarios {
    static final int PARTITIONS = 2;
    static final long EARLY_TS = 1_000_000L;
    static final long LATE_TS = 2_000_000L;
    static final long MID_TS = 1_500_000L;
    static final String TAG = "java";

    private ClientScenarios() {
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            usage();
        }
        try {
            switch (args[0]) {
                case "produce-consume" -> {
                    if (args.length != 5) {
                        usage();
                    }
                    produceConsume(args[1], args[2], args[3], Integer.parseInt(args[4]));
                    System.exit(0);
                }
                case "group-consume" -> groupConsume(args);
                case "group-host" -> {
                    GroupHost.run(args);
                    System.exit(0);
                }
                case "admin" -> {
                    if (args.length != 3) {
                        usage();
                    }
                    admin(args[1], args[2]);
                    System.exit(0);
                }
                default -> {
                    if (SecureClientScenarios.handles(args[0])) {
                        SecureClientScenarios.run(args);
                        System.exit(0);
                    }
                    if (ClusterScenarios.handles(args[0])) {
                        ClusterScenarios.run(args);
                        System.exit(0);
                    }
                    if (!TransactionScenarios.handles(args[0])) {
                        usage();
                    }
                    TransactionScenarios.run(args);
                    System.exit(0);
                }
            }
        } catch (Throwable t) {
            t.printStackTrace();
            emit(new Json().put("error", t.toString()));
            System.exit(1);
        }
    }

    private static void usage() {
        System.err.println("usage:\n"
                + "  produce-consume BOOTSTRAP TOPIC CODEC N\n"
                + "  group-consume BOOTSTRAP TOPIC GROUP ASSIGNOR MAX_SECONDS"
                + " [--static INSTANCE_ID] [--prop name=value]...\n"
                + "  admin BOOTSTRAP TOPIC\n"
                + "  group-host BOOTSTRAP TOPIC ASSIGNOR SESSION_TIMEOUT_MS\n"
                + ClusterScenarios.usage() + "\n"
                + SecureClientScenarios.usage() + "\n"
                + TransactionScenarios.usage());
        System.exit(2);
    }

    // ------------------------------------------------------------------ admin

    /**
     * What topic tools and UIs do with the AdminClient: change configs incrementally, delete
     * records, read log dir sizes, list ACLs (no authorizer: SecurityDisabledException) and
     * describe the producers of a partition. One JSON line per step.
     */
    static void admin(String bootstrap, String topic) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        String step = "create-topic";
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);

            step = "produced";
            Properties producerProps = new Properties();
            producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            producerProps.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
            producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
            producerProps.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
            producerProps.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
            long lastOffset = -1;
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps,
                    new ByteArraySerializer(), new ByteArraySerializer())) {
                List<Future<RecordMetadata>> sends = new ArrayList<>();
                for (int i = 0; i < 10; i++) {
                    sends.add(producer.send(new ProducerRecord<>(topic, 0, null,
                            ("admin-" + i).getBytes(StandardCharsets.UTF_8))));
                }
                for (Future<RecordMetadata> send : sends) {
                    lastOffset = send.get(30, TimeUnit.SECONDS).offset();
                }
            }
            emit(new Json().put("step", step).put("last_offset", lastOffset));

            step = "configs";
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"),
                            AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"),
                            AlterConfigOp.OpType.APPEND))))
                    .all().get(30, TimeUnit.SECONDS);
            Config config = admin.describeConfigs(List.of(resource)).all()
                    .get(30, TimeUnit.SECONDS).get(resource);
            emit(new Json().put("step", step)
                    .put("retention_ms", config.get("retention.ms").value())
                    .put("retention_source", config.get("retention.ms").source().name())
                    .put("cleanup_policy", config.get("cleanup.policy").value()));

            step = "configs-reset";
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", null),
                            AlterConfigOp.OpType.DELETE))))
                    .all().get(30, TimeUnit.SECONDS);
            config = admin.describeConfigs(List.of(resource)).all()
                    .get(30, TimeUnit.SECONDS).get(resource);
            emit(new Json().put("step", step)
                    .put("retention_ms", config.get("retention.ms").value())
                    .put("retention_source", config.get("retention.ms").source().name()));

            step = "delete-records";
            TopicPartition tp = new TopicPartition(topic, 0);
            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4)))
                    .lowWatermarks().get(tp).get(30, TimeUnit.SECONDS).lowWatermark();
            long earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).offset();
            emit(new Json().put("step", step).put("low_watermark", low)
                    .put("earliest", earliest));

            step = "log-dirs";
            int node = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS)
                    .iterator().next().id();
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(node))
                    .allDescriptions().get(30, TimeUnit.SECONDS).get(node);
            long size = -1;
            long lag = -1;
            for (LogDirDescription dir : dirs.values()) {
                ReplicaInfo info = dir.replicaInfos().get(tp);
                if (info != null) {
                    size = info.size();
                    lag = info.offsetLag();
                }
            }
            emit(new Json().put("step", step).put("dirs", dirs.size()).put("size", size)
                    .put("offset_lag", lag));

            step = "acls";
            String aclError = "none";
            try {
                admin.describeAcls(AclBindingFilter.ANY).values().get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                aclError = e.getCause().getClass().getSimpleName();
            }
            emit(new Json().put("step", step).put("error", aclError));

            step = "producers";
            List<Json> producers = new ArrayList<>();
            for (ProducerState state : admin.describeProducers(List.of(tp)).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).activeProducers()) {
                producers.add(new Json().put("producer_id", state.producerId())
                        .put("producer_epoch", state.producerEpoch())
                        .put("last_sequence", state.lastSequence()));
            }
            emit(new Json().put("step", step).put("active", producers));
        } catch (Exception e) {
            // the failing call's own exception, not the ExecutionException wrapping it
            Throwable cause = e instanceof ExecutionException && e.getCause() != null
                    ? e.getCause() : e;
            cause.printStackTrace();
            emit(new Json().put("step", step)
                    .put("error", cause.getClass().getName() + ": " + cause.getMessage()));
            System.exit(1);
        }
        emit(new Json().put("done", true));
    }

    // ------------------------------------------------------------------ produce-consume

    /** Key and value of record i of partition p, as the Python test computes them. */
    static String key(int p, int i) {
        return TAG + "-k" + p + "-" + i;
    }

    static String value(int p, int i) {
        return (TAG + "-v" + p + "-" + i).repeat(3);
    }

    static void produceConsume(String bootstrap, String topic, String codec, int perPartition)
            throws Exception {
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
        }
        emit(new Json().put("created", topic));

        // Defaults kept on purpose: enable.idempotence=true, acks=all.
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        producerProps.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        producerProps.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        producerProps.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        int total = perPartition * PARTITIONS;
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            int j = 0;
            for (int i = 0; i < perPartition; i++) {
                for (int p = 0; p < PARTITIONS; p++, j++) {
                    long ts = j < total / 2 ? EARLY_TS : LATE_TS;
                    futures.add(producer.send(new ProducerRecord<>(topic, p, ts, bytes(key(p, i)),
                            bytes(value(p, i)))));
                }
            }
            producer.flush();
            List<Object> acked = new ArrayList<>();
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get(30, TimeUnit.SECONDS);
                acked.add(List.of(md.partition(), md.offset(), md.timestamp()));
            }
            emit(new Json().put("acked", acked));
        }

        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps,
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            drain(consumer, "earliest", total);

            Json bounds = new Json();
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps, Duration.ofSeconds(30));
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
            for (TopicPartition tp : tps) {
                bounds.put(Integer.toString(tp.partition()),
                        List.of(begin.get(tp), end.get(tp)));
            }
            emit(new Json().put("bounds", bounds));

            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : tps) {
                query.put(tp, MID_TS);
            }
            Map<TopicPartition, OffsetAndTimestamp> found =
                    consumer.offsetsForTimes(query, Duration.ofSeconds(30));
            Json answer = new Json();
            int expectedLater = 0;
            for (TopicPartition tp : tps) {
                OffsetAndTimestamp oat = found.get(tp);
                if (oat == null) {
                    answer.put(Integer.toString(tp.partition()), null);
                    consumer.seekToEnd(List.of(tp));
                } else {
                    answer.put(Integer.toString(tp.partition()),
                            new Json().put("o", oat.offset()).put("ts", oat.timestamp()));
                    consumer.seek(tp, oat.offset());
                    expectedLater += (int) (end.get(tp) - oat.offset());
                }
            }
            emit(new Json().put("offsetsForTimes", answer));
            drain(consumer, "from-timestamp", expectedLater);
        }
        emit(new Json().put("done", true));
    }

    /** Polls until {@code expected} records arrived (or 30 s passed), then once more for extras. */
    private static void drain(KafkaConsumer<byte[], byte[]> consumer, String phase, int expected) {
        int got = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (got < expected && System.nanoTime() < deadline) {
            got += printRecords(consumer.poll(Duration.ofMillis(200)), phase);
        }
        got += printRecords(consumer.poll(Duration.ofMillis(300)), phase);
        emit(new Json().put("phase_end", phase).put("count", got));
    }

    private static int printRecords(ConsumerRecords<byte[], byte[]> records, String phase) {
        for (ConsumerRecord<byte[], byte[]> r : records) {
            emit(new Json().put("phase", phase).put("p", r.partition()).put("o", r.offset())
                    .put("ts", r.timestamp()).put("k", string(r.key())).put("v", string(r.value())));
        }
        return records.count();
    }

    // ------------------------------------------------------------------ group-consume

    static String assignorClass(String name) {
        return switch (name) {
            case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default -> name;
        };
    }

    static void groupConsume(String[] args) throws Exception {
        if (args.length < 6) {
            usage();
        }
        String bootstrap = args[1];
        String topic = args[2];
        String group = args[3];
        String assignor = assignorClass(args[4]);
        long maxIdleNanos = TimeUnit.MILLISECONDS.toNanos((long) (Double.parseDouble(args[5]) * 1000));
        String instanceId = null;
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (args[4].startsWith("consumer")) {
            // KIP-848: the broker assigns; "consumer:range" names the server-side assignor
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            String[] parts = args[4].split(":", 2);
            if (parts.length == 2) {
                props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, parts[1]);
            }
        } else {
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        }
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "scenarios-" + ProcessHandle.current().pid());
        for (int i = 6; i < args.length; i++) {
            if (args[i].equals("--static") && i + 1 < args.length) {
                instanceId = args[++i];
                props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
            } else if (args[i].equals("--prop") && i + 1 < args.length) {
                String[] kv = args[++i].split("=", 2);
                if (kv.length != 2) {
                    usage();
                }
                props.put(kv[0], kv[1]);
            } else {
                usage();
            }
        }

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props,
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        CountDownLatch closed = new CountDownLatch(1);
        AtomicBoolean stopping = new AtomicBoolean(false);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            try {
                consumer.wakeup();
            } catch (RuntimeException ignored) {
                // already closed
            }
            try {
                closed.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }, "sigterm"));

        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                // Eager protocols revoke before rejoining, while our generation is still valid:
                // commit what was consumed from these partitions so the next owner starts there.
                Map<TopicPartition, OffsetAndMetadata> mine = new HashMap<>();
                for (TopicPartition tp : partitions) {
                    OffsetAndMetadata om = pending.remove(tp);
                    if (om != null) {
                        mine.put(tp, om);
                    }
                }
                if (!mine.isEmpty()) {
                    commit(consumer, mine, "revoke");
                }
                emit(new Json().put("revoked", partitionList(partitions)));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                emit(new Json().put("assigned", partitionList(partitions))
                        .put("assignment", partitionList(consumer.assignment()))
                        .put("generation", consumer.groupMetadata().generationId())
                        .put("member", consumer.groupMetadata().memberId()));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) {
                    pending.remove(tp);
                }
                emit(new Json().put("lost", partitionList(partitions)));
            }
        };

        String reason = "idle";
        try {
            consumer.subscribe(List.of(topic), listener);
            emit(new Json().put("started", group).put("instance", instanceId)
                    .put("pid", ProcessHandle.current().pid()));
            long idleSince = System.nanoTime();
            while (true) {
                if (stopping.get()) {
                    reason = "signal";
                    break;
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (System.nanoTime() - idleSince > maxIdleNanos) {
                        break;
                    }
                    continue;
                }
                idleSince = System.nanoTime();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    emit(new Json().put("p", r.partition()).put("o", r.offset())
                            .put("k", string(r.key())).put("v", string(r.value())));
                    pending.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                }
                Map<TopicPartition, OffsetAndMetadata> batch = new HashMap<>(pending);
                String outcome = commit(consumer, batch, "poll");
                if (outcome == null || outcome.equals("CommitFailedException")) {
                    // Committed, or fenced out of the generation (someone else re-reads them).
                    batch.keySet().forEach(pending::remove);
                }
            }
        } catch (WakeupException e) {
            reason = "signal";
        } finally {
            try {
                if (!pending.isEmpty()) {
                    commit(consumer, new HashMap<>(pending), "close");
                    pending.clear();
                }
            } catch (RuntimeException e) {
                e.printStackTrace();
            }
            try {
                consumer.close(Duration.ofSeconds(15));
            } finally {
                emit(new Json().put("closed", reason));
                closed.countDown();
            }
        }
        if (!stopping.get()) {
            // Never call exit while the shutdown hook runs: it would wait for itself.
            System.exit(0);
        }
    }

    /** commitSync; prints what was committed. Returns null, or the simple name of the failure. */
    private static String commit(KafkaConsumer<byte[], byte[]> consumer,
            Map<TopicPartition, OffsetAndMetadata> offsets, String when) {
        TreeMap<Integer, Long> sorted = new TreeMap<>();
        offsets.forEach((tp, om) -> sorted.put(tp.partition(), om.offset()));
        Json printed = new Json();
        sorted.forEach((p, o) -> printed.put(Integer.toString(p), o));
        try {
            consumer.commitSync(offsets, Duration.ofSeconds(30));
            emit(new Json().put("committed", printed).put("when", when));
            return null;
        } catch (RebalanceInProgressException | CommitFailedException e) {
            emit(new Json().put("commitFailed", printed).put("when", when)
                    .put("error", e.getClass().getSimpleName()).put("message", e.getMessage()));
            return e.getClass().getSimpleName();
        }
    }

    private static List<Object> partitionList(Collection<TopicPartition> partitions) {
        List<Object> out = new ArrayList<>();
        partitions.stream().map(TopicPartition::partition).sorted().forEach(out::add);
        return out;
    }

    // ------------------------------------------------------------------ output

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String string(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static synchronized void emit(Json line) {
        System.out.println(line);
        System.out.flush();
    }

    /** A JSON object built in insertion order: just enough for the lines this program prints. */
    static final class Json {
        private final StringBuilder sb = new StringBuilder("{");

        Json put(String name, Object value) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            quote(sb, name);
            sb.append(':');
            write(sb, value);
            return this;
        }

        @Override
        public String toString() {
            return sb + "}";
        }

        private static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof Json j) {
                out.append(j);
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else if (value instanceof Collection<?> c) {
                out.append('[');
                boolean first = true;
                for (Object o : c) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    write(out, o);
                }
                out.append(']');
            } else {
                quote(out, value.toString());
            }
        }

        private static void quote(StringBuilder out, String s) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            out.append('"');
        }
    }
}

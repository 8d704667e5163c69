package kbroker;

import static kbroker.ClientScenarios.emit;
import static kbroker.ClientScenarios.string;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

import kbroker.ClientScenarios.Json;

/**
 * Kafka Streams with the streams rebalance protocol (KIP-1071, group.protocol=streams), run by
 * tests/conformance/test_streams_group_clients.py against Kafka 4.3.1 and kbroker. One line of
 * JSON on stdout per event.
 *
 * <pre>
 *   wordcount BOOTSTRAP INPUT OUTPUT APPLICATION_ID STATE_DIR LINES PROTOCOL
 *   missing-source BOOTSTRAP TOPIC APPLICATION_ID STATE_DIR
 * </pre>
 *
 * wordcount: the word count of TransactionScenarios (exactly_once_v2, no cache: one count per
 * word occurrence) with two instances ("a" and "b", each its own process) in one group over a
 * 3-partition input, so 6 tasks; with the streams protocol the group gets
 * streams.num.standby.replicas=1, so each of the 3 stateful tasks has a standby. The first half of the lines is counted while both run; "b"
 * closes and "a" counts the second half alone. Reports when both process records, the group as
 * Admin.describeStreamsGroups shows it, how long until "a" owns every task after "b" closed,
 * and OUTPUT read with read_committed.
 *
 * missing-source: an application whose source topic does not exist; reports what the
 * application sees within 15 s and the group as described.
 */
public final class StreamsGroupScenarios {
    static final int PARTITIONS = 3;
    static final int TASKS = 6;
    /** The state in the last describe(). */
    static volatile String describedState = "";

    private StreamsGroupScenarios() {
    }

    public static void main(String[] args) {
        try {
            if (args.length == 8 && args[0].equals("wordcount")) {
                wordCount(args[1], args[2], args[3], args[4], args[5], Integer.parseInt(args[6]),
                        args[7]);
            } else if (args.length == 5 && args[0].equals("missing-source")) {
                missingSource(args[1], args[2], args[3], args[4]);
            } else {
                System.err.println("usage: wordcount BOOTSTRAP INPUT OUTPUT APPLICATION_ID "
                        + "STATE_DIR LINES PROTOCOL | missing-source BOOTSTRAP TOPIC "
                        + "APPLICATION_ID STATE_DIR");
                System.exit(2);
            }
            emit(new Json().put("done", true));
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace();
            emit(new Json().put("error", t.toString()));
            System.exit(1);
        }
    }

    static Properties props(String bootstrap, String appId, String stateDir, String protocol) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG),
                "earliest");
        props.put(StreamsConfig.TASK_TIMEOUT_MS_CONFIG, 20_000);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.MAX_BLOCK_MS_CONFIG), 20_000);
        // -Dstreams.<name>=<value>: any other Streams (or prefixed client) config, for
        // benchmarks/bench_streams.py --client-config
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("streams.")) {
                props.put(name.substring("streams.".length()), System.getProperty(name));
            }
        }
        return props;
    }

    static KafkaStreams instance(String bootstrap, String input, String output, String appId,
            String stateDir, String protocol, AtomicReference<String> error) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(text -> List.of(text.split(" ")))
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(),
                        Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(),
                props(bootstrap, appId, stateDir, protocol));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            error.compareAndSet(null, e.getClass().getSimpleName() + ": " + e.getMessage());
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        return streams;
    }

    static int activeTasks(KafkaStreams streams) {
        int n = 0;
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            n += thread.activeTasks().size();
        }
        return n;
    }

    static boolean waitFor(BooleanSupplier done, AtomicReference<String> error, long seconds) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline && error.get() == null) {
            if (done.getAsBoolean()) {
                return true;
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return done.getAsBoolean();
    }

    static void produceLines(String bootstrap, String topic, int from, int to) throws Exception {
        Properties plain = new Properties();
        plain.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(plain,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = from; i < to; i++) {
                producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null,
                        ClientScenarios.bytes(TransactionScenarios.line(i)))).get(30,
                        TimeUnit.SECONDS);
            }
        }
    }

    static Map<String, Long> expected(int from, int to) {
        Map<String, Long> out = new TreeMap<>();
        for (int i = 0; i < to; i++) {
            for (String word : TransactionScenarios.line(i).split(" ")) {
                out.merge(word, 1L, Long::sum);
            }
        }
        return out;
    }

    /** Reads OUTPUT with read_committed until each word's latest count is the target. */
    static boolean counted(KafkaConsumer<String, Long> consumer, Map<String, Long> latest,
            Map<String, Long> target, AtomicReference<String> error) {
        return waitFor(() -> {
            for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(50))) {
                latest.put(r.key(), r.value());
            }
            return latest.equals(target);
        }, error, 60);
    }

    static Json describe(Admin admin, String appId) throws Exception {
        StreamsGroupDescription group = admin.describeStreamsGroups(List.of(appId))
                .describedGroups().get(appId).get(30, TimeUnit.SECONDS);
        List<Object> members = new ArrayList<>();
        for (StreamsGroupMemberDescription member : group.members()) {
            int active = 0;
            for (var tasks : member.assignment().activeTasks()) {
                active += tasks.partitions().size();
            }
            List<Object> standby = new ArrayList<>();
            for (var tasks : member.assignment().standbyTasks()) {
                for (int p : tasks.partitions()) {
                    standby.add(tasks.subtopologyId() + "_" + p);
                }
            }
            List<Object> activeIds = new ArrayList<>();
            for (var tasks : member.assignment().activeTasks()) {
                for (int p : tasks.partitions()) {
                    activeIds.add(tasks.subtopologyId() + "_" + p);
                }
            }
            members.add(new Json().put("process_id", member.processId())
                    .put("client_id", member.clientId()).put("active", active)
                    .put("active_tasks", activeIds).put("standby_tasks", standby)
                    .put("member_epoch", member.memberEpoch()));
        }
        describedState = group.groupState().toString();
        return new Json().put("state", group.groupState().toString())
                .put("members", members).put("subtopologies", group.subtopologies().size());
    }

    static void wordCount(String bootstrap, String input, String output, String appId,
            String stateDir, int lines, String protocol) throws Exception {
        try (Admin admin = TransactionScenarios.admin(bootstrap)) {
            TransactionScenarios.createTopic(admin, input, PARTITIONS);
            TransactionScenarios.createTopic(admin, output, PARTITIONS);
            if (protocol.equals("streams")) {
                // one standby of each stateful task, set on the group (the broker assigns them)
                ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, appId);
                admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                        new ConfigEntry("streams.num.standby.replicas", "1"),
                        AlterConfigOp.OpType.SET)))).all().get(30, TimeUnit.SECONDS);
            }
        }
        Map<String, Long> firstHalf = expected(0, lines / 2);
        Map<String, Long> all = expected(0, lines);
        emit(new Json().put("expected", TransactionScenarios.jsonOf(all)));
        produceLines(bootstrap, input, 0, lines / 2);

        AtomicReference<String> error = new AtomicReference<>();
        KafkaStreams a = instance(bootstrap, input, output, appId, stateDir + "/a", protocol,
                error);
        KafkaStreams b = instance(bootstrap, input, output, appId, stateDir + "/b", protocol,
                error);
        List<TopicPartition> outputs = TransactionScenarios.partitions(output, PARTITIONS);
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(
                TransactionScenarios.consumerProps(bootstrap, IsolationLevel.READ_COMMITTED),
                Serdes.String().deserializer(), Serdes.Long().deserializer());
                Admin admin = TransactionScenarios.admin(bootstrap)) {
            consumer.assign(outputs);
            consumer.seekToBeginning(outputs);
            long t0 = System.nanoTime();
            a.start();
            boolean aRuns = waitFor(() -> activeTasks(a) == TASKS, error, 60);
            emit(new Json().put("a_owns_all", aRuns).put("ms", TransactionScenarios.millisSince(t0)));
            long t1 = System.nanoTime();
            b.start();
            boolean both = waitFor(() -> activeTasks(b) > 0 && activeTasks(a) > 0
                    && activeTasks(a) + activeTasks(b) == TASKS, error, 60);
            emit(new Json().put("both_processing", both)
                    .put("ms", TransactionScenarios.millisSince(t1))
                    .put("a", activeTasks(a)).put("b", activeTasks(b)));
            Map<String, Long> latest = new HashMap<>();
            boolean first = counted(consumer, latest, firstHalf, error);
            emit(new Json().put("counted_first_half", first));
            if (protocol.equals("streams")) {
                // the group as described once it is Stable (every member at the target)
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                Json described = describe(admin, appId);
                while (!"Stable".equals(describedState) && System.nanoTime() < deadline) {
                    Thread.sleep(200);
                    described = describe(admin, appId);
                }
                emit(new Json().put("described", described));
            }
            long t2 = System.nanoTime();
            b.close(Duration.ofSeconds(20));
            double closeMs = TransactionScenarios.millisSince(t2);
            boolean handed = waitFor(() -> activeTasks(a) == TASKS, error, 60);
            emit(new Json().put("a_owns_all_after_b_left", handed)
                    .put("ms", TransactionScenarios.millisSince(t2)).put("close_ms", closeMs));
            produceLines(bootstrap, input, lines / 2, lines);
            boolean second = counted(consumer, latest, all, error);
            emit(new Json().put("counted_all", second)
                    .put("counted", TransactionScenarios.jsonOf(new TreeMap<>(latest))));
        } finally {
            a.close(Duration.ofSeconds(20));
            b.close(Duration.ofSeconds(20));
        }
        if (error.get() != null) {
            emit(new Json().put("streams_error", error.get()));
        }
        Map<String, List<Long>> counts = new TreeMap<>();
        for (ConsumerRecord<byte[], byte[]> r : TransactionScenarios.readAll(bootstrap, outputs,
                IsolationLevel.READ_COMMITTED)) {
            counts.computeIfAbsent(string(r.key()), k -> new ArrayList<>())
                    .add(Serdes.Long().deserializer().deserialize(output, r.value()));
        }
        Json json = new Json();
        counts.forEach(json::put);
        emit(new Json().put("read_committed", json));
    }

    static void missingSource(String bootstrap, String topic, String appId, String stateDir)
            throws Exception {
        AtomicReference<String> error = new AtomicReference<>();
        KafkaStreams streams = instance(bootstrap, topic, topic + "-out", appId, stateDir,
                "streams", error);
        List<String> states = new ArrayList<>();
        streams.setStateListener((now, before) -> {
            synchronized (states) {
                states.add(now.toString());
            }
        });
        streams.start();
        waitFor(() -> false, error, 15);
        // the uncaught-exception handler sees the error before the client moves to
        // PENDING_ERROR: wait for that state too before reporting the states seen
        waitFor(() -> {
            synchronized (states) {
                return states.contains("PENDING_ERROR") || states.contains("ERROR");
            }
        }, new AtomicReference<>(), 10);
        synchronized (states) {
            emit(new Json().put("states", new ArrayList<>(states))
                    .put("streams_error", error.get() == null ? "" : error.get()));
        }
        try (Admin admin = TransactionScenarios.admin(bootstrap)) {
            emit(new Json().put("described", describe(admin, appId)));
        }
        streams.close(Duration.ofSeconds(20));
    }
}

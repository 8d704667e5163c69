package kbroker;

import static kbroker.ClientScenarios.bytes;
import static kbroker.ClientScenarios.emit;
import static kbroker.ClientScenarios.string;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

import kbroker.ClientScenarios.Json;

/**
 * Transaction scenarios run by tests/integration/test_transactions.py: the transactional Java
 * producer with read_committed and read_uncommitted consumers, consume-transform-produce with
 * sendOffsetsToTransaction, fencing by a second producer with the same transactional id, and a
 * Kafka Streams word count with exactly_once_v2. Same output as ClientScenarios: one JSON object
 * per line on stdout, client logs on stderr. Every blocking call is bounded, so against a broker
 * without transactions a scenario fails with the client's exception instead of hanging.
 *
 * <pre>
 *   txn-commit-abort BOOTSTRAP TOPIC TRANSACTIONAL_ID GROUP
 *   txn-consume-transform-produce BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID RECORDS
 *   txn-fence BOOTSTRAP TOPIC TRANSACTIONAL_ID
 *   txn-abort-hanging BOOTSTRAP TOPIC TRANSACTIONAL_ID
 *   streams-wordcount BOOTSTRAP INPUT OUTPUT APPLICATION_ID STATE_DIR LINES HALT_AFTER
 * </pre>
 */
final class TransactionScenarios {
    static final int PARTITIONS = 2;
    static final Duration WAIT = Duration.ofSeconds(30);
    /** Records per partition in each transaction of txn-commit-abort. */
    static final int PER_TXN = 5;
    static final String[] WORDS = {"kafka", "broker", "stream", "commit", "abort", "fence"};

    private TransactionScenarios() {
    }

    static boolean handles(String command) {
        return List.of("txn-commit-abort", "txn-consume-transform-produce", "txn-fence",
                "txn-abort-hanging", "streams-wordcount").contains(command);
    }

    static void run(String[] args) throws Exception {
        switch (args[0]) {
            case "txn-commit-abort" -> {
                expectArgs(args, 5);
                commitAbort(args[1], args[2], args[3], args[4]);
            }
            case "txn-consume-transform-produce" -> {
                expectArgs(args, 7);
                consumeTransformProduce(args[1], args[2], args[3], args[4], args[5],
                        Integer.parseInt(args[6]));
            }
            case "txn-fence" -> {
                expectArgs(args, 4);
                fence(args[1], args[2], args[3]);
            }
            case "txn-abort-hanging" -> {
                expectArgs(args, 4);
                abortHanging(args[1], args[2], args[3]);
            }
            case "streams-wordcount" -> {
                expectArgs(args, 8);
                wordCount(args[1], args[2], args[3], args[4], args[5], Integer.parseInt(args[6]),
                        Integer.parseInt(args[7]));
            }
            default -> throw new IllegalArgumentException("unknown scenario " + args[0]);
        }
        emit(new Json().put("done", true));
    }

    static String usage() {
        return "  txn-commit-abort BOOTSTRAP TOPIC TRANSACTIONAL_ID GROUP\n"
                + "  txn-consume-transform-produce BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID"
                + " RECORDS\n"
                + "  txn-fence BOOTSTRAP TOPIC TRANSACTIONAL_ID\n"
                + "  txn-abort-hanging BOOTSTRAP TOPIC TRANSACTIONAL_ID\n"
                + "  streams-wordcount BOOTSTRAP INPUT OUTPUT APPLICATION_ID STATE_DIR LINES"
                + " HALT_AFTER";
    }

    private static void expectArgs(String[] args, int n) {
        if (args.length != n) {
            throw new IllegalArgumentException("expected " + (n - 1) + " arguments after "
                    + args[0] + ", got " + (args.length - 1) + "; usage:\n" + usage());
        }
    }

    // ------------------------------------------------------------------ txn-commit-abort

    /**
     * Three transactions on a 2-partition topic, each writing PER_TXN records per partition and
     * the offsets of GROUP: committed, aborted, committed. A read_committed consumer polls the
     * topic throughout; each transaction is described while it is open (state, partitions, the
     * last stable offset against the high watermark) and after it ends (state, the group's
     * committed offsets). At the end both isolation levels read the topic from the beginning.
     */
    static void commitAbort(String bootstrap, String topic, String txnId, String group)
            throws Exception {
        List<TopicPartition> tps = partitions(topic, PARTITIONS);
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, PARTITIONS);
            Watcher watcher = new Watcher(bootstrap, tps);
            watcher.start();
            try (KafkaProducer<byte[], byte[]> producer = transactionalProducer(bootstrap, txnId,
                    Map.of())) {
                long t0 = System.nanoTime();
                producer.initTransactions();
                emit(new Json().put("step", "init").put("ms", millisSince(t0)));
                String[][] plan = {{"c1", "commit"}, {"a2", "abort"}, {"c3", "commit"}};
                for (int n = 0; n < plan.length; n++) {
                    String tag = plan[n][0];
                    boolean commit = plan[n][1].equals("commit");
                    producer.beginTransaction();
                    List<Future<RecordMetadata>> sends = new ArrayList<>();
                    for (int i = 0; i < PER_TXN; i++) {
                        for (TopicPartition tp : tps) {
                            sends.add(producer.send(new ProducerRecord<>(topic, tp.partition(),
                                    bytes("k" + i), bytes(tag + "-" + tp.partition() + "-" + i))));
                        }
                    }
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (TopicPartition tp : tps) {
                        offsets.put(tp, new OffsetAndMetadata(PER_TXN * (n + 1L), tag));
                    }
                    producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group));
                    producer.flush();
                    List<Object> acked = new ArrayList<>();
                    for (Future<RecordMetadata> f : sends) {
                        RecordMetadata md = f.get(30, TimeUnit.SECONDS);
                        acked.add(List.of(md.partition(), md.offset()));
                    }
                    Json open = new Json().put("step", tag).put("phase", "open")
                            .put("acked", acked)
                            .put("describe", describe(admin, txnId))
                            .put("listed", listed(admin, txnId))
                            .put("lso", endOffsets(admin, tps, IsolationLevel.READ_COMMITTED))
                            .put("hw", endOffsets(admin, tps, IsolationLevel.READ_UNCOMMITTED))
                            .put("committed", committed(admin, group, tps));
                    // the records are in the log: a read_committed consumer must not see them
                    // while the transaction is open (given a few of its polls to get it wrong)
                    Thread.sleep(300);
                    open.put("seen_while_open", watcher.count(tag));
                    emit(open);

                    long t1 = System.nanoTime();
                    if (commit) {
                        producer.commitTransaction();
                    } else {
                        producer.abortTransaction();
                    }
                    Json ended = new Json().put("step", tag).put("phase", plan[n][1])
                            .put("end_ms", millisSince(t1));
                    if (commit) {
                        long first = watcher.waitFor(tag, PER_TXN * PARTITIONS, 1);
                        long all = watcher.waitFor(tag, PER_TXN * PARTITIONS, PER_TXN * PARTITIONS);
                        ended.put("first_visible_ms", first < 0 ? null : (first - t1) / 1e6)
                                .put("all_visible_ms", all < 0 ? null : (all - t1) / 1e6);
                    }
                    // the end returns once it is decided; the markers follow
                    ended.put("describe", settled(admin, txnId))
                            .put("settled_ms", millisSince(t1))
                            .put("committed", committed(admin, group, tps))
                            .put("lso", endOffsets(admin, tps, IsolationLevel.READ_COMMITTED))
                            .put("hw", endOffsets(admin, tps, IsolationLevel.READ_UNCOMMITTED));
                    emit(ended);
                }
            } finally {
                watcher.stop();
            }
            emit(new Json().put("watcher", records(watcher.records())));
            emit(new Json().put("read_committed",
                    records(readAll(bootstrap, tps, IsolationLevel.READ_COMMITTED))));
            emit(new Json().put("read_uncommitted",
                    records(readAll(bootstrap, tps, IsolationLevel.READ_UNCOMMITTED))));
        }
    }

    // ------------------------------------------------------------------ consume-transform-produce

    /**
     * RECORDS records on INPUT (2 partitions, produced without a transaction), then a member of
     * GROUP (read_committed, no auto-commit, at most 7 records a poll) copies each poll's
     * records to OUTPUT as "out-VALUE" in one transaction with sendOffsetsToTransaction. Every
     * third transaction (the 2nd, 5th, ...) is aborted and the consumer seeks back to the
     * group's committed offsets, so its records are processed again in the next one. Each
     * transaction prints what it read and the group's committed offsets after it ended; then
     * OUTPUT is read with both isolation levels.
     */
    static void consumeTransformProduce(String bootstrap, String input, String output,
            String group, String txnId, int records) throws Exception {
        List<TopicPartition> inputs = partitions(input, PARTITIONS);
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, input, PARTITIONS);
            createTopic(admin, output, PARTITIONS);
        }
        Properties plain = new Properties();
        plain.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        plain.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        plain.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(plain,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            for (int i = 0; i < records; i++) {
                sends.add(producer.send(new ProducerRecord<>(input, i % PARTITIONS, null,
                        bytes("in-" + i))));
            }
            for (Future<RecordMetadata> f : sends) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
        emit(new Json().put("input", records));

        Properties props = consumerProps(bootstrap, IsolationLevel.READ_COMMITTED);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 7);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props,
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
             KafkaProducer<byte[], byte[]> producer = transactionalProducer(bootstrap, txnId,
                     Map.of())) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            int txn = 0;
            long committedTotal = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (committedTotal < records && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(200));
                if (polled.isEmpty()) {
                    continue;
                }
                boolean abort = txn % 3 == 1;
                producer.beginTransaction();
                List<Object> read = new ArrayList<>();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : polled) {
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(),
                            bytes("out-" + string(r.value()))));
                    read.add(List.of(r.partition(), r.offset()));
                    next.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                // in the log before the end: abortTransaction drops records not yet sent
                producer.flush();
                if (abort) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
                Map<TopicPartition, OffsetAndMetadata> committed =
                        consumer.committed(Set.copyOf(inputs), WAIT);
                if (abort) {
                    // process the same records again: back to where the group is committed
                    for (TopicPartition tp : next.keySet()) {
                        OffsetAndMetadata at = committed.get(tp);
                        consumer.seek(tp, at == null ? 0 : at.offset());
                    }
                }
                committedTotal = 0;
                Json offsets = new Json();
                for (TopicPartition tp : inputs) {
                    OffsetAndMetadata at = committed.get(tp);
                    committedTotal += at == null ? 0 : at.offset();
                    offsets.put(Integer.toString(tp.partition()), at == null ? null : at.offset());
                }
                emit(new Json().put("txn", txn).put("action", abort ? "abort" : "commit")
                        .put("read", read).put("next", offsetsJson(next))
                        .put("committed", offsets)
                        .put("generation", consumer.groupMetadata().generationId()));
                txn++;
            }
        }
        List<TopicPartition> outputs = partitions(output, PARTITIONS);
        emit(new Json().put("read_committed",
                records(readAll(bootstrap, outputs, IsolationLevel.READ_COMMITTED))));
        emit(new Json().put("read_uncommitted",
                records(readAll(bootstrap, outputs, IsolationLevel.READ_UNCOMMITTED))));
    }

    // ------------------------------------------------------------------ txn-fence

    /**
     * Three producers with one transactional id on a 1-partition topic, each fencing the one
     * before. A opens a transaction and writes three records; B initializes (fencing A and
     * aborting its transaction); A sends once more, then commits. B opens a transaction and
     * writes three records; C initializes; B commits without sending again, so its EndTxn itself
     * carries the old epoch. C writes three records and commits.
     */
    static void fence(String bootstrap, String topic, String txnId) throws Exception {
        List<TopicPartition> tps = partitions(topic, 1);
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, 1);
            KafkaProducer<byte[], byte[]> a = transactionalProducer(bootstrap, txnId, Map.of());
            KafkaProducer<byte[], byte[]> b = transactionalProducer(bootstrap, txnId, Map.of());
            KafkaProducer<byte[], byte[]> c = transactionalProducer(bootstrap, txnId, Map.of());
            try {
                a.initTransactions();
                openWithRecords(a, topic, "a");
                emit(new Json().put("step", "a-open").put("describe", describe(admin, txnId)));

                long t0 = System.nanoTime();
                b.initTransactions();
                emit(new Json().put("step", "b-init").put("ms", millisSince(t0))
                        .put("describe", describe(admin, txnId))
                        .put("lso", endOffsets(admin, tps, IsolationLevel.READ_COMMITTED))
                        .put("hw", endOffsets(admin, tps, IsolationLevel.READ_UNCOMMITTED)));
                Json fencedA = new Json().put("step", "a-fenced");
                try {
                    RecordMetadata md = a.send(new ProducerRecord<>(topic, 0, null,
                            bytes("a-late"))).get(30, TimeUnit.SECONDS);
                    fencedA.put("send", "acked at " + md.offset());
                } catch (ExecutionException e) {
                    fencedA.put("send", failure(e.getCause()));
                } catch (RuntimeException e) {
                    fencedA.put("send", failure(e));
                }
                fencedA.put("commit", commitOutcome(a));
                emit(fencedA);

                openWithRecords(b, topic, "b");
                t0 = System.nanoTime();
                c.initTransactions();
                emit(new Json().put("step", "c-init").put("ms", millisSince(t0))
                        .put("describe", describe(admin, txnId)));
                emit(new Json().put("step", "b-fenced").put("commit", commitOutcome(b)));

                openWithRecords(c, topic, "c");
                c.commitTransaction();
                emit(new Json().put("step", "c-commit").put("describe", settled(admin, txnId))
                        .put("lso", endOffsets(admin, tps, IsolationLevel.READ_COMMITTED))
                        .put("hw", endOffsets(admin, tps, IsolationLevel.READ_UNCOMMITTED)));
            } finally {
                for (KafkaProducer<byte[], byte[]> p : List.of(a, b, c)) {
                    p.close(Duration.ZERO);
                }
            }
        }
        emit(new Json().put("read_committed",
                records(readAll(bootstrap, tps, IsolationLevel.READ_COMMITTED))));
        emit(new Json().put("read_uncommitted",
                records(readAll(bootstrap, tps, IsolationLevel.READ_UNCOMMITTED))));
    }

    /** Begins a transaction and writes TAG-0..2 to partition 0, each acknowledged. */
    private static void openWithRecords(KafkaProducer<byte[], byte[]> producer, String topic,
            String tag) throws Exception {
        producer.beginTransaction();
        for (int i = 0; i < 3; i++) {
            producer.send(new ProducerRecord<>(topic, 0, null, bytes(tag + "-" + i)))
                    .get(30, TimeUnit.SECONDS);
        }
    }

    private static Object commitOutcome(KafkaProducer<byte[], byte[]> producer) {
        try {
            producer.commitTransaction();
            return "committed";
        } catch (RuntimeException e) {
            return failure(e);
        }
    }

    /** The exception's class, and the class of its cause when it wraps one. */
    private static Json failure(Throwable t) {
        Json out = new Json().put("error", t.getClass().getSimpleName())
                .put("message", t.getMessage());
        if (t.getCause() != null) {
            out.put("cause", t.getCause().getClass().getSimpleName());
        }
        return out;
    }

    // ------------------------------------------------------------------ streams-wordcount

    /** Line i of the word count's input: five words of WORDS, a different mix on each line. */
    static String line(int i) {
        StringBuilder sb = new StringBuilder();
        for (int w = 0; w < 5; w++) {
            if (w > 0) {
                sb.append(' ');
            }
            sb.append(WORDS[(i * 7 + w * w + w) % WORDS.length]);
        }
        return sb.toString();
    }

    /**
     * A Kafka Streams word count (split lines, group by word, which repartitions, count into a
     * RocksDB store with its changelog) with processing.guarantee=exactly_once_v2 and no record
     * cache, so each word occurrence sends one count to OUTPUT; its input is LINES lines of
     * line(i) on INPUT (2 partitions), and a read_committed consumer reads OUTPUT in the same JVM.
     *
     * <p>With HALT_AFTER > 0 (the first run) this creates the topics, produces the first half of
     * the lines, waits until their counts are committed, produces the second half, and halts
     * the JVM (no shutdown, as kill -9) in the middle of a transaction: at the HALT_AFTER-th
     * count, 300 ms after the counts before it were sent. With HALT_AFTER = 0 (the second run,
     * same STATE_DIR, so the same transactional ids) the application restores its store and
     * finishes; then OUTPUT is read from the beginning with both isolation levels and each
     * word's counts are printed in the order read.
     */
    static void wordCount(String bootstrap, String input, String output, String appId,
            String stateDir, int lines, int haltAfter) throws Exception {
        Map<String, Long> firstHalf = new TreeMap<>();
        Map<String, Long> expected = new TreeMap<>();
        for (int i = 0; i < lines; i++) {
            for (String word : line(i).split(" ")) {
                expected.merge(word, 1L, Long::sum);
                if (i < lines / 2) {
                    firstHalf.merge(word, 1L, Long::sum);
                }
            }
        }
        emit(new Json().put("expected", jsonOf(expected)));
        if (haltAfter > 0) {
            try (Admin admin = admin(bootstrap)) {
                createTopic(admin, input, PARTITIONS);
                createTopic(admin, output, PARTITIONS);
            }
            produceLines(bootstrap, input, 0, lines / 2);
        }

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG),
                "earliest");
        // a static member: the second run takes the halted one's place at once, instead of
        // waiting out its session in a rebalance
        props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG),
                appId + "-instance");
        // against a broker that cannot do transactions: fail within 20 s, not retry for 5 min
        props.put(StreamsConfig.TASK_TIMEOUT_MS_CONFIG, 20_000);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.MAX_BLOCK_MS_CONFIG), 20_000);
        // each count goes to the broker at once, so the halted transaction left records there
        props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 0);

        AtomicLong counted = new AtomicLong();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(text -> List.of(text.split(" ")))
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(),
                        Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .peek((word, count) -> {
                    if (counted.incrementAndGet() == haltAfter) {
                        emit(new Json().put("halting", counted.get()));
                        sleep(300);
                        Runtime.getRuntime().halt(3);
                    }
                })
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        long t0 = System.nanoTime();
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        AtomicBoolean failed = new AtomicBoolean(false);
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            emit(new Json().put("streams_error", e.toString()));
            failed.set(true);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        List<TopicPartition> outputs = partitions(output, PARTITIONS);
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(
                consumerProps(bootstrap, IsolationLevel.READ_COMMITTED),
                Serdes.String().deserializer(), Serdes.Long().deserializer())) {
            consumer.assign(outputs);
            consumer.seekToBeginning(outputs);
            Map<String, Long> target = haltAfter > 0 ? firstHalf : expected;
            Map<String, Long> latest = new HashMap<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (!latest.equals(target) && !failed.get() && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(100))) {
                    latest.put(r.key(), r.value());
                }
            }
            emit(new Json().put("counted", jsonOf(new TreeMap<>(latest)))
                    .put("ms", millisSince(t0)).put("state", streams.state().toString()));
            if (haltAfter > 0 && latest.equals(target)) {
                produceLines(bootstrap, input, lines / 2, lines);
                // the peek halts the JVM; this is only reached if it never does
                Thread.sleep(60_000);
                emit(new Json().put("error", "not halted after " + counted.get() + " counts"));
                return;
            }
        } finally {
            if (haltAfter == 0 || failed.get()) {
                streams.close(Duration.ofSeconds(20));
            }
        }
        for (IsolationLevel isolation : List.of(IsolationLevel.READ_COMMITTED,
                IsolationLevel.READ_UNCOMMITTED)) {
            Map<String, List<Long>> counts = new TreeMap<>();
            for (ConsumerRecord<byte[], byte[]> r : readAll(bootstrap, outputs, isolation)) {
                counts.computeIfAbsent(string(r.key()), k -> new ArrayList<>())
                        .add(Serdes.Long().deserializer().deserialize(output, r.value()));
            }
            Json json = new Json();
            counts.forEach(json::put);
            emit(new Json().put(isolation.toString().toLowerCase(Locale.ROOT), json));
        }
    }

    private static void produceLines(String bootstrap, String topic, int from, int to)
            throws Exception {
        Properties plain = new Properties();
        plain.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        plain.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        plain.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(plain,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            for (int i = from; i < to; i++) {
                sends.add(producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null,
                        bytes(line(i)))));
            }
            for (Future<RecordMetadata> f : sends) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
        emit(new Json().put("produced_lines", List.of(from, to)));
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static boolean reached(Map<String, List<Long>> seen, Map<String, Long> expected) {
        for (Map.Entry<String, Long> e : expected.entrySet()) {
            List<Long> values = seen.get(e.getKey());
            if (values == null || !values.get(values.size() - 1).equals(e.getValue())) {
                return false;
            }
        }
        return true;
    }

    // ------------------------------------------------------------------ helpers

    // ------------------------------------------------------------------ txn-abort-hanging

    /**
     * A transaction left open by its producer is aborted from outside, as
     * kafka-transactions.sh abort does it: Admin.describeProducers finds the producer with an
     * open transaction on the partition, Admin.abortTransaction writes the ABORT marker
     * (WriteTxnMarkers to the partition's leader), and the last stable offset moves past it.
     */
    private static void abortHanging(String bootstrap, String topic, String txnId)
            throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = admin(bootstrap);
             KafkaProducer<byte[], byte[]> producer = transactionalProducer(bootstrap, txnId,
                     Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 600_000))) {
            createTopic(admin, topic, 1);
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, bytes("hanging-" + i)))
                        .get(30, TimeUnit.SECONDS);
            }
            List<TopicPartition> tps = List.of(tp);
            Json before = new Json().put("hw", endOffsets(admin, tps,
                    IsolationLevel.READ_UNCOMMITTED))
                    .put("lso", endOffsets(admin, tps, IsolationLevel.READ_COMMITTED));
            ProducerState open = admin.describeProducers(tps).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).activeProducers().stream()
                    .filter(p -> p.currentTransactionStartOffset().isPresent())
                    .findFirst().orElseThrow();
            before.put("start_offset", open.currentTransactionStartOffset().getAsLong())
                    .put("producer_epoch", open.producerEpoch());
            emit(new Json().put("step", "open").put("state", before));
            admin.abortTransaction(new AbortTransactionSpec(tp, open.producerId(),
                    (short) open.producerEpoch(), open.coordinatorEpoch().orElse(-1)))
                    .all().get(30, TimeUnit.SECONDS);
            long stillOpen = admin.describeProducers(tps).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).activeProducers().stream()
                    .filter(p -> p.currentTransactionStartOffset().isPresent()).count();
            emit(new Json().put("step", "aborted")
                    .put("hw", endOffsets(admin, tps, IsolationLevel.READ_UNCOMMITTED))
                    .put("lso", endOffsets(admin, tps, IsolationLevel.READ_COMMITTED))
                    .put("open_transactions", stillOpen));
            List<Object> seen = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                    consumerProps(bootstrap, IsolationLevel.READ_COMMITTED),
                    new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
                while (System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        seen.add(string(r.value()));
                    }
                }
                emit(new Json().put("step", "read_committed").put("values", seen)
                        .put("position", consumer.position(tp)));
            }
            producer.close(Duration.ofSeconds(5));
        }
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < n; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        return Admin.create(props);
    }

    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1)))
                .all().get(30, TimeUnit.SECONDS);
    }

    static KafkaProducer<byte[], byte[]> transactionalProducer(String bootstrap, String txnId,
            Map<String, Object> extra) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        // initTransactions, commitTransaction and abortTransaction block at most this long
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        props.putAll(extra);
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static Properties consumerProps(String bootstrap, IsolationLevel isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation.toString());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        return props;
    }

    /** The state of the transactional id as DescribeTransactions answers it. */
    private static Json describe(Admin admin, String txnId) {
        try {
            TransactionDescription d = admin.describeTransactions(List.of(txnId))
                    .description(txnId).get(30, TimeUnit.SECONDS);
            List<Object> tps = new ArrayList<>();
            d.topicPartitions().stream().map(TopicPartition::toString).sorted().forEach(tps::add);
            return new Json().put("state", d.state().toString())
                    .put("epoch", d.producerEpoch())
                    .put("timeout_ms", d.transactionTimeoutMs())
                    .put("started", d.transactionStartTimeMs().isPresent())
                    .put("partitions", tps);
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            return new Json().put("error", cause.getClass().getSimpleName());
        }
    }

    /**
     * The description once the transaction's markers are written (the state is no longer
     * PrepareCommit or PrepareAbort), waiting at most 10 s.
     */
    private static Json settled(Admin admin, String txnId) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        Json described = describe(admin, txnId);
        while (described.toString().contains("\"state\":\"Prepare")
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
            described = describe(admin, txnId);
        }
        return described;
    }

    /** The state ListTransactions gives the transactional id (null when it is not listed). */
    private static Object listed(Admin admin, String txnId) {
        try {
            for (TransactionListing l : admin.listTransactions().all().get(30, TimeUnit.SECONDS)) {
                if (l.transactionalId().equals(txnId)) {
                    return l.state().toString();
                }
            }
            return null;
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            return new Json().put("error", cause.getClass().getSimpleName());
        }
    }

    /** ListOffsets latest at the isolation level: the last stable offset or the high watermark. */
    private static Json endOffsets(Admin admin, List<TopicPartition> tps,
            IsolationLevel isolation) {
        Map<TopicPartition, OffsetSpec> query = new HashMap<>();
        tps.forEach(tp -> query.put(tp, OffsetSpec.latest()));
        Json out = new Json();
        try {
            var result = admin.listOffsets(query, new ListOffsetsOptions(isolation)).all()
                    .get(30, TimeUnit.SECONDS);
            for (TopicPartition tp : tps) {
                out.put(Integer.toString(tp.partition()), result.get(tp).offset());
            }
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            out.put("error", cause.getClass().getSimpleName());
        }
        return out;
    }

    /** The group's committed offsets of these partitions (null where it has none). */
    private static Json committed(Admin admin, String group, List<TopicPartition> tps) {
        Json out = new Json();
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            for (TopicPartition tp : tps) {
                OffsetAndMetadata om = offsets.get(tp);
                out.put(Integer.toString(tp.partition()), om == null ? null
                        : new Json().put("offset", om.offset()).put("metadata", om.metadata()));
            }
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            out.put("error", cause.getClass().getSimpleName());
        }
        return out;
    }

    private static Json offsetsJson(Map<TopicPartition, OffsetAndMetadata> offsets) {
        TreeMap<Integer, Long> sorted = new TreeMap<>();
        offsets.forEach((tp, om) -> sorted.put(tp.partition(), om.offset()));
        Json out = new Json();
        sorted.forEach((p, o) -> out.put(Integer.toString(p), o));
        return out;
    }

    static Json jsonOf(Map<String, Long> map) {
        Json out = new Json();
        map.forEach(out::put);
        return out;
    }

    /**
     * Everything up to the end offsets at this isolation level (the last stable offset for
     * read_committed) from the beginning, in a consumer of its own; at most 30 s.
     */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, List<TopicPartition> tps,
            IsolationLevel isolation) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                consumerProps(bootstrap, isolation), new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, WAIT);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (System.nanoTime() < deadline) {
                boolean atEnd = true;
                for (TopicPartition tp : tps) {
                    atEnd &= consumer.position(tp, WAIT) >= end.get(tp);
                }
                if (atEnd) {
                    break;
                }
                consumer.poll(Duration.ofMillis(200)).forEach(out::add);
            }
        }
        return out;
    }

    private static List<Object> records(Collection<ConsumerRecord<byte[], byte[]>> records) {
        List<Object> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            out.add(List.of(r.partition(), r.offset(), string(r.value())));
        }
        return out;
    }

    static double millisSince(long t0) {
        return Math.round((System.nanoTime() - t0) / 1e4) / 100.0;
    }

    /**
     * A read_committed consumer polling the topic in a thread of its own from the beginning,
     * keeping every record with the time it arrived.
     */
    static final class Watcher {
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final List<TopicPartition> tps;
        private final List<ConsumerRecord<byte[], byte[]>> seen = new ArrayList<>();
        private final List<Long> arrived = new ArrayList<>();
        private final AtomicBoolean stopping = new AtomicBoolean(false);
        private final Thread thread;
        private volatile Throwable error;

        Watcher(String bootstrap, List<TopicPartition> tps) {
            Properties props = consumerProps(bootstrap, IsolationLevel.READ_COMMITTED);
            this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                    new ByteArrayDeserializer());
            this.tps = tps;
            this.thread = new Thread(this::poll, "read-committed-watcher");
        }

        void start() {
            thread.start();
        }

        private void poll() {
            try {
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                while (!stopping.get()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                    long now = System.nanoTime();
                    synchronized (this) {
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            seen.add(r);
                            arrived.add(now);
                        }
                        notifyAll();
                    }
                }
            } catch (Throwable t) {
                error = t;
                t.printStackTrace();
            } finally {
                consumer.close(Duration.ofSeconds(5));
            }
        }

        synchronized int count(String tag) {
            int n = 0;
            for (ConsumerRecord<byte[], byte[]> r : seen) {
                if (string(r.value()).startsWith(tag + "-")) {
                    n++;
                }
            }
            return n;
        }

        /**
         * Waits (at most 30 s) until `total` records tagged `tag` arrived; returns when the
         * `nth` of them arrived (System.nanoTime), or -1 if it never did.
         */
        synchronized long waitFor(String tag, int total, int nth) throws InterruptedException {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (count(tag) < total && System.nanoTime() < deadline && error == null) {
                wait(100);
            }
            int n = 0;
            for (int i = 0; i < seen.size(); i++) {
                if (string(seen.get(i).value()).startsWith(tag + "-") && ++n == nth) {
                    return arrived.get(i);
                }
            }
            return -1;
        }

        synchronized List<ConsumerRecord<byte[], byte[]>> records() {
            return new ArrayList<>(seen);
        }

        void stop() throws InterruptedException {
            stopping.set(true);
            thread.join(10_000);
        }
    }
}

package kbroker;

import static kbroker.ClientScenarios.bytes;
import static kbroker.ClientScenarios.emit;
import static kbroker.ClientScenarios.string;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import kbroker.ClientScenarios.Json;

/**
 * Share groups (KIP-932) with the Java client's KafkaShareConsumer. One line of JSON on stdout
 * per event, read by tests/conformance/test_share_java_client.py, which runs the same scenario
 * against Kafka and kbroker and compares what happened to each record.
 *
 * share-consume BOOTSTRAP TOPIC GROUP RECORDS LOCK_MS:
 * the group gets share.auto.offset.reset=earliest and share.record.lock.duration.ms=LOCK_MS
 * (IncrementalAlterConfigs on the GROUP resource); RECORDS records go to a 1-partition topic.
 * Phase 1: two consumers (explicit acknowledgement, record_limit, max.poll.records 10) share
 * them: a value ending in 3 is released at its first delivery, one ending in 7 is rejected, the
 * rest accepted. Phase 2: 20 more records; consumer "a" takes some and stops polling; "b"
 * gets them once their locks expire.
 */
public final class ShareScenarios {
    private ShareScenarios() {
    }

    public static void main(String[] args) {
        try {
            if (args.length == 6 && args[0].equals("share-consume")) {
                shareConsume(args[1], args[2], args[3], Integer.parseInt(args[4]),
                        Integer.parseInt(args[5]));
            } else {
                System.err.println("usage: share-consume BOOTSTRAP TOPIC GROUP RECORDS LOCK_MS");
                System.exit(2);
            }
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace();
            emit(new Json().put("error", t.toString()));
            System.exit(1);
        }
    }

    static KafkaShareConsumer<byte[], byte[]> consumer(String bootstrap, String group, String id) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "share-" + id);
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        p.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 10);
        return new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static void produce(String bootstrap, String topic, int from, int to) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = from; i < to; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, bytes("v" + i)));
            }
            producer.flush();
        }
    }

    /** What a consumer does with a record of phase 1: release 3s once, reject 7s, accept. */
    static AcknowledgeType decide(int value, short delivery) {
        if (value % 10 == 7) {
            return AcknowledgeType.REJECT;
        }
        if (value % 10 == 3 && delivery == 1) {
            return AcknowledgeType.RELEASE;
        }
        return AcknowledgeType.ACCEPT;
    }

    static void record(String who, ConsumerRecord<byte[], byte[]> r, AcknowledgeType action,
                       long started, int phase) {
        emit(new Json().put("consumer", who).put("phase", phase).put("offset", r.offset())
                .put("value", string(r.value()))
                .put("delivery", (int) r.deliveryCount().orElse((short) -1))
                .put("action", action == null ? "none" : action.name().toLowerCase())
                .put("ms", System.currentTimeMillis() - started));
    }

    /** Admin's view of the running group: describeShareGroups, listGroups, and
     * listShareGroupOffsets. */
    static void describe(String bootstrap, String topic, String group) throws Exception {
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
            List<Object> members = new ArrayList<>();
            for (ShareMemberDescription m : d.members()) {
                List<Object> assigned = new ArrayList<>();
                for (TopicPartition tp : m.assignment().topicPartitions()) {
                    assigned.add(tp.topic() + "-" + tp.partition());
                }
                members.add(new Json().put("client", m.clientId()).put("assigned", assigned));
            }
            emit(new Json().put("described", group).put("state", d.groupState().toString())
                    .put("members", members));
            List<Object> listed = new ArrayList<>();
            admin.listGroups(new ListGroupsOptions().withTypes(java.util.Set.of(GroupType.SHARE)))
                    .all().get(30, TimeUnit.SECONDS).forEach(g -> {
                        if (g.groupId().equals(group)) {
                            listed.add(new Json().put("type", g.type().map(Object::toString)
                                    .orElse("")).put("state", g.groupState()
                                    .map(Object::toString).orElse("")));
                        }
                    });
            emit(new Json().put("listed", listed));
            TopicPartition tp = new TopicPartition(topic, 0);
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin.listShareGroupOffsets(
                    Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(List.of(tp))))
                    .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
            SharePartitionOffsetInfo info = offsets.get(tp);
            emit(new Json().put("offsets", info == null ? -2 : info.startOffset())
                    .put("lag", info == null ? -2 : info.lag().orElse(-1L)));
        }
    }

    static void shareConsume(String bootstrap, String topic, String group, int total, int lockMs)
            throws Exception {
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all()
                    .get(30, TimeUnit.SECONDS);
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            Collection<AlterConfigOp> ops = List.of(
                    new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                            AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms",
                            String.valueOf(lockMs)), AlterConfigOp.OpType.SET));
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get(30, TimeUnit.SECONDS);
        }
        produce(bootstrap, topic, 0, total);
        emit(new Json().put("produced", total));

        // phase 1: both consume until every record is accepted or rejected
        int settled = total - total / 10;          // every value ending in 3 comes back once
        AtomicInteger finished = new AtomicInteger();   // accepted or rejected
        AtomicBoolean phase1Done = new AtomicBoolean();
        long started = System.currentTimeMillis();
        List<Thread> threads = new ArrayList<>();
        List<KafkaShareConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (String who : List.of("a", "b")) {
            KafkaShareConsumer<byte[], byte[]> c = consumer(bootstrap, group, who);
            c.subscribe(List.of(topic));
            consumers.add(c);
            Thread t = new Thread(() -> {
                try {
                    long deadline = System.currentTimeMillis() + 60_000;
                    while (!phase1Done.get() && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                            int value = Integer.parseInt(string(r.value()).substring(1));
                            AcknowledgeType action = decide(value, r.deliveryCount().orElse((short) 0));
                            c.acknowledge(r, action);
                            record(who, r, action, started, 1);
                            if (action != AcknowledgeType.RELEASE
                                    && finished.incrementAndGet() >= total) {
                                phase1Done.set(true);
                            }
                        }
                        c.commitSync(Duration.ofSeconds(10));
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            }, "share-" + who);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (!failures.isEmpty()) {
            throw new RuntimeException("a consumer failed", failures.get(0));
        }
        emit(new Json().put("phase1", finished.get()).put("settled", settled)
                .put("ms", System.currentTimeMillis() - started));

        // phase 2: "a" acquires some of 20 new records and stops polling; "b" gets them later
        KafkaShareConsumer<byte[], byte[]> a = consumers.get(0);
        KafkaShareConsumer<byte[], byte[]> b = consumers.get(1);
        produce(bootstrap, topic, total, total + 20);
        long phase2 = System.currentTimeMillis();
        int held = 0;
        long deadline = phase2 + 30_000;
        while (held == 0 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : a.poll(Duration.ofMillis(200))) {
                record("a", r, null, phase2, 2);
                held++;
            }
        }
        emit(new Json().put("held", held));
        int got = 0;
        deadline = System.currentTimeMillis() + lockMs + 30_000;
        while (got < 20 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : b.poll(Duration.ofMillis(200))) {
                b.acknowledge(r, AcknowledgeType.ACCEPT);
                record("b", r, AcknowledgeType.ACCEPT, phase2, 2);
                got++;
            }
            b.commitSync(Duration.ofSeconds(10));
        }
        emit(new Json().put("phase2", got).put("ms", System.currentTimeMillis() - phase2));
        describe(bootstrap, topic, group);
        b.close(Duration.ofSeconds(10));
        try {
            a.close(Duration.ofSeconds(5));
        } catch (RuntimeException e) {
            emit(new Json().put("close_a", e.toString()));
        }
    }
}

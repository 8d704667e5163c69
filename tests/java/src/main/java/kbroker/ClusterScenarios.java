package kbroker;

import static kbroker.ClientScenarios.bytes;
import static kbroker.ClientScenarios.emit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RaftVoterEndpoint;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import kbroker.ClientScenarios.Json;

/**
 * Scenarios of the APIs of placement and leadership, run by
 * tests/integration/test_cluster_admin_apis.py: the AdminClient's describeTopics (which pages
 * through DescribeTopicPartitions), electLeaders, alterPartitionReassignments and
 * listPartitionReassignments, alterReplicaLogDirs, describeMetadataQuorum and
 * listConfigResources, and a consumer whose positions carry a leader epoch, which it validates
 * with OffsetForLeaderEpoch before fetching. Same output as ClientScenarios: one JSON object per
 * line on stdout.
 *
 * <pre>
 *   cluster-admin BOOTSTRAP TOPIC_PREFIX
 *   validate-position BOOTSTRAP TOPIC GROUP
 * </pre>
 */
final class ClusterScenarios {
    static final long WAIT_S = 30;
    static final int RECORDS = 10;

    private ClusterScenarios() {
    }

    static boolean handles(String command) {
        return List.of("cluster-admin", "validate-position").contains(command);
    }

    static String usage() {
        return "  cluster-admin BOOTSTRAP TOPIC_PREFIX\n"
                + "  validate-position BOOTSTRAP TOPIC GROUP";
    }

    static void run(String[] args) throws Exception {
        switch (args[0]) {
            case "cluster-admin" -> {
                expectArgs(args, 3);
                clusterAdmin(args[1], args[2]);
            }
            case "validate-position" -> {
                expectArgs(args, 4);
                validatePosition(args[1], args[2], args[3]);
            }
            default -> throw new IllegalArgumentException("unknown scenario " + args[0]);
        }
        emit(new Json().put("done", true));
    }

    private static void expectArgs(String[] args, int n) {
        if (args.length != n) {
            throw new IllegalArgumentException("expected " + (n - 1) + " arguments after "
                    + args[0] + ", got " + (args.length - 1) + "; usage:\n" + usage());
        }
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        return Admin.create(props);
    }

    /** The simple name of the exception a future failed with, or "none". */
    static String outcome(KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get(WAIT_S, TimeUnit.SECONDS);
            return "none";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (java.util.concurrent.TimeoutException e) {
            return "timeout";
        }
    }

    static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) {
            out.add(n.id());
        }
        return out;
    }

    // ------------------------------------------------------------------ cluster-admin

    static void clusterAdmin(String bootstrap, String prefix) throws Exception {
        String a = prefix + "-a";
        String b = prefix + "-b";
        String missing = prefix + "-missing";
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(a, 3, (short) 1), new NewTopic(b, 2, (short) 1)))
                    .all().get(WAIT_S, TimeUnit.SECONDS);
            int node = admin.describeCluster().nodes().get(WAIT_S, TimeUnit.SECONDS)
                    .iterator().next().id();
            emit(new Json().put("step", "cluster").put("node", node));

            // two partitions per answer: the client follows the cursor across both topics
            Map<String, KafkaFuture<TopicDescription>> described = admin.describeTopics(
                    TopicCollection.ofTopicNames(List.of(a, b, missing)),
                    new DescribeTopicsOptions().partitionSizeLimitPerResponse(2)).topicNameValues();
            for (String name : List.of(a, b)) {
                TopicDescription d = described.get(name).get(WAIT_S, TimeUnit.SECONDS);
                List<Json> partitions = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    partitions.add(new Json().put("partition", p.partition())
                            .put("leader", p.leader().id()).put("replicas", ids(p.replicas()))
                            .put("isr", ids(p.isr())).put("elr", ids(p.elr()))
                            .put("last_known_elr", ids(p.lastKnownElr())));
                }
                emit(new Json().put("step", "describe-topics").put("topic", d.name())
                        .put("internal", d.isInternal()).put("has_id", d.topicId() != null)
                        .put("partitions", partitions));
            }
            emit(new Json().put("step", "describe-missing")
                    .put("error", outcome(described.get(missing))));

            for (ElectionType type : List.of(ElectionType.PREFERRED, ElectionType.UNCLEAN)) {
                Set<TopicPartition> asked = Set.of(new TopicPartition(a, 0),
                        new TopicPartition(a, 1), new TopicPartition(missing, 0));
                Map<TopicPartition, Optional<Throwable>> results = admin.electLeaders(type, asked)
                        .partitions().get(WAIT_S, TimeUnit.SECONDS);
                Json byPartition = new Json();
                for (Map.Entry<String, String> e : outcomes(results).entrySet()) {
                    byPartition.put(e.getKey(), e.getValue());
                }
                Map<TopicPartition, Optional<Throwable>> all = admin.electLeaders(type, null)
                        .partitions().get(WAIT_S, TimeUnit.SECONDS);
                emit(new Json().put("step", "elect-leaders").put("type", type.name())
                        .put("results", byPartition).put("all_partitions", all.size()));
            }

            TopicPartition a0 = new TopicPartition(a, 0);
            TopicPartition a1 = new TopicPartition(a, 1);
            TopicPartition a2 = new TopicPartition(a, 2);
            Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
            moves.put(a0, Optional.of(new NewPartitionReassignment(List.of(node))));
            moves.put(a1, Optional.of(new NewPartitionReassignment(List.of(node + 1))));
            moves.put(a2, Optional.empty());
            Map<TopicPartition, KafkaFuture<Void>> moved = admin.alterPartitionReassignments(moves)
                    .values();
            Map<TopicPartition, PartitionReassignment> ongoing = admin.listPartitionReassignments()
                    .reassignments().get(WAIT_S, TimeUnit.SECONDS);
            Map<TopicPartition, PartitionReassignment> ongoingOfA = admin
                    .listPartitionReassignments(Set.of(a0, a1, a2)).reassignments()
                    .get(WAIT_S, TimeUnit.SECONDS);
            emit(new Json().put("step", "reassignments")
                    .put("a0", outcome(moved.get(a0))).put("a1", outcome(moved.get(a1)))
                    .put("a2", outcome(moved.get(a2))).put("ongoing", ongoing.size())
                    .put("ongoing_of_a", ongoingOfA.size()));

            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(node))
                    .allDescriptions().get(WAIT_S, TimeUnit.SECONDS).get(node);
            String logDir = dirs.keySet().iterator().next();
            TopicPartitionReplica here = new TopicPartitionReplica(a, 0, node);
            TopicPartitionReplica elsewhere = new TopicPartitionReplica(a, 1, node);
            Map<TopicPartitionReplica, KafkaFuture<Void>> dirMoves = admin.alterReplicaLogDirs(
                    Map.of(here, logDir, elsewhere, "/no/such/dir")).values();
            emit(new Json().put("step", "alter-replica-log-dirs").put("dirs", dirs.size())
                    .put("same_dir", outcome(dirMoves.get(here)))
                    .put("unknown_dir", outcome(dirMoves.get(elsewhere))));

            long before = System.currentTimeMillis();
            QuorumInfo quorum = admin.describeMetadataQuorum().quorumInfo()
                    .get(WAIT_S, TimeUnit.SECONDS);
            List<Json> voters = new ArrayList<>();
            for (QuorumInfo.ReplicaState v : quorum.voters()) {
                voters.add(new Json().put("id", v.replicaId()).put("log_end_offset", v.logEndOffset())
                        .put("last_fetch", v.lastFetchTimestamp().orElse(-1))
                        .put("last_caught_up", v.lastCaughtUpTimestamp().orElse(-1))
                        .put("directory_id", String.valueOf(v.replicaDirectoryId())));
            }
            List<Json> nodes = new ArrayList<>();
            for (QuorumInfo.Node n : quorum.nodes().values()) {
                List<Json> endpoints = new ArrayList<>();
                for (RaftVoterEndpoint e : n.endpoints()) {
                    endpoints.add(new Json().put("name", e.listener()).put("host", e.host())
                            .put("port", e.port()));
                }
                nodes.add(new Json().put("id", n.nodeId()).put("endpoints", endpoints));
            }
            emit(new Json().put("step", "quorum").put("asked_at", before)
                    .put("answered_at", System.currentTimeMillis()).put("leader", quorum.leaderId())
                    .put("leader_epoch", quorum.leaderEpoch())
                    .put("high_watermark", quorum.highWatermark()).put("voters", voters)
                    .put("observers", quorum.observers().size()).put("nodes", nodes));

            List<String> resources = new ArrayList<>();
            for (ConfigResource r : admin.listConfigResources().all()
                    .get(WAIT_S, TimeUnit.SECONDS)) {
                resources.add(r.type().name() + ":" + r.name());
            }
            List<String> brokers = new ArrayList<>();
            for (ConfigResource r : admin.listConfigResources(Set.of(ConfigResource.Type.BROKER),
                    new ListConfigResourcesOptions()).all().get(WAIT_S, TimeUnit.SECONDS)) {
                brokers.add(r.type().name() + ":" + r.name());
            }
            emit(new Json().put("step", "config-resources").put("all", resources)
                    .put("brokers", brokers));
        }
    }

    /** "topic-partition" -> the election's exception's simple name, or "none". */
    static Map<String, String> outcomes(Map<TopicPartition, Optional<Throwable>> results) {
        Map<String, String> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : results.entrySet()) {
            out.put(e.getKey().toString(),
                    e.getValue().map(t -> t.getClass().getSimpleName()).orElse("none"));
        }
        return out;
    }

    // ------------------------------------------------------------------ validate-position

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String reset) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        return new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static void produce(String bootstrap, String topic, int from, int n) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            for (int i = from; i < from + n; i++) {
                sends.add(producer.send(new ProducerRecord<>(topic, 0, null, bytes("r" + i))));
            }
            for (Future<RecordMetadata> send : sends) {
                send.get(WAIT_S, TimeUnit.SECONDS);
            }
        }
    }

    /** Offsets polled until ``count`` arrive or the time is up. */
    static List<Long> pollOffsets(KafkaConsumer<byte[], byte[]> consumer, int count) {
        List<Long> offsets = new ArrayList<>();
        long deadline = System.currentTimeMillis() + WAIT_S * 1000;
        while (offsets.size() < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                offsets.add(r.offset());
            }
        }
        return offsets;
    }

    /**
     * A position with a leader epoch is validated with OffsetForLeaderEpoch before the consumer
     * fetches: a committed offset inside the log goes on from there; one past the end of its
     * epoch is truncation, which the consumer reports (no reset policy) or repairs by going to
     * the epoch's end (with one).
     */
    static void validatePosition(String bootstrap, String topic, String group) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)))
                    .all().get(WAIT_S, TimeUnit.SECONDS);
        }
        produce(bootstrap, topic, 0, RECORDS);
        TopicPartition tp = new TopicPartition(topic, 0);

        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group, "none")) {
            c.assign(List.of(tp));
            c.commitSync(Map.of(tp, new OffsetAndMetadata(4, Optional.of(0), "")));
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group, "none")) {
            c.assign(List.of(tp));
            List<Long> offsets = pollOffsets(c, RECORDS - 4);
            emit(new Json().put("step", "committed-with-epoch").put("offsets", offsets)
                    .put("position", c.position(tp)));
        }

        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, null, "none")) {
            c.assign(List.of(tp));
            c.seek(tp, new OffsetAndMetadata(100, Optional.of(0), ""));
            String error = "none";
            Json divergent = new Json();
            long deadline = System.currentTimeMillis() + WAIT_S * 1000;
            while (error.equals("none") && System.currentTimeMillis() < deadline) {
                try {
                    c.poll(Duration.ofMillis(200));
                } catch (LogTruncationException e) {
                    error = e.getClass().getSimpleName();
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> d
                            : e.divergentOffsets().entrySet()) {
                        divergent.put(d.getKey().toString(), new Json()
                                .put("offset", d.getValue().offset())
                                .put("epoch", d.getValue().leaderEpoch().orElse(-1)));
                    }
                }
            }
            emit(new Json().put("step", "truncated-no-reset").put("error", error)
                    .put("divergent", divergent));
        }

        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, null, "earliest")) {
            c.assign(List.of(tp));
            c.seek(tp, new OffsetAndMetadata(100, Optional.of(0), ""));
            long deadline = System.currentTimeMillis() + WAIT_S * 1000;
            long position = c.position(tp);
            while (position == 100 && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(200));
                position = c.position(tp);
            }
            produce(bootstrap, topic, RECORDS, 3);
            List<Long> offsets = pollOffsets(c, 3);
            emit(new Json().put("step", "truncated-earliest").put("position", position)
                    .put("offsets", offsets));
        }
    }
}

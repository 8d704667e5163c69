package kbroker;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The members of consumer groups in one JVM, driven by tests/clients/settle.py (JavaHost): one
 * command per line on stdin, one JSON event per line on stdout.
 *
 * <pre>
 *   group-host BOOTSTRAP TOPIC ASSIGNOR SESSION_TIMEOUT_MS
 *   stdin:  ping | start MEMBER GROUP INSTANCE_ID|- | close MEMBER | quit
 *   stdout: pong | started | assigned (the member's whole assignment after each change) |
 *           records (partition, offset pairs of one poll) | closed
 * </pre>
 *
 * Each member is a KafkaConsumer polling every 100 ms in its own thread: a classic-protocol one
 * with the client-side ASSIGNOR (range, roundrobin, sticky, cooperative-sticky or a class name),
 * or, for ASSIGNOR "consumer" or "consumer:uniform|range", a consumer-protocol one (KIP-848,
 * group.remote.assignor uniform or range), which sets no assignment strategy, session timeout or
 * heartbeat interval: the broker owns them (SESSION_TIMEOUT_MS is then ignored). The rebalance
 * listener keeps the member's whole assignment from the eager or incremental callbacks alike.
 */
final class GroupHost {
    private final String bootstrap;
    private final String topic;
    private final String assignor;
    private final String remoteAssignor;   // consumer protocol: "" for the broker's default
    private final boolean consumerProtocol;
    private final String sessionTimeoutMs;
    private final Map<Integer, Member> members = new HashMap<>();

    private GroupHost(String[] args) {
        bootstrap = args[1];
        topic = args[2];
        consumerProtocol = args[3].equals("consumer") || args[3].startsWith("consumer:");
        assignor = ClientScenarios.assignorClass(args[3]);
        remoteAssignor = consumerProtocol && args[3].contains(":") ? args[3].split(":", 2)[1] : "";
        sessionTimeoutMs = args[4];
    }

    static void run(String[] args) throws Exception {
        if (args.length != 5) {
            throw new IllegalArgumentException(
                    "group-host BOOTSTRAP TOPIC ASSIGNOR SESSION_TIMEOUT_MS");
        }
        new GroupHost(args).serve();
    }

    private void serve() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.trim().split(" ");
            switch (cmd[0]) {
                case "ping" -> ClientScenarios.emit(new ClientScenarios.Json().put("event", "pong"));
                case "start" -> {
                    int id = Integer.parseInt(cmd[1]);
                    Member member = new Member(id, cmd[2], cmd[3].equals("-") ? null : cmd[3]);
                    members.put(id, member);
                    member.thread.start();
                }
                case "close" -> {
                    Member member = members.remove(Integer.parseInt(cmd[1]));
                    member.close();
                    ClientScenarios.emit(event("closed", member.id));
                }
                case "quit" -> {
                    closeAll();
                    return;
                }
                default -> throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        closeAll();
    }

    private void closeAll() throws InterruptedException {
        for (Member member : members.values()) {
            member.stop.set(true);
            member.consumer.wakeup();
        }
        for (Member member : members.values()) {
            member.thread.join(20_000);
        }
        members.clear();
    }

    private static ClientScenarios.Json event(String name, int member) {
        return new ClientScenarios.Json().put("event", name).put("m", member);
    }

    private final class Member {
        final int id;
        final KafkaConsumer<byte[], byte[]> consumer;
        final AtomicBoolean stop = new AtomicBoolean(false);
        final Thread thread;
        final Set<Integer> owned = new HashSet<>();

        Member(int id, String group, String instanceId) {
            this.id = id;
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            if (consumerProtocol) {
                // KIP-848: the client refuses the classic assignment, session and heartbeat
                // settings with this protocol
                props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
                if (!remoteAssignor.isEmpty()) {
                    props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, remoteAssignor);
                }
            } else {
                props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
                props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
                props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionTimeoutMs);
                props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
            }
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.put(ConsumerConfig.CLIENT_ID_CONFIG, "settle-" + id);
            if (instanceId != null) {
                props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
            }
            consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    for (TopicPartition tp : partitions) {
                        owned.remove(tp.partition());
                    }
                    assigned();
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    for (TopicPartition tp : partitions) {
                        owned.add(tp.partition());
                    }
                    assigned();
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    onPartitionsRevoked(partitions);
                }
            });
            ClientScenarios.emit(event("started", id));
            thread = new Thread(this::poll, "member-" + id);
        }

        private void assigned() {
            ClientScenarios.emit(event("assigned", id).put("partitions", new ArrayList<>(owned)));
        }

        private void poll() {
            try {
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                    if (!records.isEmpty()) {
                        List<Object> offsets = new ArrayList<>();
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            offsets.add(List.of(r.partition(), r.offset()));
                        }
                        ClientScenarios.emit(event("records", id).put("offsets", offsets));
                    }
                }
            } catch (WakeupException e) {
                // close() or quit
            } finally {
                consumer.close();
            }
        }

        void close() throws InterruptedException {
            stop.set(true);
            consumer.wakeup();
            thread.join(20_000);
        }
    }
}

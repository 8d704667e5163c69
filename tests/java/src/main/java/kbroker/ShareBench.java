package kbroker;

import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One KafkaShareConsumer for benchmarks/bench_share_java.py: share-bench BOOTSTRAP TOPIC GROUP.
 * Implicit acknowledgement (each poll accepts what the previous one returned), the client's
 * defaults otherwise. Prints "first MILLIS" at its first record, then "count N" (records so far)
 * after each poll that returned some, until stdin closes; then it closes the consumer, which
 * acknowledges the last records.
 */
public final class ShareBench {
    private ShareBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4 || !args[0].equals("share-bench")) {
            System.err.println("usage: share-bench BOOTSTRAP TOPIC GROUP");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[3]);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "share-bench");
        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // until the harness closes stdin
                }
            } catch (java.io.IOException e) {
                // closed
            }
        });
        watcher.setDaemon(true);
        watcher.start();
        long count = 0;
        boolean first = true;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(
                p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(args[2]));
            while (watcher.isAlive()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                if (records.isEmpty()) {
                    continue;
                }
                if (first) {
                    System.out.println("first " + System.currentTimeMillis());
                    first = false;
                }
                count += records.count();
                System.out.println("count " + count);
                System.out.flush();
            }
        }
        System.exit(0);
    }
}

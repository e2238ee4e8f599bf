package moldau.jvm;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consume --topic (comma-separated) in --group with --protocol classic|consumer (KIP-848) and, for classic,
 * --assignor (e.g. cooperative-sticky), until --expect records arrived or --timeout-ms passed, or, with
 * --idle-ms, until no record came for that long after the first one, or, with --until-eof true, until its
 * standard input closes (the test's signal to leave the group). Commits synchronously after each poll
 * (--commit false: never). Prints "assigned"/"revoked" lines, one "record" line per record (unless
 * --quiet true) and a closing "done" line.
 */
public final class Consume {
    public static void main(String[] args) {
        Cli cli = new Cli(args);
        List<String> topics = Arrays.asList(cli.get("topic").split(","));
        int expect = cli.getInt("expect", Integer.MAX_VALUE);
        long timeoutMs = cli.getLong("timeout-ms", 60000);
        long idleMs = cli.getLong("idle-ms", 0);
        boolean quiet = cli.getBool("quiet");
        java.util.concurrent.atomic.AtomicBoolean eof = new java.util.concurrent.atomic.AtomicBoolean();
        if (cli.getBool("until-eof")) {
            Thread watcher = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                        continue;
                    }
                } catch (java.io.IOException e) {
                    // closed: the same as end of input
                }
                eof.set(true);
            });
            watcher.setDaemon(true);
            watcher.start();
        }
        boolean commit = Boolean.parseBoolean(cli.get("commit", "true"));
        Properties p = cli.config();
        p.put("group.id", cli.get("group"));
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.putIfAbsent("auto.offset.reset", "earliest");
        String protocol = cli.get("protocol", "classic");
        p.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            String assignor = cli.get("assignor", "cooperative-sticky");
            String cls = switch (assignor) {
                case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
                case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
                case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
                case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
                default -> assignor;
            };
            p.put("partition.assignment.strategy", cls);
        }
        int got = 0;
        long start = System.currentTimeMillis();
        long last = 0;
        String error = null;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(topics, new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    Cli.emit("event", "revoked", "partitions", names(parts));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    Cli.emit("event", "assigned", "partitions", names(parts));
                }
            });
            while (got < expect) {
                long now = System.currentTimeMillis();
                if (eof.get() || now - start > timeoutMs || (idleMs > 0 && last > 0 && now - last > idleMs)) {
                    break;
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    got++;
                    if (!quiet) {
                        Header h = r.headers().lastHeader("i");
                        Cli.emit("event", "record", "topic", r.topic(), "partition", r.partition(),
                                "offset", r.offset(), "key", str(r.key()), "value", str(r.value()),
                                "header", h == null ? null : str(h.value()));
                    }
                }
                if (!recs.isEmpty()) {
                    last = System.currentTimeMillis();
                    if (commit) {
                        consumer.commitSync();
                    }
                }
            }
        } catch (Exception e) {
            error = Cli.error(e);
        }
        Cli.emit("event", "done", "count", got, "error", error);
        System.exit(error == null ? 0 : 1);
    }

    static List<String> names(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(tp.topic() + ":" + tp.partition());
        }
        out.sort(null);
        return out;
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    private Consume() {
    }
}

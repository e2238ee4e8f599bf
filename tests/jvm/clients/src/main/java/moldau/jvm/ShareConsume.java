package moldau.jvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Share-group members (KIP-932, Kafka's KafkaShareConsumer) of --group on --topic (comma-separated), in
 * explicit acknowledgement mode; --members N of them (default 1), each a KafkaShareConsumer on its own
 * thread. A record whose offset is in --release (comma-separated) is released on its first delivery and
 * accepted after, one in --release-always is released at every delivery (until the delivery-count limit
 * archives it), one in --reject is rejected, every other one accepted; commitSync after each poll.
 *
 * <p>The members run until --expect acceptances or rejections happened (then --linger-ms more, still
 * acknowledging), or no record came for --idle-ms after the first one, or --timeout-ms passed, or, with
 * --stdin true, stdin closes. With --hold true a member acknowledges nothing: after its first poll with
 * records it prints a "held" line (the offsets) and waits to be killed.
 *
 * <p>Prints one "record" line per delivery (member, offset, delivery_count, ack) and a closing "done" line
 * (settled, the first error).
 */
public final class ShareConsume {
    private final Cli cli;
    private final List<String> topics;
    private final int expect;
    private final long timeoutMs;
    private final long idleMs;
    private final long lingerMs;
    private final boolean hold;
    private final Set<Long> release;
    private final Set<Long> releaseAlways;
    private final Set<Long> reject;
    private final Set<Long> released = ConcurrentHashMap.newKeySet();
    private final AtomicInteger settled = new AtomicInteger();
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicReference<String> error = new AtomicReference<>();
    private final long start = System.currentTimeMillis();
    private volatile long last;
    private volatile long reachedAt;

    private ShareConsume(Cli cli) {
        this.cli = cli;
        topics = Arrays.asList(cli.get("topic").split(","));
        expect = cli.getInt("expect", Integer.MAX_VALUE);
        timeoutMs = cli.getLong("timeout-ms", 60000);
        idleMs = cli.getLong("idle-ms", 0);
        lingerMs = cli.getLong("linger-ms", 0);
        hold = cli.getBool("hold");
        release = offsets(cli.get("release", ""));
        releaseAlways = offsets(cli.get("release-always", ""));
        reject = offsets(cli.get("reject", ""));
    }

    public static void main(String[] args) throws InterruptedException {
        Cli cli = new Cli(args);
        ShareConsume run = new ShareConsume(cli);
        if (cli.getBool("stdin")) {
            Thread watcher = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                        // until EOF
                    }
                } catch (java.io.IOException e) {
                    // closed
                }
                run.stop.set(true);
            });
            watcher.setDaemon(true);
            watcher.start();
        }
        List<Thread> members = new ArrayList<>();
        for (int i = 0; i < cli.getInt("members", 1); i++) {
            final int member = i;
            Thread t = new Thread(() -> run.member(member), "share-member-" + i);
            t.start();
            members.add(t);
        }
        for (Thread t : members) {
            t.join();
        }
        Cli.emit("event", "done", "settled", run.settled.get(), "error", run.error.get());
    }

    private boolean finished() {
        long now = System.currentTimeMillis();
        if (stop.get() || now - start >= timeoutMs) {
            return true;
        }
        if (idleMs > 0 && last > 0 && now - last > idleMs) {
            return true;
        }
        if (settled.get() >= expect) {
            if (reachedAt == 0) {
                reachedAt = now;
            }
            return now - reachedAt >= lingerMs;
        }
        return false;
    }

    private void member(int member) {
        Properties p = cli.config();
        p.put("group.id", cli.get("group"));
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(topics);
            while (!finished()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (hold && !records.isEmpty()) {
                    List<Long> held = new ArrayList<>();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        held.add(r.offset());
                    }
                    Cli.emit("event", "held", "member", member, "offsets", held);
                    Thread.sleep(Long.MAX_VALUE);
                }
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    last = System.currentTimeMillis();
                    AcknowledgeType ack = AcknowledgeType.ACCEPT;
                    if (reject.contains(r.offset())) {
                        ack = AcknowledgeType.REJECT;
                    } else if (releaseAlways.contains(r.offset())
                               || (release.contains(r.offset()) && released.add(r.offset()))) {
                        ack = AcknowledgeType.RELEASE;
                    }
                    if (ack != AcknowledgeType.RELEASE) {
                        settled.incrementAndGet();
                    }
                    consumer.acknowledge(r, ack);
                    Cli.emit("event", "record", "member", member, "topic", r.topic(), "partition",
                             r.partition(), "offset", r.offset(), "delivery_count",
                             r.deliveryCount().map(Short::intValue).orElse(-1), "ack", ack.toString());
                }
                if (!records.isEmpty()) {
                    consumer.commitSync(Duration.ofSeconds(10));
                }
            }
        } catch (Exception e) {
            error.compareAndSet(null, "member " + member + ": " + Cli.error(e));
        }
    }

    private static Set<Long> offsets(String csv) {
        Set<Long> out = new HashSet<>();
        for (String s : csv.split(",")) {
            if (!s.isBlank()) {
                out.add(Long.parseLong(s.trim()));
            }
        }
        return out;
    }
}

package moldau.jvm;

import java.time.Duration;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A share-group member (KIP-932, Kafka's KafkaShareConsumer) of --group on --topic (comma-separated), in
 * explicit acknowledgement mode: a record whose offset is in --release (comma-separated) is released on its
 * first delivery and accepted after, one in --reject is rejected, every other one accepted; commitSync after
 * each poll. Runs until --expect acceptances or rejections happened, or no record came for --idle-ms after
 * the first one, or --timeout-ms passed. Prints one "record" line per delivery (offset, delivery_count,
 * ack) and a closing "done" line.
 */
public final class ShareConsume {
    public static void main(String[] args) {
        Cli cli = new Cli(args);
        List<String> topics = Arrays.asList(cli.get("topic").split(","));
        int expect = cli.getInt("expect", Integer.MAX_VALUE);
        long timeoutMs = cli.getLong("timeout-ms", 60000);
        long idleMs = cli.getLong("idle-ms", 0);
        Set<Long> release = offsets(cli.get("release", ""));
        Set<Long> reject = offsets(cli.get("reject", ""));
        Properties p = cli.config();
        p.put("group.id", cli.get("group"));
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        int settled = 0;
        long start = System.currentTimeMillis();
        long last = 0;
        Set<Long> released = new HashSet<>();
        String error = null;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(topics);
            while (settled < expect && System.currentTimeMillis() - start < timeoutMs) {
                if (idleMs > 0 && last > 0 && System.currentTimeMillis() - last > idleMs) {
                    break;
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    last = System.currentTimeMillis();
                    AcknowledgeType ack = AcknowledgeType.ACCEPT;
                    if (reject.contains(r.offset())) {
                        ack = AcknowledgeType.REJECT;
                    } else if (release.contains(r.offset()) && released.add(r.offset())) {
                        ack = AcknowledgeType.RELEASE;
                    }
                    if (ack != AcknowledgeType.RELEASE) {
                        settled++;
                    }
                    consumer.acknowledge(r, ack);
                    Cli.emit("event", "record", "topic", r.topic(), "partition", r.partition(), "offset",
                             r.offset(), "delivery_count", r.deliveryCount().map(Short::intValue).orElse(-1),
                             "ack", ack.toString());
                }
                if (!records.isEmpty()) {
                    consumer.commitSync(Duration.ofSeconds(10));
                }
            }
        } catch (Exception e) {
            error = Cli.error(e);
        }
        Cli.emit("event", "done", "settled", settled, "error", error);
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

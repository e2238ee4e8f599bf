package moldau.jvm;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produce --count records "{prefix}-{i}" (key "k-{i}", header "i") to --topic with --acks 0|1|all and
 * --idempotent true|false; --transactional-id wraps them in one transaction (--abort true aborts it).
 * Prints one "sent" line per partition (first and last offset) and a closing "produced" line.
 */
public final class Produce {
    public static void main(String[] args) throws Exception {
        Cli cli = new Cli(args);
        String topic = cli.get("topic");
        int count = cli.getInt("count", 100);
        String prefix = cli.get("prefix", "java");
        int size = cli.getInt("size", 0);
        Properties p = cli.config();
        p.put("acks", cli.get("acks", "all"));
        String txn = cli.get("transactional-id", null);
        // a transactional producer is idempotent
        p.put("enable.idempotence", cli.get("idempotent", txn != null ? "true" : "false"));
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        if (txn != null) {
            p.put("transactional.id", txn);
        }
        int errors = 0;
        String firstError = null;
        Map<Integer, long[]> ranges = new TreeMap<>();
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            if (txn != null) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            List<Future<RecordMetadata>> acks = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                StringBuilder value = new StringBuilder(prefix).append('-').append(i);
                while (value.length() < size) {
                    value.append('.');
                }
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, null,
                        ("k-" + i).getBytes(StandardCharsets.UTF_8),
                        value.toString().getBytes(StandardCharsets.UTF_8));
                rec.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                acks.add(producer.send(rec));
            }
            producer.flush();
            for (Future<RecordMetadata> f : acks) {
                try {
                    RecordMetadata md = f.get();
                    long[] r = ranges.computeIfAbsent(md.partition(), k -> new long[] {Long.MAX_VALUE, -1, 0});
                    r[0] = Math.min(r[0], md.offset());
                    r[1] = Math.max(r[1], md.offset());
                    r[2]++;
                } catch (Exception e) {
                    errors++;
                    if (firstError == null) {
                        firstError = Cli.error(e);
                    }
                }
            }
            if (txn != null) {
                if (cli.getBool("abort")) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        for (Map.Entry<Integer, long[]> e : ranges.entrySet()) {
            long[] r = e.getValue();
            Cli.emit("event", "sent", "partition", e.getKey(), "first", r[0], "last", r[1], "count", r[2]);
        }
        Cli.emit("event", "produced", "count", count - errors, "errors", errors, "error", firstError,
                "seconds", (System.nanoTime() - start) / 1e9);
        System.exit(errors == 0 ? 0 : 1);
    }

    private Produce() {
    }
}

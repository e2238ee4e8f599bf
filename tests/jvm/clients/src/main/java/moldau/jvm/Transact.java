package moldau.jvm;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Consume-transform-produce exactly once: read --input in --group (read_committed), write "T:{value}" to
 * --output in transactions of up to --per-txn records with sendOffsetsToTransaction, until --expect records
 * were committed or --timeout-ms passed. --abort-first true aborts the first transaction and rewinds to the
 * group's committed offsets (its records must be processed again, once). Prints "committed"/"aborted" lines
 * and a closing "done" line.
 */
public final class Transact {
    public static void main(String[] args) {
        Cli cli = new Cli(args);
        String input = cli.get("input");
        String output = cli.get("output");
        int expect = cli.getInt("expect", Integer.MAX_VALUE);
        int perTxn = cli.getInt("per-txn", 50);
        long timeoutMs = cli.getLong("timeout-ms", 60000);
        boolean abortFirst = cli.getBool("abort-first");
        Properties cp = cli.config();
        cp.put("group.id", cli.get("group"));
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("isolation.level", "read_committed");
        cp.put("max.poll.records", Integer.toString(perTxn));
        Properties pp = cli.config();
        pp.put("transactional.id", cli.get("transactional-id"));
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        int committed = 0;
        int aborted = 0;
        String error = null;
        long start = System.currentTimeMillis();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            while (committed < expect && System.currentTimeMillis() - start < timeoutMs) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                int n = 0;
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String v = "T:" + new String(r.value(), StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(output, r.key(), v.getBytes(StandardCharsets.UTF_8)));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    n++;
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                if (abortFirst && aborted == 0) {
                    producer.abortTransaction();
                    aborted += n;
                    Cli.emit("event", "aborted", "records", n);
                    rewind(consumer);
                    continue;
                }
                producer.commitTransaction();
                committed += n;
                Cli.emit("event", "committed", "records", n);
            }
        } catch (Exception e) {
            error = Cli.error(e);
        }
        Cli.emit("event", "done", "committed", committed, "aborted", aborted, "error", error);
        System.exit(error == null ? 0 : 1);
    }

    /** Back to the group's committed offsets (the beginning where there is none). */
    static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        Set<TopicPartition> parts = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> done = consumer.committed(parts);
        for (TopicPartition tp : parts) {
            OffsetAndMetadata om = done.get(tp);
            if (om == null) {
                consumer.seekToBeginning(Collections.singleton(tp));
            } else {
                consumer.seek(tp, om.offset());
            }
        }
    }

    private Transact() {
    }
}

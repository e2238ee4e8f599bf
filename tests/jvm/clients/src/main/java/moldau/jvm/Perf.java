package moldau.jvm;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One measurement of bench/client_throughput.py with Kafka's Java client: --op produce (--records values of
 * --size bytes to partition 0 of --topic with --acks, after one acknowledged warm-up record, until flush()
 * returns with every record acknowledged) or --op consume (--records from offset 0 with assign(),
 * max.poll.records --max-poll, every value's length read). Prints {"seconds": wall, "cpu_seconds": the JVM's
 * CPU time} for the measured part, as the Python workers do.
 */
public final class Perf {
    public static void main(String[] args) throws Exception {
        Cli cli = new Cli(args);
        String topic = cli.get("topic");
        int n = cli.getInt("records", 100000);
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long t0;
        long c0;
        if (cli.get("op").equals("produce")) {
            Properties p = cli.config();
            p.put("acks", cli.get("acks", "1"));
            p.put("key.serializer", ByteArraySerializer.class.getName());
            p.put("value.serializer", ByteArraySerializer.class.getName());
            byte[] value = new byte[cli.getInt("size", 100)];
            java.util.Arrays.fill(value, (byte) 'v');
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
                t0 = System.nanoTime();
                c0 = os.getProcessCpuTime();
                java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
                for (int i = 0; i < n; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                        if (e != null) {
                            failed.incrementAndGet();
                        }
                    });
                }
                producer.flush();
                if (failed.get() > 0) {
                    throw new IllegalStateException(failed.get() + " records not acknowledged");
                }
            }
        } else {
            Properties p = cli.config();
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            p.put("enable.auto.commit", "false");
            p.put("max.poll.records", cli.get("max-poll", "500"));
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                consumer.partitionsFor(topic);
                t0 = System.nanoTime();
                c0 = os.getProcessCpuTime();
                consumer.assign(List.of(tp));
                consumer.seek(tp, 0);
                long got = 0;
                long bytes = 0;
                long deadline = System.currentTimeMillis() + 300000;
                while (got < n) {
                    ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(1000));
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        got++;
                        bytes += r.value().length;
                    }
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("consumed " + got + " of " + n + " in 300 s");
                    }
                }
                if (bytes < 0) {
                    throw new AssertionError();
                }
            }
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        double cpu = (os.getProcessCpuTime() - c0) / 1e9;
        Cli.emit("seconds", seconds, "cpu_seconds", cpu);
    }

    private Perf() {
    }
}

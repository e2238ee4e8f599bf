package moldau.jvm.apps;

import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * A Kafka Streams application on moldau, one of two topologies:
 *
 * <ul>
 *   <li>{@code --mode wordcount}: lines of {@code --input} split on whitespace, counted per word in the store
 *       "word-counts" (changelogged), every new count written to {@code --output} as (word, count);
 *   <li>{@code --mode windowed}: records of {@code --input} counted per key in tumbling event-time windows of
 *       {@code --window-ms} (store "window-counts", grace one hour), written to {@code --output} as
 *       ("key@windowStart", count).
 * </ul>
 *
 * Options: {@code --bootstrap}, {@code --app-id}, {@code --state-dir}, {@code --guarantee}
 * (default exactly_once_v2), {@code --threads}, {@code --replication} (internal topics; -1: the broker's
 * default), and any {@code --config key=value}. Prints one JSON line per state change
 * ({"event":"state","state":"RUNNING",...}) and per uncaught error, and runs until SIGTERM (or SIGKILL).
 */
public final class StreamsApp {
    private StreamsApp() {}

    static Topology wordCount(String input, String output) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).trim().split("\\s+")))
                .filter((k, word) -> !word.isEmpty())
                .groupBy((k, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return b.build();
    }

    static Topology windowedCount(String input, String output, long windowMs) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(windowMs), Duration.ofHours(1)))
                .count(Materialized.as("window-counts"))
                .toStream()
                .map((wk, count) -> KeyValue.pair(wk.key() + "@" + wk.window().start(), count))
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return b.build();
    }

    private static String json(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        Properties props = new Properties();
        for (int i = 0; i + 1 < args.length; i += 2) {
            String name = args[i].replaceFirst("^--", "");
            if (name.equals("config")) {
                String[] kv = args[i + 1].split("=", 2);
                props.put(kv[0], kv[1]);
            } else {
                opts.put(name, args[i + 1]);
            }
        }
        String mode = opts.getOrDefault("mode", "wordcount");
        String input = opts.get("input");
        String output = opts.get("output");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opts.getOrDefault("guarantee", "exactly_once_v2"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, opts.getOrDefault("threads", "1"));
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, opts.getOrDefault("replication", "-1"));
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.putIfAbsent(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        Topology topology = mode.equals("windowed")
                ? windowedCount(input, output, Long.parseLong(opts.getOrDefault("window-ms", "10000")))
                : wordCount(input, output);
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            emit("{\"event\":\"state\",\"state\":" + json(now.name()) + ",\"from\":" + json(before.name()) + "}");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"event\":\"error\",\"error\":" + json(String.valueOf(e)) + "}");
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            done.countDown();
        }));
        streams.start();
        done.await();
    }
}

// Workload 1 of the fault suite with the official Java client: an idempotent acks=all producer that
// streams "<partition>-<sequence>" values round robin over a topic's partitions and writes the same
// history as tests/faults/client.py's librdkafka producer, one JSON object a line:
//   {"t": <CLOCK_MONOTONIC seconds>, "type": "invoke"|"ok"|"fail"|"info", "p": .., "v": .., "offset": .., "error": ..}
// ok = acknowledged, fail = known not written, info = outcome unknown; a final {"type": "end", ...}.
// Usage: FaultProducer BOOTSTRAP TOPIC PARTITIONS SECONDS RATE HISTORY [STOP_FILE]
// Every wait is bounded: the loop by SECONDS (or the stop file), the final flush by close()'s timeout.

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class FaultProducer {
    // long enough that no record times out in a trial: an expired batch makes the producer bump its
    // epoch, and records re-sent under the new epoch can duplicate ones already in the log
    private static final int DELIVERY_TIMEOUT_MS = 120_000;

    private static Writer history;
    private static final long FLUSH_EVERY_NS = 250_000_000L;
    private static long lastFlush = System.nanoTime();
    private static final AtomicLong outstanding = new AtomicLong();
    private static final List<String> fatal = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        double seconds = Double.parseDouble(args[3]), rate = Double.parseDouble(args[4]);
        history = new BufferedWriter(new OutputStreamWriter(new FileOutputStream(args[5]), StandardCharsets.UTF_8), 1 << 16);
        Path stopFile = args.length > 6 ? Path.of(args[6]) : null;

        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(DELIVERY_TIMEOUT_MS));
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        config.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        config.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        config.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        config.put(ProducerConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MS_CONFIG, "5000");
        config.put(ProducerConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS_CONFIG, "5000");
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        int[] sequence = new int[partitions];
        long interval = (long) (1e9 / rate);
        long began = System.nanoTime(), nextSend = began;
        long count = 0;
        while (System.nanoTime() - began < seconds * 1e9 && fatalCount() == 0) {
            if (stopFile != null && Files.exists(stopFile)) break;
            int partition = (int) (count % partitions);
            String value = partition + "-" + sequence[partition];
            add("invoke", partition, value, null, null);
            outstanding.incrementAndGet();
            try {
                producer.send(new ProducerRecord<>(topic, partition, null, value.getBytes(StandardCharsets.UTF_8)),
                        (metadata, error) -> {
                            outstanding.decrementAndGet();
                            if (error == null) {
                                add("ok", partition, value, metadata.hasOffset() ? metadata.offset() : null, null);
                            } else {
                                add(definite(error) ? "fail" : "info", partition, value, null, name(error));
                            }
                        });
                sequence[partition]++;
            } catch (KafkaException | IllegalStateException error) {
                // thrown before the record was queued (a closed or fatally failed producer)
                outstanding.decrementAndGet();
                add("fail", partition, value, null, name(error));
                synchronized (fatal) { fatal.add(name(error)); }
            }
            count++;
            nextSend += interval;
            long wait = nextSend - System.nanoTime();
            if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
        }
        // close() waits for what is queued, at most this long, then fails the rest (their callbacks run)
        producer.close(Duration.ofMillis(Math.min(DELIVERY_TIMEOUT_MS + 10_000, 150_000)));
        synchronized (FaultProducer.class) {
            history.write("{\"t\":" + now() + ",\"type\":\"end\",\"unflushed\":" + outstanding.get()
                    + ",\"fatal\":" + jsonList(fatal) + "}\n");
            history.close();
        }
    }

    private static int fatalCount() {
        synchronized (fatal) { return fatal.size(); }
    }

    // Errors after which the record is known not to be in the log; any other leaves it unknown.
    private static boolean definite(Exception error) {
        return error instanceof RecordTooLargeException || error instanceof RecordBatchTooLargeException
                || error instanceof AuthorizationException || error instanceof SerializationException
                || error instanceof InvalidTopicException;
    }

    private static String name(Throwable error) {
        return error.getClass().getSimpleName() + ": " + error.getMessage();
    }

    private static double now() {
        return System.nanoTime() / 1e9;      // CLOCK_MONOTONIC, as Python's time.monotonic()
    }

    private static synchronized void add(String type, int partition, String value, Long offset, String error) {
        StringBuilder line = new StringBuilder(96);
        line.append("{\"t\":").append(now()).append(",\"type\":\"").append(type).append("\",\"p\":").append(partition)
            .append(",\"v\":\"").append(value).append('"');
        if (offset != null) line.append(",\"offset\":").append(offset);
        if (error != null) line.append(",\"error\":").append(quote(error));
        line.append("}\n");
        try {
            history.write(line.toString());
            // the runner watches the file (it strikes at the first acknowledgement): never let an
            // event sit in the buffer for long
            long nanos = System.nanoTime();
            if (nanos - lastFlush >= FLUSH_EVERY_NS) {
                history.flush();
                lastFlush = nanos;
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    private static String jsonList(List<String> items) {
        StringBuilder out = new StringBuilder("[");
        for (String item : items) out.append(out.length() > 1 ? "," : "").append(quote(item));
        return out.append(']').toString();
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : String.valueOf(text).toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }
}

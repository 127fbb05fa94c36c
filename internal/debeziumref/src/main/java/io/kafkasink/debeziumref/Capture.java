package io.kafkasink.debeziumref;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;

import com.fasterxml.jackson.databind.ObjectMapper;

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;

/**
 * Capture runs the Debezium PostgreSQL connector as an Embedded Engine and
 * writes every record it emits as one JSON line, in emission order:
 *
 * <pre>{"topic":"...","key":KEY,"value":VALUE,"headers":[{"key":"...","value":"..."}]}</pre>
 *
 * KEY and VALUE are the bytes Kafka Connect's JsonConverter produces for the
 * record (configured as a Connect worker would: isKey for the key, the run's
 * schemas.enable for both), embedded verbatim, or null where the converter
 * returns null (a tombstone's value). Header values are what Connect's
 * default header converter, SimpleHeaderConverter, produces, as a UTF-8
 * string. So the file holds exactly what a Kafka Connect worker with
 * JsonConverter would have written to Kafka.
 *
 * <p>With harness.converter naming another Converter class (e.g. Apicurio's
 * io.apicurio.registry.utils.converter.AvroConverter, built with the Maven
 * profile "avro"), that converter writes key and value instead, configured
 * with the harness.converter.* properties (prefix removed; isKey for the
 * key), and KEY and VALUE are its bytes in base64 (JSON strings), or null.
 *
 * <p>Usage: {@code Capture <run.properties>}. Keys starting with "harness."
 * steer the run; every other key is passed to the engine unchanged:
 *
 * <pre>
 * harness.output                  the JSON-lines file to write (required)
 * harness.schemas.enable          JsonConverter schemas.enable for key and value (true|false, required
 *                                 unless harness.converter is set)
 * harness.converter               a Converter class for key and value instead of JsonConverter
 * harness.converter.*             that converter's configuration, for key and value
 * harness.after.snapshot.command  a bash command run once the initial snapshot is complete
 *                                 and streaming is connected (e.g. psql -f workload-changes.sql);
 *                                 with snapshot.mode=no_data, once streaming is connected
 * harness.stop.topic              the capture ends after the first record on this topic (required)
 * harness.idle.ms                 then waits until no record came for this long (default 3000)
 * harness.timeout.s               the whole run fails after this long (default 300)
 * </pre>
 *
 * The exit status is 0 only when the engine started, the command succeeded,
 * the stop record arrived, and the engine stopped without error.
 */
public final class Capture {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path output;
    private final Converter keyConverter;
    private final Converter valueConverter;
    // binary: the converter is not JsonConverter; its bytes are written in base64.
    private final boolean binary;
    private final SimpleHeaderConverter headerConverter = new SimpleHeaderConverter();
    private final String stopTopic;

    private final Object lock = new Object();
    private BufferedWriter writer;
    private long records;
    private long lastRecordNanos = System.nanoTime();
    private final CountDownLatch stopSeen = new CountDownLatch(1);
    private final CountDownLatch engineDone = new CountDownLatch(1);
    private final AtomicReference<Throwable> failure = new AtomicReference<>();

    private Capture(Path output, String converterClass, Map<String, Object> conf, String stopTopic) throws Exception {
        this.output = output;
        this.stopTopic = stopTopic;
        binary = converterClass != null;
        if (binary) {
            Class<?> c = Class.forName(converterClass);
            keyConverter = (Converter) c.getDeclaredConstructor().newInstance();
            valueConverter = (Converter) c.getDeclaredConstructor().newInstance();
        } else {
            keyConverter = new JsonConverter();
            valueConverter = new JsonConverter();
        }
        keyConverter.configure(conf, true);
        valueConverter.configure(conf, false);
        headerConverter.configure(Map.of());
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: Capture <run.properties>");
            System.exit(2);
        }
        Properties all = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(args[0]))) {
            all.load(in);
        }
        Properties engine = new Properties();
        for (String k : all.stringPropertyNames()) {
            if (!k.startsWith("harness.")) {
                engine.setProperty(k, all.getProperty(k));
            }
        }
        String converterClass = all.getProperty("harness.converter");
        Map<String, Object> conf = new HashMap<>();
        if (converterClass == null || converterClass.isEmpty()) {
            converterClass = null;
            conf.put("schemas.enable", Boolean.toString(Boolean.parseBoolean(required(all, "harness.schemas.enable"))));
        } else {
            String prefix = "harness.converter.";
            for (String k : all.stringPropertyNames()) {
                if (k.startsWith(prefix)) {
                    conf.put(k.substring(prefix.length()), all.getProperty(k));
                }
            }
        }
        Capture c = new Capture(
                Path.of(required(all, "harness.output")),
                converterClass, conf,
                required(all, "harness.stop.topic"));
        int status = c.run(engine,
                all.getProperty("harness.after.snapshot.command", ""),
                Long.parseLong(all.getProperty("harness.idle.ms", "3000")),
                Long.parseLong(all.getProperty("harness.timeout.s", "300")));
        System.exit(status);
    }

    private static String required(Properties p, String key) {
        String v = p.getProperty(key);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("harness: property " + key + " is required");
        }
        return v;
    }

    private int run(Properties props, String afterSnapshot, long idleMillis, long timeoutSeconds) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        String server = required(props, "topic.prefix");
        writer = Files.newBufferedWriter(output, StandardCharsets.UTF_8);
        ExecutorService executor = Executors.newSingleThreadExecutor();
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(props)
                .notifying(new DebeziumEngine.ChangeConsumer<RecordChangeEvent<SourceRecord>>() {
                    @Override
                    public void handleBatch(List<RecordChangeEvent<SourceRecord>> batch,
                            DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
                            throws InterruptedException {
                        for (RecordChangeEvent<SourceRecord> r : batch) {
                            write(r.record());
                            committer.markProcessed(r);
                        }
                        committer.markBatchFinished();
                    }

                    // Tombstones are part of what Debezium emits: keep them.
                    @Override
                    public boolean supportsTombstoneEvents() {
                        return true;
                    }
                })
                .using((success, message, error) -> {
                    if (!success) {
                        failure.compareAndSet(null, error != null ? error : new IllegalStateException(message));
                    }
                    System.err.println("harness: engine finished: success=" + success + " " + message);
                    engineDone.countDown();
                })
                .build();
        int status = 1;
        try {
            executor.execute(engine);
            // snapshot.mode=no_data reads no rows, and Debezium never sets
            // SnapshotCompleted then: streaming connected is the start.
            if (!"no_data".equals(props.getProperty("snapshot.mode"))) {
                awaitMetric(server, "snapshot", "SnapshotCompleted", deadline);
            }
            awaitMetric(server, "streaming", "Connected", deadline);
            System.err.println("harness: snapshot complete and streaming connected after " + count() + " records");
            if (!afterSnapshot.isEmpty()) {
                runCommand(afterSnapshot);
            }
            if (!await(stopSeen, deadline)) {
                throw new IllegalStateException("no record on " + stopTopic + " before the timeout; "
                        + count() + " records so far");
            }
            awaitIdle(idleMillis, deadline);
            status = 0;
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        } finally {
            try {
                engine.close();
            } catch (IllegalStateException e) {
                // Already shut down: the engine failed, and said so
                // through the completion callback (failure).
            }
            if (!engineDone.await(60, TimeUnit.SECONDS)) {
                failure.compareAndSet(null, new IllegalStateException("engine did not stop within 60 s"));
            }
            executor.shutdown();
            synchronized (lock) {
                writer.close();
            }
        }
        Throwable t = failure.get();
        if (t != null) {
            System.err.println("harness: FAILED after " + count() + " records:");
            t.printStackTrace();
            return 1;
        }
        System.err.println("harness: wrote " + count() + " records to " + output);
        return status;
    }

    private void write(SourceRecord r) {
        try {
            byte[] key = keyConverter.fromConnectData(r.topic(), r.keySchema(), r.key());
            byte[] value = valueConverter.fromConnectData(r.topic(), r.valueSchema(), r.value());
            StringBuilder line = new StringBuilder(256);
            line.append("{\"topic\":").append(JSON.writeValueAsString(r.topic()));
            line.append(",\"key\":").append(raw(key));
            line.append(",\"value\":").append(raw(value));
            line.append(",\"headers\":[");
            boolean first = true;
            for (Header h : r.headers()) {
                byte[] hv = headerConverter.fromConnectHeader(r.topic(), h.key(), h.schema(), h.value());
                if (!first) {
                    line.append(',');
                }
                first = false;
                line.append("{\"key\":").append(JSON.writeValueAsString(h.key()));
                line.append(",\"value\":").append(hv == null ? "null"
                        : JSON.writeValueAsString(new String(hv, StandardCharsets.UTF_8)));
                line.append('}');
            }
            line.append("]}\n");
            synchronized (lock) {
                writer.write(line.toString());
                writer.flush();
                records++;
                lastRecordNanos = System.nanoTime();
            }
            if (r.topic().equals(stopTopic)) {
                stopSeen.countDown();
            }
        } catch (IOException e) {
            failure.compareAndSet(null, e);
            stopSeen.countDown();
        }
    }

    private String raw(byte[] b) {
        if (b == null) {
            return "null";
        }
        if (binary) {
            return "\"" + Base64.getEncoder().encodeToString(b) + "\"";
        }
        return new String(b, StandardCharsets.UTF_8);
    }

    private long count() {
        synchronized (lock) {
            return records;
        }
    }

    /**
     * awaitMetric waits until the connector's JMX metric of context (snapshot
     * or streaming) reports attribute true, failing early if the engine
     * stopped.
     */
    private void awaitMetric(String server, String context, String attribute, long deadline) throws Exception {
        MBeanServer mbeans = ManagementFactory.getPlatformMBeanServer();
        ObjectName pattern = new ObjectName("debezium.postgres:type=connector-metrics,context=" + context
                + ",server=" + server + ",*"); // ",*": newer releases add a task key
        while (System.nanoTime() < deadline) {
            if (engineDone.getCount() == 0 || failure.get() != null) {
                throw new IllegalStateException("engine stopped before " + context + " " + attribute, failure.get());
            }
            for (ObjectName n : mbeans.queryNames(pattern, null)) {
                if (Boolean.TRUE.equals(mbeans.getAttribute(n, attribute))) {
                    return;
                }
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("timed out waiting for " + context + " metric " + attribute);
    }

    private void runCommand(String command) throws Exception {
        System.err.println("harness: running: " + command);
        Process p = new ProcessBuilder("bash", "-c", command).inheritIO().start();
        int rc = p.waitFor();
        if (rc != 0) {
            throw new IllegalStateException("command exited " + rc + ": " + command);
        }
    }

    private boolean await(CountDownLatch latch, long deadline) throws InterruptedException {
        while (System.nanoTime() < deadline) {
            if (latch.await(100, TimeUnit.MILLISECONDS)) {
                return failure.get() == null;
            }
            if (engineDone.getCount() == 0 || failure.get() != null) {
                return false;
            }
        }
        return false;
    }

    private void awaitIdle(long idleMillis, long deadline) throws InterruptedException {
        long idle = TimeUnit.MILLISECONDS.toNanos(idleMillis);
        while (System.nanoTime() < deadline) {
            long last;
            synchronized (lock) {
                last = lastRecordNanos;
            }
            if (System.nanoTime() - last >= idle) {
                return;
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException("records did not stop before the timeout");
    }
}

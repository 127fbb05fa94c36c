package io.kafkasink.debeziumref;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;

/**
 * Produce runs the Debezium PostgreSQL connector as an Embedded Engine and
 * writes its records to Kafka as a Kafka Connect worker does: key and value
 * through JsonConverter (the run's schemas.enable), headers through
 * SimpleHeaderConverter, and a producer with the settings Connect's Worker
 * gives its source tasks (acks=all, max.in.flight.requests.per.connection=1,
 * unbounded retries and timeouts). Each batch is flushed before the engine
 * may commit its offsets, as Connect commits offsets only for acknowledged
 * records. It is the Debezium side of scripts/bench-debezium.sh.
 *
 * <p>Usage: {@code Produce <run.properties>}. Keys starting with "harness."
 * steer the run; every other key is passed to the engine unchanged:
 *
 * <pre>
 * harness.bootstrap.servers   the Kafka brokers (required)
 * harness.schemas.enable      JsonConverter schemas.enable (true|false, required)
 * harness.expect              stop once this many records are acknowledged (required)
 * harness.timeout.s           the run fails after this long (default 600)
 * </pre>
 *
 * It prints "produce: N records acknowledged in S s" and exits 0 once the
 * expected records are acknowledged and the engine stopped; 1 otherwise.
 */
public final class Produce {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: Produce <run.properties>");
            System.exit(2);
        }
        Properties all = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(args[0]))) {
            all.load(in);
        }
        Properties engineProps = new Properties();
        for (String k : all.stringPropertyNames()) {
            if (!k.startsWith("harness.")) {
                engineProps.setProperty(k, all.getProperty(k));
            }
        }
        long expect = Long.parseLong(required(all, "harness.expect"));
        long timeoutSeconds = Long.parseLong(all.getProperty("harness.timeout.s", "600"));
        Map<String, Object> conf = new HashMap<>();
        conf.put("schemas.enable", required(all, "harness.schemas.enable"));
        JsonConverter keyConverter = new JsonConverter();
        JsonConverter valueConverter = new JsonConverter();
        keyConverter.configure(conf, true);
        valueConverter.configure(conf, false);
        SimpleHeaderConverter headerConverter = new SimpleHeaderConverter();
        headerConverter.configure(Map.of());

        // Kafka Connect's Worker.baseProducerConfigs for source tasks.
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, required(all, "harness.bootstrap.servers"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(Integer.MAX_VALUE));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Long.toString(Long.MAX_VALUE));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Integer.toString(Integer.MAX_VALUE));

        AtomicLong acked = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(1);
        CountDownLatch engineDone = new CountDownLatch(1);
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                    .using(engineProps)
                    .notifying(new DebeziumEngine.ChangeConsumer<RecordChangeEvent<SourceRecord>>() {
                        @Override
                        public void handleBatch(List<RecordChangeEvent<SourceRecord>> batch,
                                DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
                                throws InterruptedException {
                            List<RecordChangeEvent<SourceRecord>> sent = new ArrayList<>(batch.size());
                            for (RecordChangeEvent<SourceRecord> e : batch) {
                                SourceRecord r = e.record();
                                RecordHeaders headers = new RecordHeaders();
                                for (Header h : r.headers()) {
                                    headers.add(h.key(), headerConverter.fromConnectHeader(r.topic(), h.key(), h.schema(), h.value()));
                                }
                                producer.send(new ProducerRecord<>(r.topic(), null,
                                        keyConverter.fromConnectData(r.topic(), r.keySchema(), r.key()),
                                        valueConverter.fromConnectData(r.topic(), r.valueSchema(), r.value()),
                                        headers), (md, err) -> {
                                            if (err != null) {
                                                failure.compareAndSet(null, err);
                                                done.countDown();
                                            } else if (acked.incrementAndGet() >= expect) {
                                                done.countDown();
                                            }
                                        });
                                sent.add(e);
                            }
                            producer.flush();
                            for (RecordChangeEvent<SourceRecord> e : sent) {
                                committer.markProcessed(e);
                            }
                            committer.markBatchFinished();
                        }

                        @Override
                        public boolean supportsTombstoneEvents() {
                            return true;
                        }
                    })
                    .using((success, message, error) -> {
                        if (!success) {
                            failure.compareAndSet(null, error != null ? error : new IllegalStateException(message));
                            done.countDown();
                        }
                        engineDone.countDown();
                    })
                    .build();
            ExecutorService executor = Executors.newSingleThreadExecutor();
            executor.execute(engine);
            boolean reached = done.await(timeoutSeconds, TimeUnit.SECONDS);
            double seconds = (System.nanoTime() - start) / 1e9;
            engine.close();
            engineDone.await(60, TimeUnit.SECONDS);
            executor.shutdown();
            if (failure.get() != null || !reached) {
                System.err.println("produce: FAILED after " + acked.get() + " of " + expect + " records acknowledged"
                        + (reached ? "" : " (timed out after " + timeoutSeconds + " s)"));
                if (failure.get() != null) {
                    failure.get().printStackTrace();
                }
                System.exit(1);
            }
            System.err.printf("produce: %d records acknowledged in %.2f s%n", acked.get(), seconds);
        }
        System.exit(0);
    }

    private static String required(Properties p, String key) {
        String v = p.getProperty(key);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("harness: property " + key + " is required");
        }
        return v;
    }
}

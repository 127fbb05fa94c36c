package io.kafkasink.debeziumconsumer;

import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.flink.formats.common.TimestampFormat;
import org.apache.flink.formats.json.JsonRowDataDeserializationSchema;
import org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.utils.LogicalTypeParser;
import org.apache.flink.table.types.utils.TypeConversions;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Consume runs records that claim to be Debezium's through two real
 * Debezium-JSON consumers and fails on the first one either cannot read:
 *
 * <ol>
 * <li>Kafka Connect's {@code JsonConverter.toConnectData}, as a Kafka
 * Connect sink connector reading a Debezium topic would, for the key
 * (configured with isKey) and the value, with the run's schemas.enable. With
 * schemas.enable=true every key and value must carry its Connect schema
 * ({"schema":...,"payload":...}). What it read is written back with
 * fromConnectData and must be the same JSON: JsonConverter reads some
 * values its schema does not fit without an error (the text "infinity"
 * in an int32 field as 0), which acceptance alone would let pass. The one
 * loss Kafka Connect has on Debezium's own records, a non-finite float
 * written as "NaN"/"Infinity" and read as 0, is not counted.</li>
 * <li>Flink's {@code debezium-json} format (flink-json's
 * DebeziumJsonDeserializationSchema, debezium-json.schema-include set to
 * the run's schemas.enable, ignore-parse-errors false, as a Flink SQL table
 * over the topic would read it) for the values of the topics given a row
 * type with --flink. Every change becomes Flink RowData rows
 * (INSERT, UPDATE_BEFORE + UPDATE_AFTER, DELETE), which are applied to a
 * table keyed by the declared key fields, as a Flink upsert sink would:
 * an INSERT of a key already there, and an UPDATE_BEFORE or DELETE of a key
 * that is not, are failures too.</li>
 * </ol>
 *
 * <p>Records come from a JSON-lines file in the form of testdata/debezium's
 * golden files ({"topic","key","value","headers"}, key and value embedded
 * JSON or null), or from topics of a Kafka cluster read from their start to
 * their end with isolation.level=read_committed, as a Debezium consumer
 * reads an exactly-once producer's topics.
 *
 * <pre>
 * Consume --schemas true|false (--file PATH | --brokers HOST:PORT,... --topics T1,T2,...)
 *         [--flink TOPIC=KEY1,KEY2=ROW&lt;...&gt;]...
 * </pre>
 *
 * <p>On success it prints one JSON object to stdout: per topic, the records
 * read, tombstones, keys and values JsonConverter accepted, Flink's rows by
 * kind and the table they leave (each row an object of the declared
 * fields), and exits 0. It exits 1, naming the record (file line, or topic,
 * partition and offset) and the exception, on the first record a consumer
 * refuses, and also when it read no record at all; 2 on bad arguments.
 */
public final class Consume {
    private static final ObjectMapper JSON = new ObjectMapper();
    /**
     * LINES reads the golden files' lines keeping every number as written
     * (no rounding through double), so an embedded key or value is
     * re-serialized with the same numbers.
     */
    private static final ObjectMapper LINES = JsonMapper.builder()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .nodeFactory(JsonNodeFactory.withExactBigDecimals(true))
            .build();

    /** One record to check, and where it came from (for the failure message). */
    private record Rec(String where, String topic, byte[] key, byte[] value) {
    }

    /** A topic Flink reads: its declared row type and key fields. */
    private static final class FlinkTable {
        final RowType rowType;
        final int[] keyFields;
        final DebeziumJsonDeserializationSchema schema;
        /** Flink's json format over the record keys (key.format=json), null with schemas.enable=true. */
        final JsonRowDataDeserializationSchema keySchema;
        final RowType keyType;
        final Map<String, Long> kinds = new LinkedHashMap<>();
        /** The table the changes leave: rendered key to rendered row, sorted by key. */
        final Map<String, ObjectNode> rows = new TreeMap<>();

        FlinkTable(RowType rowType, int[] keyFields, boolean schemaInclude) throws Exception {
            this.rowType = rowType;
            this.keyFields = keyFields;
            // The produced type information is only handed back by
            // getProducedType; a Flink job would pass InternalTypeInfo, which
            // lives in flink-table-runtime (a cluster's worth of jars).
            this.schema = new DebeziumJsonDeserializationSchema(
                    TypeConversions.fromLogicalToDataType(rowType), List.of(),
                    TypeInformation.of(RowData.class), schemaInclude, false, TimestampFormat.ISO_8601);
            this.schema.open(null);
            List<RowType.RowField> keyFieldTypes = new ArrayList<>();
            for (int i : keyFields) {
                keyFieldTypes.add(rowType.getFields().get(i));
            }
            this.keyType = new RowType(false, keyFieldTypes);
            if (schemaInclude) {
                // Flink's json key format has no schema-include option.
                this.keySchema = null;
            } else {
                this.keySchema = new JsonRowDataDeserializationSchema(keyType, TypeInformation.of(RowData.class),
                        true, false, TimestampFormat.ISO_8601);
                this.keySchema.open(null);
            }
            for (RowKind k : RowKind.values()) {
                kinds.put(k.name(), 0L);
            }
        }
    }

    /** What was read of one topic. */
    private static final class TopicStats {
        long records, tombstones, connectKeys, connectValues;
    }

    private final JsonConverter keyConverter = new JsonConverter();
    private final JsonConverter valueConverter = new JsonConverter();
    private final Map<String, FlinkTable> flink;
    private final Map<String, TopicStats> stats = new TreeMap<>();

    private Consume(boolean schemasEnable, Map<String, FlinkTable> flink) {
        Map<String, Object> conf = Map.of("schemas.enable", Boolean.toString(schemasEnable));
        keyConverter.configure(conf, true);
        valueConverter.configure(conf, false);
        this.flink = flink;
    }

    public static void main(String[] args) throws Exception {
        // JsonConverter logs its whole configuration at INFO, twice.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        Map<String, List<String>> opts;
        boolean schemas;
        Map<String, FlinkTable> flink = new HashMap<>();
        try {
            opts = parseArgs(args);
            String s = single(opts, "--schemas");
            if (!s.equals("true") && !s.equals("false")) {
                throw new IllegalArgumentException("--schemas " + s + ": want true or false");
            }
            schemas = Boolean.parseBoolean(s);
            if (opts.containsKey("--file") == opts.containsKey("--brokers")) {
                throw new IllegalArgumentException("give exactly one of --file and --brokers");
            }
            if (opts.containsKey("--brokers") != opts.containsKey("--topics")) {
                throw new IllegalArgumentException("--brokers and --topics go together");
            }
            for (String spec : opts.getOrDefault("--flink", List.of())) {
                String[] parts = spec.split("=", 3);
                if (parts.length != 3) {
                    throw new IllegalArgumentException("--flink " + spec + ": want TOPIC=KEY1,KEY2=ROW<...>");
                }
                LogicalType t = LogicalTypeParser.parse(parts[2], Consume.class.getClassLoader());
                if (!(t instanceof RowType rowType)) {
                    throw new IllegalArgumentException("--flink " + spec + ": the type must be a ROW<...>");
                }
                String[] keys = parts[1].split(",");
                int[] keyFields = new int[keys.length];
                for (int i = 0; i < keys.length; i++) {
                    keyFields[i] = rowType.getFieldIndex(keys[i]);
                    if (keyFields[i] < 0) {
                        throw new IllegalArgumentException("--flink " + spec + ": key field " + keys[i]
                                + " is not a field of the row type");
                    }
                }
                flink.put(parts[0], new FlinkTable(rowType, keyFields, schemas));
            }
        } catch (RuntimeException e) { // bad arguments, or a row type Flink cannot parse
            System.err.println("consume: " + e.getMessage());
            System.err.println("usage: Consume --schemas true|false (--file PATH | --brokers HOSTS --topics T1,T2)"
                    + " [--flink TOPIC=KEY1,KEY2=ROW<...>]...");
            System.exit(2);
            return;
        }
        Consume c = new Consume(schemas, flink);
        try {
            if (opts.containsKey("--file")) {
                c.readFile(Path.of(single(opts, "--file")));
            } else {
                c.readKafka(single(opts, "--brokers"), List.of(single(opts, "--topics").split(",")));
            }
        } catch (RecordException e) {
            System.err.println("consume: FAILED: " + e.getMessage());
            e.getCause().printStackTrace();
            // Again after the stack trace, so that the last line says it.
            System.err.println("consume: FAILED: " + e.getMessage());
            System.exit(1);
        }
        long total = c.stats.values().stream().mapToLong(s -> s.records).sum();
        if (total == 0) {
            System.err.println("consume: FAILED: no record was read, so nothing was checked");
            System.exit(1);
        }
        for (String topic : flink.keySet()) {
            if (!c.stats.containsKey(topic)) {
                System.err.println("consume: FAILED: --flink names topic " + topic + ", which had no record");
                System.exit(1);
            }
        }
        System.out.println(JSON.writeValueAsString(c.summary()));
        System.err.println("consume: all " + total + " records accepted");
    }

    /** RecordException names the record a consumer refused; its cause is the consumer's exception. */
    private static final class RecordException extends Exception {
        RecordException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private static final List<String> OPTIONS =
            List.of("--schemas", "--file", "--brokers", "--topics", "--flink");

    private static Map<String, List<String>> parseArgs(String[] args) {
        Map<String, List<String>> out = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!OPTIONS.contains(args[i])) {
                throw new IllegalArgumentException("unknown argument " + args[i] + ": want one of " + OPTIONS);
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(args[i] + " needs a value");
            }
            out.computeIfAbsent(args[i], k -> new ArrayList<>()).add(args[i + 1]);
        }
        return out;
    }

    private static String single(Map<String, List<String>> opts, String name) {
        List<String> v = opts.get(name);
        if (v == null || v.size() != 1) {
            throw new IllegalArgumentException(name + " is required, once");
        }
        return v.get(0);
    }

    private void readFile(Path file) throws Exception {
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            String line;
            for (int n = 1; (line = in.readLine()) != null; n++) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode rec;
                try {
                    rec = LINES.readTree(line);
                } catch (Exception e) {
                    throw new RecordException(file + " line " + n + ": not a JSON line: " + e, e);
                }
                String where = file + " line " + n + " (topic " + rec.path("topic").asText() + ")";
                check(new Rec(where, rec.path("topic").asText(), embedded(rec.get("key")), embedded(rec.get("value"))));
            }
        }
    }

    /** embedded returns the bytes of a key or value the golden files embed as JSON, null for JSON null. */
    private static byte[] embedded(JsonNode n) throws Exception {
        return n == null || n.isNull() ? null : LINES.writeValueAsBytes(n);
    }

    private void readKafka(String brokers, List<String> topics) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> parts = new ArrayList<>();
            for (String topic : topics) {
                List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
                if (infos == null || infos.isEmpty()) {
                    throw new IllegalStateException("topic " + topic + " does not exist on " + brokers);
                }
                for (PartitionInfo info : infos) {
                    parts.add(new TopicPartition(topic, info.partition()));
                }
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            // With read_committed, the end offsets are the last stable
            // offsets: everything committed when the read began.
            Map<TopicPartition, Long> end = consumer.endOffsets(parts, Duration.ofSeconds(30));
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (!reachedEnd(consumer, end)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("did not reach the end offsets " + end + " within 120 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    check(new Rec("topic " + r.topic() + " partition " + r.partition() + " offset " + r.offset(),
                            r.topic(), r.key(), r.value()));
                }
            }
        }
    }

    private static boolean reachedEnd(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private void check(Rec r) throws RecordException {
        TopicStats s = stats.computeIfAbsent(r.topic(), k -> new TopicStats());
        s.records++;
        String what = r.where();
        connect(what, "key", keyConverter, s, r.topic(), r.key());
        s.connectKeys++;
        connect(what, "value", valueConverter, s, r.topic(), r.value());
        s.connectValues++;
        if (r.value() == null) {
            s.tombstones++;
        }
        FlinkTable ft = flink.get(r.topic());
        if (ft == null) {
            return;
        }
        List<RowData> rows = new ArrayList<>();
        try {
            ft.schema.deserialize(r.value(), new Collector<RowData>() {
                @Override
                public void collect(RowData row) {
                    rows.add(row);
                }

                @Override
                public void close() {
                }
            });
        } catch (Exception e) {
            throw new RecordException(what + ": Flink debezium-json refused the value: " + rootCause(e), e);
        }
        String key = null;
        if (ft.keySchema != null) {
            try {
                key = render(ft.keyType, ft.keySchema.deserialize(r.key())).toString();
            } catch (Exception e) {
                throw new RecordException(what + ": Flink json (key.format) refused the key: " + rootCause(e), e);
            }
        }
        for (RowData row : rows) {
            String rowKey = keyOf(ft, (ObjectNode) render(ft.rowType, row)).toString();
            if (key != null && !key.equals(rowKey)) {
                throw new RecordException(what + ": the record key " + key + " is not the key of its row "
                        + rowKey, new IllegalStateException("key mismatch"));
            }
            ft.kinds.merge(row.getRowKind().name(), 1L, Long::sum);
            try {
                apply(ft, row);
            } catch (IllegalStateException e) {
                throw new RecordException(what + ": Flink's changelog does not apply: " + e.getMessage(), e);
            }
        }
    }

    /**
     * connect reads a key or value with JsonConverter.toConnectData, as a
     * Kafka Connect sink does, and writes what it read back with
     * fromConnectData: the two must be the same JSON. JsonConverter does
     * not refuse every value its schema does not fit (it reads the text
     * "infinity" as the int32 0), so acceptance alone would hide a value a
     * Connect sink reads as something else.
     */
    private void connect(String what, String part, JsonConverter converter, TopicStats s, String topic, byte[] data)
            throws RecordException {
        SchemaAndValue read;
        byte[] back;
        try {
            read = converter.toConnectData(topic, data);
            back = converter.fromConnectData(topic, read.schema(), read.value());
        } catch (Exception e) {
            throw new RecordException(what + ": Kafka Connect JsonConverter refused the " + part + ": " + rootCause(e), e);
        }
        if (data == null && back == null) {
            return;
        }
        List<String> diffs = new ArrayList<>();
        if (data == null || back == null) {
            diffs.add("null read as a document, or the other way round");
        } else {
            try {
                differences("", LINES.readTree(data), LINES.readTree(back), diffs);
            } catch (Exception e) {
                throw new RecordException(what + ": Kafka Connect JsonConverter wrote the " + part
                        + " back as JSON that does not parse: " + rootCause(e), e);
            }
        }
        if (!diffs.isEmpty()) {
            String d = diffs.get(0);
            throw new RecordException(what + ": Kafka Connect JsonConverter read the " + part
                    + " as something else than it holds: " + d, new IllegalStateException(d));
        }
    }

    /**
     * differences adds to out where two JSON documents differ, numbers
     * compared by value (1 and 1.0 are the same), each as
     * "PATH: WRITTEN read as READ".
     */
    private static void differences(String path, JsonNode a, JsonNode b, List<String> out) {
        if (a.isTextual() && NON_FINITE.contains(a.asText()) && b.isNumber() && b.doubleValue() == 0) {
            // JsonConverter writes a non-finite float32/float64 as the text
            // "NaN", "Infinity" or "-Infinity" and reads that text back as
            // 0: Kafka Connect's own loss, on Debezium's records as well.
            return;
        }
        if (a.isNumber() && b.isNumber()) {
            if (a.decimalValue().compareTo(b.decimalValue()) != 0) {
                out.add(path + ": " + a + " read as " + b);
            }
            return;
        }
        if (a.getNodeType() != b.getNodeType()) {
            out.add(path + ": " + abbreviate(a) + " read as " + abbreviate(b));
            return;
        }
        if (a.isObject()) {
            java.util.Set<String> names = new java.util.TreeSet<>();
            a.fieldNames().forEachRemaining(names::add);
            b.fieldNames().forEachRemaining(names::add);
            for (String n : names) {
                JsonNode x = a.get(n), y = b.get(n);
                if (x == null || y == null) {
                    out.add(path + "." + n + ": " + (x == null ? "absent" : abbreviate(x)) + " read as "
                            + (y == null ? "absent" : abbreviate(y)));
                } else {
                    differences(path + "." + n, x, y, out);
                }
            }
            return;
        }
        if (a.isArray()) {
            if (a.size() != b.size()) {
                out.add(path + ": " + abbreviate(a) + " read as " + abbreviate(b));
                return;
            }
            for (int i = 0; i < a.size(); i++) {
                differences(path + "[" + i + "]", a.get(i), b.get(i), out);
            }
            return;
        }
        if (!a.equals(b)) {
            out.add(path + ": " + abbreviate(a) + " read as " + abbreviate(b));
        }
    }

    private static final java.util.Set<String> NON_FINITE = java.util.Set.of("NaN", "Infinity", "-Infinity");

    private static String abbreviate(JsonNode n) {
        String s = n.toString();
        return s.length() > 120 ? s.substring(0, 120) + "…" : s;
    }

    /**
     * rootCause names the innermost exception: Flink wraps every refusal in
     * "Corrupt Debezium JSON message" with the whole record, the cause says
     * what is wrong with it.
     */
    private static String rootCause(Throwable e) {
        while (e.getCause() != null && e.getCause() != e) {
            e = e.getCause();
        }
        return e.toString();
    }

    /** apply applies one changelog row to the table, keyed by the declared key fields. */
    private static void apply(FlinkTable ft, RowData row) {
        ObjectNode rendered = (ObjectNode) render(ft.rowType, row);
        String key = keyOf(ft, rendered).toString();
        switch (row.getRowKind()) {
            case INSERT, UPDATE_AFTER -> {
                if (row.getRowKind() == RowKind.INSERT && ft.rows.containsKey(key)) {
                    throw new IllegalStateException("INSERT of key " + key + ", which the table already holds");
                }
                ft.rows.put(key, rendered);
            }
            case UPDATE_BEFORE, DELETE -> {
                if (ft.rows.remove(key) == null) {
                    throw new IllegalStateException(row.getRowKind() + " of key " + key + ", which the table does not hold");
                }
            }
        }
    }

    /** keyOf returns the key fields of a rendered row, as an object in key order. */
    private static ObjectNode keyOf(FlinkTable ft, ObjectNode row) {
        ObjectNode key = JSON.createObjectNode();
        for (int i : ft.keyFields) {
            String name = ft.rowType.getFieldNames().get(i);
            key.set(name, row.get(name));
        }
        return key;
    }

    /**
     * render turns a Flink value of a declared type into JSON: numbers and
     * booleans as such, strings, decimals and times as text, bytes as base64,
     * arrays and rows as JSON arrays and objects.
     */
    private static JsonNode render(LogicalType type, Object v) {
        if (v == null) {
            return JSON.nullNode();
        }
        if (type instanceof RowType rt) {
            RowData row = (RowData) v;
            ObjectNode o = JSON.createObjectNode();
            for (int i = 0; i < rt.getFieldCount(); i++) {
                LogicalType ft = rt.getTypeAt(i);
                o.set(rt.getFieldNames().get(i), render(ft, RowData.createFieldGetter(ft, i).getFieldOrNull(row)));
            }
            return o;
        }
        if (type instanceof ArrayType at) {
            ArrayData a = (ArrayData) v;
            ArrayNode out = JSON.createArrayNode();
            ArrayData.ElementGetter g = ArrayData.createElementGetter(at.getElementType());
            for (int i = 0; i < a.size(); i++) {
                out.add(render(at.getElementType(), g.getElementOrNull(a, i)));
            }
            return out;
        }
        var f = JSON.getNodeFactory();
        if (v instanceof Boolean b) {
            return f.booleanNode(b);
        }
        if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
            return f.numberNode(((Number) v).longValue());
        }
        if (v instanceof Float || v instanceof Double) {
            double d = ((Number) v).doubleValue();
            return Double.isFinite(d) ? f.numberNode(d) : f.textNode(Double.toString(d));
        }
        if (v instanceof byte[] b) {
            return f.textNode(Base64.getEncoder().encodeToString(b));
        }
        return f.textNode(v.toString());
    }

    private ObjectNode summary() {
        ObjectNode out = JSON.createObjectNode();
        for (Map.Entry<String, TopicStats> e : stats.entrySet()) {
            TopicStats s = e.getValue();
            ObjectNode t = out.putObject(e.getKey());
            t.put("records", s.records);
            t.put("tombstones", s.tombstones);
            t.put("connect_keys", s.connectKeys);
            t.put("connect_values", s.connectValues);
            FlinkTable ft = flink.get(e.getKey());
            if (ft != null) {
                ObjectNode kinds = t.putObject("flink_rows");
                ft.kinds.forEach(kinds::put);
                ArrayNode rows = t.putArray("flink_table");
                ft.rows.values().forEach(rows::add);
            }
        }
        return out;
    }
}

package kafkasinkavro_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	twmb "github.com/twmb/avro"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
	"github.com/kafkasink/kafkasink/pgcdc"
)

var updateAvroDeviations = flag.Bool("update-avro-deviations", false, "rewrite testdata/debezium/deviations-avro.txt from this run")

// debeziumData holds the workload and Debezium's captured records.
const debeziumData = "../testdata/debezium"

// TestDebeziumAvroConformance runs testdata/debezium's workload through a
// real PostgreSQL, pgcdc.Run (initial snapshot, then streaming) and an
// exactly-once sinks with DebeziumEncoder on the real broker and Schema
// Registry, one per configuration of avroConfigs and MatchDebeziumLosses
// setting, reads every table's topic back read_committed, and compares
// with what Debezium 3.6.1 with Kafka Connect's AvroConverter wrote for
// the same workload in that configuration (<config>-records.jsonl,
// <config>-schemas.json): each
// topic's key and value schemas (names, field order, types, connect.*
// properties), and record by record the key and value, each decoded with
// its own schema by two Avro libraries (hamba/avro and twmb/avro, which
// must agree), and the headers (but kafkasink's own). The differences must
// be exactly those of deviations-<config>[-losses].txt, each with its
// reason (avroDeviationReasons).
func TestDebeziumAvroConformance(t *testing.T) {
	e := newAvroEnv(t)
	pgtest.SkipWithoutExtension(t, e.db, "hstore")
	schema := e.name
	t.Cleanup(func() { e.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE") })
	e.exec(workloadSQL(t, "workload.sql", schema))
	tables := workloadTables(t)

	golden := make(map[string][]goldenRecord)
	goldenSchemas := make(map[string]map[int]string)
	for _, c := range avroConfigs {
		goldenSchemas[c.name] = readAvroGoldenSchemas(t, c.name)
		golden[c.name] = readAvroGolden(t, c.name, goldenSchemas[c.name])
	}
	snapshotRows := 0
	for _, r := range golden["avro"] {
		if r.op() == "r" {
			snapshotRows++
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A sink per variant, each batch written to all of them.
	var sinks []*kafkasink.Sink
	for _, c := range avroConfigs {
		for _, losses := range []bool{false, true} {
			prefix := c.prefix(e.name, losses)
			dbz := c.enc
			dbz.MatchDebeziumLosses = losses
			if dbz.ProvideTransactionMetadata {
				dbz.TransactionTopic = prefix + "." + transactionTopic
			}
			enc, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: e.registry}, dbz)
			if err != nil {
				t.Fatal(err)
			}
			sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: e.brokers, SinkID: prefix, Encoder: enc,
				Topics: kafkasink.Topics{Prefix: prefix, Partitions: 1}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sink.Close(context.Background()) })
			sinks = append(sinks, sink)
		}
	}
	watched := &watchedSink{Sink: sinks[0], others: sinks[1:]}
	cfg := pgcdc.Config{
		ConnString: e.pg, Slot: e.name, Publication: e.name, CreateSlot: true, CreatePublication: true,
		Snapshot: true, KeylessTables: true, // no_pk has no key: Debezium writes it with a null key
		BatchMaxWait: 20 * time.Millisecond, StandbyInterval: time.Second, HeartbeatInterval: -1,
		ReconnectBackoff: 50 * time.Millisecond, ReconnectMax: time.Second,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, table := range tables {
		cfg.Tables = append(cfg.Tables, schema+"."+table)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var runErr error
	go func() {
		defer close(finished)
		runErr = pgcdc.Run(runCtx, cfg, watched)
	}()
	stop := func() {
		stopRun()
		<-finished
	}
	t.Cleanup(stop)
	// Debezium applied the changes once its snapshot was complete; so does
	// this test, so that both see the same rows in the snapshot.
	waitFor(t, 60*time.Second, fmt.Sprintf("the %d snapshot rows", snapshotRows), func() bool { return watched.reads.Load() >= int64(snapshotRows) }, finished)
	for _, stmt := range workloadChanges(t, schema) {
		e.exec(stmt)
	}
	waitFor(t, 60*time.Second, "the end marker (zz_end)", watched.ended.Load, finished)
	stop()
	if !errors.Is(runErr, context.Canceled) {
		t.Fatalf("pgcdc.Run: %v, want context.Canceled", runErr)
	}

	for _, c := range avroConfigs {
		for _, losses := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/MatchDebeziumLosses=%t", c.name, losses), func(t *testing.T) {
				var topics []string
				for _, table := range tables {
					topics = append(topics, c.prefix(e.name, losses)+"."+schema+"."+table)
				}
				if c.enc.ProvideTransactionMetadata {
					topics = append(topics, c.prefix(e.name, losses)+"."+transactionTopic)
				}
				var ours []avroRecord
				for _, rec := range kafkasinktest.ReadCommittedRaw(t, e.brokers, topics...) {
					r := avroRecord{Table: rec.Topic[strings.LastIndexByte(rec.Topic, '.')+1:], Key: rec.Key, Value: rec.Value}
					for _, h := range rec.Headers {
						if !strings.HasPrefix(h.Key, "kafkasink.") { // ours alone, documented
							r.Headers = append(r.Headers, avroHeader{h.Key, string(h.Value)})
						}
					}
					ours = append(ours, r)
				}
				got := avroDeviations(t, golden[c.name], func(id int) string { return goldenSchemas[c.name][id] }, ours, e.schemaOf(schema), schema)
				file := "deviations-" + c.name + ".txt"
				if losses {
					file = "deviations-" + c.name + "-losses.txt"
				}
				checkAvroDeviations(t, c.name, file, got)
			})
		}
	}
}

// transactionTopic stands for the transaction topic among the tables:
// Debezium's dbz.transaction, a sink's <prefix>.transaction.
const transactionTopic = "transaction"

// avroConfigs are the Avro configurations of testdata/debezium
// (configs/<name>.properties), each as the DebeziumEncoder options that
// mirror its properties.
var avroConfigs = []avroConfig{
	{"avro", debezium.Encoder{Name: "dbz"}},
	// decimal.handling.mode=double, time.precision.mode=connect,
	// binary.handling.mode=hex.
	{"avro-double-connect-hex", debezium.Encoder{Name: "dbz", DecimalHandling: debezium.DecimalDouble,
		TimePrecision: debezium.TimeConnect, BinaryHandling: debezium.BinaryHex}},
	// decimal.handling.mode=string, skipped.operations=none.
	{"avro-decimal-string", debezium.Encoder{Name: "dbz", DecimalHandling: debezium.DecimalString, SkippedOperations: "none"}},
	// time.precision.mode=isostring, interval.handling.mode=string.
	{"avro-isostring", debezium.Encoder{Name: "dbz", TimePrecision: debezium.TimeIsostring, IntervalHandling: debezium.IntervalString}},
	// time.precision.mode=adaptive_time_microseconds,
	// binary.handling.mode=base64-url-safe.
	{"avro-micros-urlsafe", debezium.Encoder{Name: "dbz", TimePrecision: debezium.TimeAdaptiveTimeMicroseconds, BinaryHandling: debezium.BinaryBase64URLSafe}},
	// binary.handling.mode=base64.
	{"avro-base64", debezium.Encoder{Name: "dbz", BinaryHandling: debezium.BinaryBase64}},
	// provide.transaction.metadata=true; each sink's transaction topic
	// is <prefix>.transaction.
	{"avro-txmeta", debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}},
}

type avroConfig struct {
	name string
	enc  debezium.Encoder
}

// prefix is the topic prefix (and sink id) of the configuration's sink:
// the test's name, the configuration's, and "l" with MatchDebeziumLosses.
func (c avroConfig) prefix(name string, losses bool) string {
	p := name + "." + strings.ReplaceAll(c.name, "-", "_")
	if losses {
		p += "_l"
	}
	return p
}

// schemaOf returns a function that fetches a schema by id from the
// registry, with the unique schema name mapped back to dbzconf.
func (e *avroEnv) schemaOf(schema string) func(int) string {
	cache := map[int]string{}
	return func(id int) string {
		if s, ok := cache[id]; ok {
			return s
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := e.registry.SchemaByID(ctx, id)
		if err != nil {
			e.t.Fatalf("schema id %d: %v", id, err)
		}
		cache[id] = strings.ReplaceAll(s.Schema, schema, "dbzconf")
		return cache[id]
	}
}

// watchedSink writes what Run delivers to its sink and then to others,
// and counts the snapshot's rows and the end marker.
type watchedSink struct {
	*kafkasink.Sink
	others []*kafkasink.Sink
	reads  atomic.Int64
	ended  atomic.Bool
}

func (w *watchedSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if err := w.Sink.Write(ctx, b); err != nil {
		return err
	}
	for _, other := range w.others {
		if err := other.Write(ctx, b); err != nil {
			return err
		}
	}
	for i := range b.Events {
		if b.Events[i].Op == kafkasink.OpRead {
			w.reads.Add(1)
		}
		if b.Events[i].Table == "zz_end" {
			w.ended.Store(true)
		}
	}
	return nil
}

// avroRecord is one record of a table's topic: key and value in the
// Confluent wire format (nil when null), and its headers (but kafkasink's
// own).
type avroRecord struct {
	Table      string
	Key, Value []byte
	Headers    []avroHeader
}

type avroHeader struct{ Key, Value string }

// headerMap is a record's headers by key, Debezium's run id (new for
// every run) as "<run id>".
func headerMap(hs []avroHeader) map[string]any {
	m := make(map[string]any, len(hs))
	for _, h := range hs {
		m[h.Key] = h.Value
		if h.Key == "__debezium.context.runId" {
			m[h.Key] = "<run id>"
		}
	}
	return m
}

// readAvroGolden reads <config>-records.jsonl: the records of the
// workload's tables (the dbz.message topic of logical messages is not a
// table's), decoded with schemas for their ops.
func readAvroGolden(t *testing.T, config string, schemas map[int]string) []goldenRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(debeziumData, config+"-records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Topic      string
			Key, Value *string
			Headers    []avroHeader
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		table, ok := strings.CutPrefix(line.Topic, "dbz.dbzconf.")
		if line.Topic == "dbz.transaction" {
			table, ok = transactionTopic, true
		}
		if !ok {
			continue
		}
		r := goldenRecord{avroRecord: avroRecord{Table: table, Headers: line.Headers}}
		for _, kv := range []struct {
			text *string
			dst  *[]byte
		}{{line.Key, &r.Key}, {line.Value, &r.Value}} {
			if kv.text == nil {
				continue
			}
			if *kv.dst, err = base64.StdEncoding.DecodeString(*kv.text); err != nil {
				t.Fatal(err)
			}
		}
		if r.Value != nil {
			v := decodeAvro(t, r.Value, func(id int) string { return schemas[id] }).(map[string]any)
			r.decoded, _ = v["op"].(string)
			if status, ok := v["status"].(string); ok { // a BEGIN or END
				r.decoded = status
			}
		}
		out = append(out, r)
	}
	return out
}

type goldenRecord struct {
	avroRecord
	decoded string // the value's op
}

func (r goldenRecord) op() string { return r.decoded }

// readAvroGoldenSchemas reads <config>-schemas.json: Debezium's schemas
// by id.
func readAvroGoldenSchemas(t *testing.T, config string) map[int]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(debeziumData, config+"-schemas.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[int]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	out := make(map[int]string, len(raw))
	for id, s := range raw {
		out[id] = string(s)
	}
	return out
}

// decodeAvro decodes a Confluent wire-format record with the schema of
// its id, with hamba/avro and twmb/avro, checks they agree, and returns
// the canonical form (see canonicalDebezium).
func decodeAvro(t *testing.T, b []byte, schemaOf func(int) string) any {
	t.Helper()
	if len(b) < 5 || b[0] != 0 {
		t.Fatalf("not the Confluent wire format: %x", b)
	}
	id := int(binary.BigEndian.Uint32(b[1:5]))
	text := schemaOf(id)
	hs, err := hamba.Parse(text)
	if err != nil {
		t.Fatalf("hamba/avro cannot parse schema %d: %v\n%s", id, err, text)
	}
	var hv any
	if err := hamba.Unmarshal(hs, b[5:], &hv); err != nil {
		t.Fatalf("hamba/avro cannot decode with schema %d: %v\n%s", id, err, text)
	}
	ts, err := twmb.Parse(text)
	if err != nil {
		t.Fatalf("twmb/avro cannot parse schema %d: %v", id, err)
	}
	var tv any
	rest, err := ts.Decode(b[5:], &tv)
	if err != nil {
		t.Fatalf("twmb/avro cannot decode with schema %d: %v", id, err)
	}
	if len(rest) != 0 {
		t.Fatalf("twmb/avro left %d bytes after the record", len(rest))
	}
	h, w := canonicalDebezium(hv), canonicalDebezium(tv)
	if fmt.Sprint(h) != fmt.Sprint(w) {
		t.Fatalf("the two Avro libraries read schema %d's record differently:\nhamba %v\ntwmb  %v", id, h, w)
	}
	return h
}

// canonicalDebezium is canonical for Debezium's records, whose unions
// name records by full names with dots (io.debezium.data.Bits, the
// table's Value): hamba's single-member union maps are unwrapped when
// the member is a primitive type's or a record's full name (column names
// have no dots).
func canonicalDebezium(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 {
			for k, inner := range v {
				if base, _, _ := strings.Cut(k, "."); strings.Contains(k, ".") || slices.Contains([]string{"null", "boolean", "int", "long", "float", "double", "bytes", "string", "array", "map"}, base) {
					return canonicalDebezium(inner)
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = canonicalDebezium(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = canonicalDebezium(x)
		}
		return out
	}
	return canonical(v)
}

// avroDeviations lists the differences between Debezium's records and
// ours, table by table: the key and value schemas of the first record
// that has one, then the records paired in order.
func avroDeviations(t *testing.T, golden []goldenRecord, goldenSchema func(int) string, ours []avroRecord, ourSchema func(int) string, schema string) []string {
	t.Helper()
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, table := range append(workloadTables(t), transactionTopic) {
		var want []goldenRecord
		for _, r := range golden {
			if r.Table == table {
				want = append(want, r)
			}
		}
		var got []avroRecord
		for _, r := range ours {
			if r.Table == table {
				got = append(got, r)
			}
		}
		for _, part := range []string{"key", "value"} {
			ws, gs := firstSchema(want, part, goldenSchema), firstSchema(records(got), part, ourSchema)
			kafkasinktest.DiffTrees(table+" "+part+" schema", normalizeAvroSchema(ws), normalizeAvroSchema(gs), sameRendered, func(path string, w, o any) {
				add("%s: debezium=%s ours=%s", path, render(w), render(o))
			})
		}
		if len(want) != len(got) {
			add("%s: %d records in Debezium's output, %d in ours", table, len(want), len(got))
		}
		for i := range min(len(want), len(got)) {
			w, o := want[i], got[i]
			prefix := fmt.Sprintf("%s[%d] %s", table, i, w.op())
			for _, part := range []struct {
				name string
				w, o []byte
			}{{"key", w.Key, o.Key}, {"value", w.Value, o.Value}} {
				var wv, ov any
				if part.w != nil {
					wv = normalizeAvroValue(decodeAvro(t, part.w, goldenSchema))
				}
				switch {
				case part.o != nil && !isWireFormat(part.o):
					// A truncate's key is the sink's, not the encoder's.
					ov = "not Avro: " + eventID.ReplaceAllString(string(part.o), "event-id")
				case part.o != nil:
					ov = normalizeAvroValue(renameSchema(decodeAvro(t, part.o, ourSchema), schema))
				}
				kafkasinktest.DiffTrees(prefix+" "+part.name, wv, ov, sameRendered, func(path string, w, o any) {
					add("%s: debezium=%s ours=%s", path, render(w), render(o))
				})
			}
			kafkasinktest.DiffTrees(prefix+" headers", headerMap(w.Headers), headerMap(o.Headers), sameRendered, func(path string, w, o any) {
				add("%s: debezium=%s ours=%s", path, render(w), render(o))
			})
		}
	}
	for i, line := range out {
		out[i] = strings.ReplaceAll(line, schema, "dbzconf")
	}
	return out
}

// eventID is the form of Event.ID, a truncate's key: it differs from run
// to run.
var eventID = regexp.MustCompile(`^[0-9A-F]+/[0-9A-F]+:[0-9]+$`)

// isWireFormat reports whether b starts as the Confluent wire format:
// magic byte 0, then a 4-byte schema id.
func isWireFormat(b []byte) bool { return len(b) >= 5 && b[0] == 0 }

func records(rs []avroRecord) []goldenRecord {
	out := make([]goldenRecord, len(rs))
	for i := range rs {
		out[i].avroRecord = rs[i]
	}
	return out
}

// firstSchema is the schema of the first record's key or value that has
// one, or "".
func firstSchema(rs []goldenRecord, part string, schemaOf func(int) string) string {
	for _, r := range rs {
		b := r.Value
		if part == "key" {
			b = r.Key
		}
		if len(b) >= 5 {
			return schemaOf(int(binary.BigEndian.Uint32(b[1:5])))
		}
	}
	return ""
}

var primitiveTypes = []string{"null", "boolean", "int", "long", "float", "double", "bytes", "string"}

// normalizeAvroSchema parses an Avro schema and writes every named type
// by its full name, without namespaces: Java's Avro writes a name
// relative to the enclosing namespace, kafkasinkavro in full; the two
// name the same types. Fields are keyed by name ("fields.<name>"), in
// order ("field_order").
func normalizeAvroSchema(text string) any {
	if text == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return "invalid JSON: " + text
	}
	return normalizeAvroType(v, "")
}

func normalizeAvroType(v any, ns string) any {
	switch v := v.(type) {
	case string:
		if slices.Contains(primitiveTypes, v) || strings.Contains(v, ".") || ns == "" {
			return v
		}
		return ns + "." + v
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalizeAvroType(x, ns)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = x
		}
		switch v["type"] {
		case "record", "enum", "fixed":
			name, _ := v["name"].(string)
			if space, ok := v["namespace"].(string); ok && !strings.Contains(name, ".") {
				ns = space
			}
			if !strings.Contains(name, ".") && ns != "" {
				name = ns + "." + name
			}
			if i := strings.LastIndexByte(name, '.'); i >= 0 {
				ns = name[:i]
			}
			out["name"] = name
			delete(out, "namespace")
			if fields, ok := v["fields"].([]any); ok {
				byName := map[string]any{}
				var order []any
				for _, f := range fields {
					fm, _ := f.(map[string]any)
					fn, _ := fm["name"].(string)
					nf := make(map[string]any, len(fm))
					for k, x := range fm {
						nf[k] = x
					}
					nf["type"] = normalizeAvroType(fm["type"], ns)
					byName[fn] = nf
					order = append(order, fn)
				}
				delete(out, "fields")
				out["fields"] = byName
				out["field_order"] = order
			}
		default:
			for _, k := range []string{"type", "items", "values"} {
				if x, ok := v[k]; ok {
					out[k] = normalizeAvroType(x, ns)
				}
			}
		}
		return out
	}
	return v
}

// renameSchema maps the test's unique schema name back to dbzconf in
// every string of v (source.schema, a transaction's data_collection).
func renameSchema(v any, schema string) any {
	switch v := v.(type) {
	case string:
		return strings.ReplaceAll(v, schema, "dbzconf")
	case map[string]any:
		for k, x := range v {
			v[k] = renameSchema(x, schema)
		}
	case []any:
		for i, x := range v {
			v[i] = renameSchema(x, schema)
		}
	}
	return v
}

// normalizeAvroValue replaces what differs from run to run by a
// placeholder (digit runs become N): the envelope's and the source's
// ts_ms/ts_us/ts_ns, the source's lsn, txId, xmin and sequence, the
// transaction block's id, and a BEGIN's or END's id and ts_ms, and a
// transaction record's key's id.
func normalizeAvroValue(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for _, k := range []string{"ts_ms", "ts_us", "ts_ns"} {
		normalizeAvroField(m, k)
	}
	if _, ok := m["status"]; ok || len(m) == 1 { // a BEGIN or END, or a key
		normalizeAvroField(m, "id")
	}
	if tx, ok := m["transaction"].(map[string]any); ok {
		normalizeAvroField(tx, "id")
	}
	if src, ok := m["source"].(map[string]any); ok {
		for _, k := range []string{"ts_ms", "ts_us", "ts_ns", "lsn", "txId", "xmin", "sequence"} {
			normalizeAvroField(src, k)
		}
	}
	return m
}

var digitRuns = regexp.MustCompile(`[0-9]+`)

func normalizeAvroField(m map[string]any, k string) {
	if v, ok := m[k]; ok && v != nil {
		m[k] = digitRuns.ReplaceAllString(fmt.Sprint(v), "N")
	}
}

// sameRendered reports whether two leaves render alike (render).
func sameRendered(w, o any) bool { return render(w) == render(o) }

// render is v as compact JSON, "<absent>" for a missing member, long
// strings cut to 60 characters and their length.
func render(v any) string {
	if _, ok := v.(kafkasinktest.Absent); ok {
		return "<absent>"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if s := string(b); len(s) > 60 {
		return fmt.Sprintf("%s...(%d)", s[:60], len(s))
	}
	return string(b)
}

// avroDeviationReasons say why each difference from Debezium is there:
// every line of deviations-avro.txt matches one, and is written with its
// reason.
// They are debezium.Encoder's deliberate deviations, each where
// Debezium loses or garbles a value; MatchDebeziumLosses reproduces them
// all, and its variant has no difference at all.
var avroDeviationReasons = []struct {
	pattern *regexp.Regexp
	reason  string
}{
	{regexp.MustCompile(`^rare_arrays(\[\d+\] [rcud] value\.(after|before)\.a_\w+: debezium=<absent> | value schema\.fields\.before\.type\[1\]\.(fields\.a_\w+: debezium=<absent> |field_order: ))`),
		"Debezium leaves out arrays of money, interval, varbit, point, xml and of a domain (it has no converter for them); kafkasink writes them"},
	{regexp.MustCompile(`^types\[\d+\] r value\.after\.c_date: debezium=(-703383|"0044-03-15[^"]*") ours=(-735160|"-0043-03-15[^"]*")$`),
		"a BC date of a snapshot row: Debezium's snapshot reads dates through JDBC, which drops the era (44 BC becomes 44 AD); kafkasink keeps it"},
	{regexp.MustCompile(`^types\[\d+\] [cu] value\.after\.c_name: debezium=null `),
		"a name column of a streamed change: Debezium's stream does not read the name type and writes null; kafkasink keeps the value"},
	{regexp.MustCompile(`^truncated\[\d+\] t key: debezium=null ours="not Avro: event-id"$`),
		"a truncate (written with skipped.operations none) is keyed as the sink keys it, by its event id in Config.KeyFormat, where Debezium's key is null, so that it keeps its partition order on a keyed topic"},
	{regexp.MustCompile(`^mixed_defaults value schema\.fields\.before\.type\[1\]\.fields\.d_\w+\.(default|type\[[01]\]): `),
		"Debezium declares a nullable column's DEFAULT, which AvroData writes as the field's default with the union [type, null]; kafkasink declares DEFAULTs of NOT NULL columns only, so that a reader does not take a NULL for the default"},
	{regexp.MustCompile(`^mixed_defaults\[\d+\] [rcud] value\.(after|before)\.d_\w+: debezium=.* ours=null$`),
		"Debezium's converter writes a column's declared DEFAULT in place of NULL (an explicit NULL, and a REPLICA IDENTITY DEFAULT delete's before image); kafkasink keeps the NULL"},
	{regexp.MustCompile(`^num_zeros\[\d+\] [rcud] value\.(after|before)\.(n_var|a_var\[\d+\])\.(scale|value): `),
		"a numeric without a declared scale: Debezium strips its trailing zeros (BigDecimal.stripTrailingZeros: 1.50 at scale 1, 1000.000 at scale 0), losing the scale PostgreSQL keeps and prints; kafkasink keeps them"},
	{regexp.MustCompile(`^toast_types\[\d+\] u value\.after\.t_\w+: debezium=null ours=`),
		"an unchanged TOAST value whose placeholder Debezium's converter cannot take (a bytea in the base64 modes, a bytea array outside the bytes mode, a date array under connect or isostring) is null in Debezium's record; kafkasink writes the placeholder in the field's form, so that it is not read as a NULL"},
}

const avroDeviationsHeader = `# Differences between Debezium 3.6.1 with Kafka Connect's AvroConverter
# (configuration "{config}": {config}-records.jsonl, {config}-schemas.json) and
# kafkasink's pipeline (pgcdc.Run + kafkasinkavro.DebeziumEncoder) for the
# workload in this directory ({variant}), kept by TestDebeziumAvroConformance in
# kafkasinkavro (a ratchet: the test fails when this list changes;
# -update-avro-deviations rewrites it).
#
# One line per difference, with its reason after " -- ":
#   <table> key|value schema.<path>: debezium=<value> ours=<value>
#     (a schema: named types by full name, fields by name, field_order
#     their order)
#   <table>[<i>] <op> key|value|headers.<path>: debezium=<value> ours=<value>
#     (the i-th record of the table's topic, decoded with its schema; its
#     headers but kafkasink's own, the run id header's value normalized)
# Normalized on both sides before comparing (they differ run to run): the
# envelope's and source's ts_ms/ts_us/ts_ns, the source's lsn, txId, xmin
# and sequence, the transaction block's id, a BEGIN's or END's id and
# ts_ms and its key's id (digit runs become N). "transaction" is the
# transaction topic (provide.transaction.metadata). The unique schema name the test
# runs the workload under is mapped back to dbzconf. <absent> is a member
# that is not there; long values are cut to 60 characters and their length.
`

// checkAvroDeviations compares got with deviations-avro.txt, or rewrites
// it with -update-avro-deviations. Every line needs a reason.
func checkAvroDeviations(t *testing.T, config, file string, got []string) {
	t.Helper()
	var lines, unexplained []string
	for _, line := range got {
		reason := ""
		for _, r := range avroDeviationReasons {
			if r.pattern.MatchString(line) {
				reason = r.reason
				break
			}
		}
		if reason == "" {
			unexplained = append(unexplained, line)
			reason = "UNEXPLAINED"
		}
		lines = append(lines, line+" -- "+reason)
	}
	path := filepath.Join(debeziumData, file)
	if *updateAvroDeviations {
		variant := "DebeziumEncoder{Name: \"dbz\"}"
		if strings.Contains(file, "losses") {
			variant = "DebeziumEncoder{Name: \"dbz\", MatchDebeziumLosses: true}"
		}
		header := strings.ReplaceAll(strings.Replace(avroDeviationsHeader, "{variant}", variant, 1), "{config}", config)
		if err := os.WriteFile(path, []byte(header+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(unexplained) > 0 {
		t.Errorf("%d differences from Debezium have no reason in avroDeviationReasons:\n%s", len(unexplained), strings.Join(unexplained, "\n"))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-avro-deviations to create it, then review it)", err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	var diff []string
	for _, line := range want {
		if !slices.Contains(lines, line) {
			diff = append(diff, "- "+line)
		}
	}
	for _, line := range lines {
		if !slices.Contains(want, line) {
			diff = append(diff, "+ "+line)
		}
	}
	if len(diff) > 0 {
		t.Errorf("the differences from Debezium's Avro records changed; if that is the intended progress, rerun with -update-avro-deviations and review the diff:\n%s",
			strings.Join(diff, "\n"))
	}
}

// workloadTables are the tables workload.sql creates in schema dbzconf.
func workloadTables(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(debeziumData, "workload.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, m := range regexp.MustCompile(`(?m)^CREATE TABLE dbzconf\.(\w+)`).FindAllSubmatch(data, -1) {
		tables = append(tables, string(m[1]))
	}
	return tables
}

// workloadSQL is a workload file with schema dbzconf renamed to schema and
// psql's meta-commands (lines starting with a backslash) left out, to run
// as one multi-statement query.
func workloadSQL(t *testing.T, file, schema string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(debeziumData, file))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, `\`) {
			lines = append(lines, line)
		}
	}
	return regexp.MustCompile(`\bdbzconf\b`).ReplaceAllString(strings.Join(lines, "\n"), schema)
}

// workloadChanges splits workload-changes.sql into its statements, as psql
// runs them (each in its own transaction unless the file says BEGIN): a
// statement ends with the line that ends with a semicolon (the file has
// no semicolon inside a literal or at the end of a comment line).
func workloadChanges(t *testing.T, schema string) []string {
	t.Helper()
	var out []string
	var stmt strings.Builder
	for _, line := range strings.Split(workloadSQL(t, "workload-changes.sql", schema), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		stmt.WriteString(line + "\n")
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			out = append(out, stmt.String())
			stmt.Reset()
		}
	}
	if s := strings.TrimSpace(stmt.String()); s != "" {
		out = append(out, s)
	}
	return out
}

package pgcdc

// The Debezium consumer check (issue 9): real Debezium-JSON consumers read
// our Debezium-format topics and accept every record. The consumers are
// Kafka Connect's JsonConverter (toConnectData, as a Connect sink connector
// reads a topic) and Flink's debezium-json format with declared row types
// (as a Flink SQL table over the topic reads it), run by the Java program
// in internal/debeziumref/consumer, built here with Maven. The tests skip
// when java or mvn is missing; .ci/run's machine has both.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// consumerModule is the Maven module of the Java consumer.
const consumerModule = "../internal/debeziumref/consumer"

// flinkTable is a table Flink's debezium-json reads: its key fields and
// its declared row type. A column left out of the row type is ignored by
// Flink, as in a Flink table declared with fewer columns.
type flinkTable struct {
	table, key, rowType string
	// compare are the columns whose final values are compared with the
	// database's, as a SQL select list of json_build_object arguments.
	compare string
}

// flinkTables are the workload's tables read with Flink, with the row
// types Debezium 3.6.1's default output has (numeric and money as
// Connect Decimal bytes, temporal values as epoch numbers, json as text).
// Flink's debezium-json refuses an update or delete whose before image is
// null, so a table read with it must have REPLICA IDENTITY FULL (Flink's
// documented requirement; Debezium's own output of a DEFAULT table fails
// there the same way); TestDebeziumConsumerOurTopics sets it for types.
var flinkTables = []flinkTable{
	{
		table: "types", key: "id",
		// c_int_arr2d holds 2-D and 3-D values in one column (PostgreSQL
		// arrays do not fix their dimension), which no Flink array type
		// fits: read as JSON text, which Flink allows for any JSON value.
		// c_date and c_date_arr are INT, days since the epoch, as
		// Debezium types them, infinity dates included.
		rowType: "ROW<id INT, c_int2 SMALLINT, c_int4 INT, c_int8 BIGINT, c_oid BIGINT, c_num_typmod BYTES, " +
			"c_num ROW<scale INT, `value` BYTES>, c_num40 BYTES, c_money BYTES, c_float4 FLOAT, c_float8 DOUBLE, " +
			"c_text STRING, c_varchar STRING, c_char STRING, c_bytea BYTES, c_bool BOOLEAN, " +
			"c_date INT, c_date_arr ARRAY<INT>, c_time BIGINT, c_time3 INT, c_timetz STRING, c_ts BIGINT, c_ts3 BIGINT, c_tstz STRING, " +
			"c_interval BIGINT, c_uuid STRING, c_json STRING, c_jsonb STRING, c_inet STRING, c_cidr STRING, " +
			"c_macaddr STRING, c_bit1 BOOLEAN, c_bit8 BYTES, c_varbit BYTES, " +
			"c_point ROW<x DOUBLE, y DOUBLE, wkb BYTES, srid INT>, c_enum STRING, c_domain INT, " +
			"c_int_arr ARRAY<INT>, c_text_arr ARRAY<STRING>, c_int_arr2d STRING, c_name STRING, c_qchar STRING, " +
			"c_num_arr ARRAY<ROW<scale INT, `value` BYTES>>>",
		compare: "'id', id, 'c_int2', c_int2, 'c_int4', c_int4, 'c_int8', c_int8, 'c_text', c_text, " +
			"'c_varchar', c_varchar, 'c_char', c_char, 'c_bool', c_bool, 'c_uuid', c_uuid, 'c_enum', c_enum, " +
			"'c_domain', c_domain::int, 'c_int_arr', c_int_arr, 'c_text_arr', c_text_arr",
	},
	{
		table: "ident_full", key: "id", rowType: "ROW<id INT, name STRING, big STRING>",
		compare: "'id', id, 'name', name, 'big', big",
	},
	{
		table: "zz_end", key: "id", rowType: "ROW<id INT>",
		compare: "'id', id",
	},
}

var (
	consumerBuild     sync.Once
	consumerClasspath string
	consumerBuildErr  error
)

// debeziumConsumer builds the Java consumer once per test binary and
// returns its classpath, or skips t when java or mvn is missing.
func debeziumConsumer(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the Debezium consumer check needs %s (Java 17+ and Maven; the CI machine has both): %v", tool, err)
		}
	}
	consumerBuild.Do(func() {
		// Maven caches the artifacts (flink-json, connect-json, 50 MB) in
		// ~/.m2; a build after the first takes a few seconds.
		cmd := exec.Command("mvn", "-B", "-q", "compile", "dependency:build-classpath",
			"-Dmdep.outputFile=target/classpath.txt")
		cmd.Dir = consumerModule
		out, err := cmd.CombinedOutput()
		if err != nil {
			consumerBuildErr = fmt.Errorf("building %s with Maven: %v\n%s", consumerModule, err, out)
			return
		}
		cp, err := os.ReadFile(filepath.Join(consumerModule, "target", "classpath.txt"))
		if err != nil {
			consumerBuildErr = err
			return
		}
		abs, err := filepath.Abs(consumerModule)
		if err != nil {
			consumerBuildErr = err
			return
		}
		consumerClasspath = filepath.Join(abs, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
	})
	if consumerBuildErr != nil {
		t.Fatal(consumerBuildErr)
	}
	return consumerClasspath
}

// consumerTopic is what the consumer read of one topic.
type consumerTopic struct {
	Records       int              `json:"records"`
	Tombstones    int              `json:"tombstones"`
	ConnectKeys   int              `json:"connect_keys"`
	ConnectValues int              `json:"connect_values"`
	FlinkRows     map[string]int   `json:"flink_rows"`
	FlinkTable    []map[string]any `json:"flink_table"`
}

// runConsumer runs the Java consumer with args (its source: --file, or
// --brokers and --topics) and the Flink tables of topic prefix, and
// returns its per-topic summary, or its error with what it printed.
func runConsumer(t *testing.T, schemas bool, prefix string, tables []flinkTable, args ...string) (map[string]consumerTopic, error) {
	t.Helper()
	cp := debeziumConsumer(t)
	args = append([]string{"-Duser.timezone=UTC", "-cp", cp, "io.kafkasink.debeziumconsumer.Consume",
		"--schemas", fmt.Sprint(schemas)}, args...)
	for _, f := range tables {
		args = append(args, "--flink", prefix+"."+f.table+"="+f.key+"="+f.rowType)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "java", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the Debezium consumer: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	var summary map[string]consumerTopic
	if err := dec.Decode(&summary); err != nil {
		return nil, fmt.Errorf("the Debezium consumer's summary: %v", err)
	}
	return summary, nil
}

// TestDebeziumConsumerReadsDebeziumGolden proves the consumer and its row
// types on the real Debezium's own records (the golden files): it accepts
// every record of the configurations Flink can read, with schemas.enable
// false and true, and Flink's changelog of each table matches the
// workload. With skipped.operations=none (decimal-string) Debezium writes
// an op "t" record for the TRUNCATE, which Flink's debezium-json refuses
// ("Unknown op"): the consumer must fail on it, naming the record.
func TestDebeziumConsumerReadsDebeziumGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Java consumers with Maven: left out by -short; the full suite runs it (docs/integration-tests.md)")
	}
	// The golden workload's other tables with updates (types, toasty,
	// ident_default, multi_pk) are REPLICA IDENTITY DEFAULT: Flink refuses
	// those updates, whoever wrote them.
	var full []flinkTable
	for _, f := range flinkTables {
		if f.table == "ident_full" || f.table == "zz_end" {
			full = append(full, f)
		}
	}
	for _, config := range []string{"defaults", "isostring"} {
		for _, schemas := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/schemas.enable=%t", config, schemas), func(t *testing.T) {
				file := filepath.Join(debeziumData, fmt.Sprintf("%s-schemas-%t.jsonl", config, schemas))
				golden := readDebeziumGolden(t, filepath.Base(file))
				summary, err := runConsumer(t, schemas, "dbz."+debeziumSchema, full, "--file", file)
				if err != nil {
					t.Fatal(err)
				}
				checkAllAccepted(t, summary, countByTopic(golden))
				identFull := summary["dbz."+debeziumSchema+".ident_full"]
				// workload.sql's 3 rows, then an update, a primary-key
				// change (delete + insert) and a delete.
				want := map[string]int{"INSERT": 4, "UPDATE_BEFORE": 1, "UPDATE_AFTER": 1, "DELETE": 2}
				if !maps.Equal(identFull.FlinkRows, want) {
					t.Errorf("Flink's rows of ident_full: %v, want %v", identFull.FlinkRows, want)
				}
			})
		}
	}
	t.Run("decimal-string/truncate refused", func(t *testing.T) {
		file := filepath.Join(debeziumData, "decimal-string-schemas-false.jsonl")
		truncated := flinkTable{table: "truncated", key: "id", rowType: "ROW<id INT, v STRING>"}
		_, err := runConsumer(t, false, "dbz."+debeziumSchema, []flinkTable{truncated}, "--file", file)
		if err == nil || !strings.Contains(err.Error(), `(topic dbz.dbzconf.truncated): Flink debezium-json refused the value`) ||
			!strings.Contains(err.Error(), `Unknown "op" value "t"`) {
			t.Fatalf("the consumer on Debezium's TRUNCATE record: %v, want Flink's refusal of op \"t\" naming the record", err)
		}
	})
}

// countByTopic counts golden records per topic.
func countByTopic(rs []dbzRecord) map[string]int {
	n := make(map[string]int)
	for _, r := range rs {
		n[r.Topic]++
	}
	return n
}

// checkAllAccepted checks the consumer read want[topic] records of every
// topic and JsonConverter accepted each key and value.
func checkAllAccepted(t *testing.T, summary map[string]consumerTopic, want map[string]int) {
	t.Helper()
	for _, topic := range slices.Sorted(maps.Keys(want)) {
		got := summary[topic]
		if got.Records != want[topic] || got.ConnectKeys != want[topic] || got.ConnectValues != want[topic] {
			t.Errorf("%s: the consumer read %d records, JsonConverter accepted %d keys and %d values; want %d of each",
				topic, got.Records, got.ConnectKeys, got.ConnectValues, want[topic])
		}
	}
	for topic := range summary {
		if _, ok := want[topic]; !ok {
			t.Errorf("the consumer read topic %s, which was not expected", topic)
		}
	}
}

// consumerForm is one Debezium JSON form a sink writes: its encoder, and
// the schemas.enable its consumers read it with.
type consumerForm struct {
	schemas bool
	enc     kafkasink.Encoder
}

// consumerForms are the forms TestDebeziumConsumerOurTopics delivers,
// each to its own topics: Debezium's defaults (the test compares record
// counts with Debezium's for its default configuration) with
// JsonConverter's schemas.enable false and true. With true, JsonConverter
// checks every key and value against the Connect schema it carries, and
// Flink reads with debezium-json.schema-include=true.
//
// Both also write transaction metadata (provide.transaction.metadata),
// which adds a block to every change and BEGIN and END records on the
// form's transaction topic, <prefix>.transaction, which the consumers
// read as well.
var consumerForms = []consumerForm{
	{schemas: false, enc: debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}},
	{schemas: true, enc: debezium.Encoder{Name: "dbz", SchemasEnable: true, ProvideTransactionMetadata: true}},
}

// consumerRun is the workload delivered by Run to the real test broker,
// in one or more forms.
type consumerRun struct {
	e        *pgEnv
	schema   string
	brokers  []string
	forms    []consumerForm
	prefixes []string // per form, of its topics: <prefix>.<schema>.<table>
	// txnTopics are, per form, its transaction topic, "" for a form
	// without transaction metadata.
	txnTopics []string
	tables    []string // the tables delivered
}

// deliverWorkload runs testdata/debezium's workload through Run
// (initial snapshot, then streaming) and one exactly-once sink per form to
// the real test broker, each batch written to all of them, under names
// unique to the test, dropped and deleted at its end. The types table gets
// REPLICA IDENTITY FULL, which Flink needs (see flinkTables).
func deliverWorkload(t *testing.T, forms ...consumerForm) *consumerRun {
	t.Helper()
	e := newPGEnv(t)
	sinktest.SkipWithoutExtension(t, e.db, "hstore")
	r := &consumerRun{e: e, schema: e.name, brokers: sinktest.RealBrokers(t, sinktest.EnvBrokers), forms: forms}
	t.Cleanup(func() { e.exec("DROP SCHEMA IF EXISTS " + r.schema + " CASCADE") })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sinktest.DeleteTopics(ctx, r.brokers, e.name); err != nil {
			t.Logf("deleting the test's topics %s*: %v", e.name, err)
		}
	})
	for _, stmt := range workloadStatements(t, "workload.sql", r.schema) {
		e.exec(stmt)
	}
	e.exec("ALTER TABLE " + r.schema + ".types REPLICA IDENTITY FULL")
	r.tables = debeziumTables(t)
	snapshotRows := 0
	for _, table := range r.tables {
		var n int
		e.queryRow(&n, "SELECT count(*) FROM "+r.schema+"."+table)
		snapshotRows += n
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sinks []*kafkasink.Sink
	for i, form := range forms {
		prefix := fmt.Sprintf("%s_%d", e.name, i)
		r.prefixes = append(r.prefixes, prefix)
		enc := form.enc
		if d, ok := enc.(debezium.Encoder); ok && d.ProvideTransactionMetadata {
			d.TransactionTopic = prefix + ".transaction"
			enc = d
		}
		r.txnTopics = append(r.txnTopics, frameTopic(enc))
		sink, err := kafkasink.New(ctx, kafkasink.Config{
			Brokers:         r.brokers,
			SinkID:          prefix,
			CheckpointTopic: prefix + ".checkpoints",
			Topics:          kafkasink.Topics{Prefix: prefix, Partitions: 3},
			KeyFormat:       kafkasink.KeyJSON,
			Encoder:         enc,
		})
		if err != nil {
			t.Fatalf("kafkasink.New: %v", err)
		}
		t.Cleanup(func() { sink.Close(context.Background()) })
		sinks = append(sinks, sink)
	}
	runDebeziumWorkload(t, ctx, e, r.schema, r.tables, snapshotRows, sinks)
	return r
}

// topics returns the topics of form i: its tables', and its transaction
// topic when it has one.
func (r *consumerRun) topics(i int) []string {
	var out []string
	for _, table := range r.tables {
		out = append(out, r.prefixes[i]+"."+r.schema+"."+table)
	}
	if r.txnTopics[i] != "" {
		out = append(out, r.txnTopics[i])
	}
	return out
}

// frameTopic is the transaction topic of enc, "" when it writes none.
func frameTopic(enc kafkasink.Encoder) string {
	if f, ok := enc.(kafkasink.Framer); ok {
		return f.FrameTopic()
	}
	return ""
}

// consume runs the Java consumer over the topics of form i on the broker,
// with Flink reading tables.
func (r *consumerRun) consume(t *testing.T, i int, tables []flinkTable) (map[string]consumerTopic, error) {
	t.Helper()
	args := []string{"--brokers", strings.Join(r.brokers, ","), "--topics", strings.Join(r.topics(i), ",")}
	return runConsumer(t, r.forms[i].schemas, r.prefixes[i]+"."+r.schema, tables, args...)
}

// TestDebeziumConsumerOurTopics runs testdata/debezium's workload through
// Run and DebeziumEncoder (Debezium's defaults, each form of
// consumerForms) exactly once into the real test broker and has the real
// consumers read the topics read_committed: JsonConverter must accept
// every key and value of every topic and read each as what it holds
// (consumerForms lists the known exceptions), as many as our own
// read_committed reader finds and per table as many as Debezium wrote for
// the same changes; Flink's debezium-json every change of the tables of
// flinkTables, and the table Flink's changelog leaves must hold what the
// database holds at the end.
func TestDebeziumConsumerOurTopics(t *testing.T) {
	debeziumConsumer(t) // skip early, before the workload, without Java
	const debeziumCountsFile = "defaults-schemas-false.jsonl"
	debeziumCounts := countByTopic(readDebeziumGolden(t, debeziumCountsFile))
	r := deliverWorkload(t, consumerForms...)
	for i, form := range r.forms {
		t.Run(fmt.Sprintf("schemas.enable=%t", form.schemas), func(t *testing.T) {
			summary, err := r.consume(t, i, flinkTables)
			if err != nil {
				t.Fatal(err)
			}
			want := make(map[string]int)
			for _, rec := range sinktest.ReadCommitted(t, r.brokers, r.topics(i)...) {
				want[rec.Topic]++
			}
			checkAllAccepted(t, summary, want)
			// The same database changes made Debezium write this many
			// records per table (its defaults, as every form here).
			for _, table := range r.tables {
				topic := r.prefixes[i] + "." + r.schema + "." + table
				if got, dbz := summary[topic].Records, debeziumCounts["dbz."+debeziumSchema+"."+table]; got != dbz {
					t.Errorf("%s: the consumer read %d records; Debezium wrote %d for the same changes (%s)",
						table, got, dbz, debeziumCountsFile)
				}
			}
			// With provide.transaction.metadata Debezium wrote this many
			// BEGIN and END records for the same changes.
			if topic := r.txnTopics[i]; topic != "" {
				if got, dbz := summary[topic].Records, countByTopic(readDebeziumGolden(t, "txmeta-schemas-false.jsonl"))["dbz.transaction"]; got != dbz {
					t.Errorf("%s: the consumer read %d records; Debezium wrote %d BEGIN and END records for the same changes", topic, got, dbz)
				}
			}
			for _, f := range flinkTables {
				got := summary[r.prefixes[i]+"."+r.schema+"."+f.table]
				if len(got.FlinkTable) == 0 {
					t.Errorf("%s: Flink's changelog left no row", f.table)
				}
				checkFlinkTable(t, r.e, r.schema, f, got.FlinkTable)
				t.Logf("%s: %d records, %d tombstones, Flink rows %v", f.table, got.Records, got.Tombstones, got.FlinkRows)
			}
		})
	}
}

// checkFlinkTable compares the compared columns of the rows Flink's
// changelog left with the database's rows, by key.
func checkFlinkTable(t *testing.T, e *pgEnv, schema string, f flinkTable, rows []map[string]any) {
	t.Helper()
	var dbJSON string
	e.queryRow(&dbJSON, fmt.Sprintf("SELECT coalesce(json_agg(json_build_object(%s)), '[]')::text FROM %s.%s", f.compare, schema, f.table))
	dec := json.NewDecoder(strings.NewReader(dbJSON))
	dec.UseNumber()
	var dbRows []map[string]any
	if err := dec.Decode(&dbRows); err != nil {
		t.Fatalf("%s: the database's rows: %v", f.table, err)
	}
	byKey := func(rs []map[string]any, columns []string) map[string]string {
		out := make(map[string]string, len(rs))
		for _, row := range rs {
			projected := make(map[string]any, len(columns))
			for _, c := range columns {
				projected[c] = row[c]
			}
			b, _ := json.Marshal(projected)
			out[fmt.Sprint(row[f.key])] = string(b)
		}
		return out
	}
	var columns []string
	if len(dbRows) > 0 {
		columns = slices.Sorted(maps.Keys(dbRows[0]))
	}
	got, want := byKey(rows, columns), byKey(dbRows, columns)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s key %s: Flink's table holds %s, the database %s", f.table, k, orNone(got[k]), want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s key %s: Flink's table holds %s, which the database does not", f.table, k, got[k])
		}
	}
}

// queryRow runs a query returning one row and scans it into dst.
func (e *pgEnv) queryRow(dst any, sql string) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.db.QueryRow(ctx, sql).Scan(dst); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "no row"
	}
	return s
}

// corruptingEncoder is debezium.Encoder with one record's value spoiled by
// corrupt, for the events match picks: the consumer check must fail on it.
type corruptingEncoder struct {
	debezium.Encoder
	match   func(e *kafkasink.Event) bool
	corrupt func(value []byte) []byte
}

func (c corruptingEncoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	start := len(dst)
	out, err := c.Encoder.Encode(dst, e)
	if err != nil || !c.match(e) {
		return out, err
	}
	return append(out[:start], c.corrupt(bytes.Clone(out[start:]))...), nil
}

// TestDebeziumConsumerRefusesMalformedRecord shows the consumer check can
// fail: one delivery writes a form per case, each with one record spoiled,
// and on each the consumer exits non-zero naming the record's topic and
// the consumer that refused it.
func TestDebeziumConsumerRefusesMalformedRecord(t *testing.T) {
	debeziumConsumer(t)
	isRow := func(table string, id int) func(e *kafkasink.Event) bool {
		return func(e *kafkasink.Event) bool {
			if e.Table != table || e.After == nil {
				return false
			}
			c, ok := e.After.Get("id")
			return ok && fmt.Sprint(c.Value) == fmt.Sprint(id)
		}
	}
	cases := []struct {
		name    string
		form    consumerForm // the form whose encoder spoils one record
		match   func(e *kafkasink.Event) bool
		corrupt func([]byte) []byte
		refusal []string // what the consumer's message must say
	}{
		{
			// Cut in half: not JSON, for any consumer.
			name: "truncated JSON", form: consumerForms[0], match: isRow("ident_default", 2),
			corrupt: func(v []byte) []byte { return v[:len(v)/2] },
			refusal: []string{".ident_default partition ", ": Kafka Connect JsonConverter refused the value: "},
		},
		{
			// Valid JSON, but c_int4 is no integer: Flink's row type refuses it.
			name: "wrong type", form: consumerForms[0], match: isRow("types", 11),
			corrupt: func(v []byte) []byte {
				return bytes.Replace(v, []byte(`"c_int4":2147483647`), []byte(`"c_int4":"not a number"`), 1)
			},
			refusal: []string{".types partition ", ": Flink debezium-json refused the value: java.lang.NumberFormatException"},
		},
		{
			// A number as text in an int32 field of the schema form:
			// JsonConverter and Flink accept it; JsonConverter reads 0.
			name: "misread with schemas", form: consumerForms[1], match: isRow("types", 11),
			corrupt: func(v []byte) []byte {
				return bytes.Replace(v, []byte(`"c_int4":2147483647`), []byte(`"c_int4":"2147483647"`), 1)
			},
			refusal: []string{".types partition ", `: Kafka Connect JsonConverter read the value as something else than it holds: .payload.after.c_int4: "2147483647" read as 0`},
		},
	}
	corrupted := make([]atomic.Int64, len(cases))
	var forms []consumerForm
	for i, tc := range cases {
		form := tc.form
		// Without transaction metadata: a corruptingEncoder's
		// transaction topic would be the same for every form.
		dbz := tc.form.enc.(debezium.Encoder)
		dbz.ProvideTransactionMetadata = false
		form.enc = corruptingEncoder{Encoder: dbz, match: tc.match,
			corrupt: func(v []byte) []byte {
				out := tc.corrupt(v)
				if !bytes.Equal(out, v) {
					corrupted[i].Add(1)
				}
				return out
			}}
		forms = append(forms, form)
	}
	r := deliverWorkload(t, forms...)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if corrupted[i].Load() == 0 {
				t.Fatal("the test's hook spoiled no record: its match or its corruption no longer fits the encoder's output")
			}
			_, err := r.consume(t, i, flinkTables)
			if err == nil {
				t.Fatalf("the consumer accepted every record, one of which the test spoiled; want a failure saying %q", tc.refusal)
			}
			for _, want := range tc.refusal {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("the consumer on a spoiled record: %v, want a failure saying %q", err, tc.refusal)
				}
			}
		})
	}
}

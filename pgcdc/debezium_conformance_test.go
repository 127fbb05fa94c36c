package pgcdc

// The Debezium conformance ratchet (issue 9). The real Debezium 3.6.1
// PostgreSQL connector's records for one workload are committed as golden
// files in testdata/debezium (scripts/debezium-capture.sh makes them). This
// test runs the same workload through Run and kafkasink's DebeziumEncoder,
// reads the topics back, and lists every difference. DebeziumEncoder does
// not conform yet, so the test does not demand an empty list: it demands
// the list committed in testdata/debezium/deviations-*.txt, and fails when
// a difference appears or disappears. Fix a difference, run with -update,
// and review that the file only lost lines.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// debeziumData is where the workload, the golden files and the deviation
// lists live.
const debeziumData = "../testdata/debezium"

// debeziumSchema is the schema the workload creates; the test runs it
// under a unique name and maps that name back before comparing.
const debeziumSchema = "dbzconf"

// debeziumConfigs are the Debezium configurations of testdata/debezium
// (configs/<name>.properties), each as the DebeziumEncoder options that
// mirror its properties, and the topic prefix its sinks write under (two
// sinks per configuration, without and with SchemasEnable, see
// debeziumVariants; records are compared under Debezium's "dbz").
var debeziumConfigs = []struct {
	name, prefix string
	enc          debezium.Encoder
}{
	{"defaults", "dbz", debezium.Encoder{Name: "dbz"}},
	// decimal.handling.mode=string, skipped.operations=none.
	{"decimal-string", "dbzds", debezium.Encoder{Name: "dbz", DecimalHandling: debezium.DecimalString, SkippedOperations: "none"}},
	// time.precision.mode=isostring, interval.handling.mode=string.
	{"isostring", "dbziso", debezium.Encoder{Name: "dbz", TimePrecision: debezium.TimeIsostring, IntervalHandling: debezium.IntervalString}},
	// decimal.handling.mode=double, time.precision.mode=connect,
	// binary.handling.mode=hex.
	{"double-connect-hex", "dbzdch", debezium.Encoder{Name: "dbz", DecimalHandling: debezium.DecimalDouble, TimePrecision: debezium.TimeConnect, BinaryHandling: debezium.BinaryHex}},
	// time.precision.mode=adaptive_time_microseconds,
	// binary.handling.mode=base64-url-safe.
	{"micros-urlsafe", "dbzmu", debezium.Encoder{Name: "dbz", TimePrecision: debezium.TimeAdaptiveTimeMicroseconds, BinaryHandling: debezium.BinaryBase64URLSafe}},
	// binary.handling.mode=base64.
	{"base64", "dbzb64", debezium.Encoder{Name: "dbz", BinaryHandling: debezium.BinaryBase64}},
	// provide.transaction.metadata=true; each sink's transaction topic
	// is under its own prefix (see debeziumEncoder).
	{"txmeta", "dbztx", debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}},
}

// debeziumEncoder is the encoder of a configuration's sink of variant v,
// writing under prefix: its transaction topic, when it has one, is
// <prefix>.transaction, so that the sinks of a configuration do not
// share it.
func debeziumEncoder(enc debezium.Encoder, prefix string, v debeziumVariant) debezium.Encoder {
	enc.SchemasEnable, enc.MatchDebeziumLosses = v.schemas, v.losses
	if enc.ProvideTransactionMetadata {
		enc.TransactionTopic = prefix + ".transaction"
	}
	return enc
}

// TestDebeziumConformance runs testdata/debezium's workload through a real
// PostgreSQL, Run (initial snapshot, then streaming) and exactly-once
// sinks with DebeziumEncoder on the fake cluster, two per configuration of
// debeziumConfigs (SchemasEnable false and true), each batch written to
// all of them, reads every topic back read_committed, and compares each
// sink's records with Debezium's for that configuration (for "defaults",
// Debezium 3.6.1 with no setting changed) with JsonConverter
// schemas.enable set as the sink's SchemasEnable. Only what differs from
// run to run is normalized (see normalizeDebezium). The differences must
// be exactly those listed in deviations-<config>-schemas-<false|true>.txt.
func TestDebeziumConformance(t *testing.T) {
	e := newPGEnv(t)
	sinktest.SkipWithoutExtension(t, e.db, "hstore")
	schema := e.name
	t.Cleanup(func() { e.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE") })
	for _, stmt := range workloadStatements(t, "workload.sql", schema) {
		e.exec(stmt)
	}
	tables := debeziumTables(t)
	golden := make(map[string]map[bool][]dbzRecord)
	for _, c := range debeziumConfigs {
		golden[c.name] = map[bool][]dbzRecord{
			false: readDebeziumGolden(t, c.name+"-schemas-false.jsonl"),
			true:  readDebeziumGolden(t, c.name+"-schemas-true.jsonl"),
		}
	}
	snapshotRows := 0
	for _, r := range golden["defaults"][false] {
		if r.op() == "r" && slices.Contains(tables, strings.TrimPrefix(r.Topic, "dbz."+debeziumSchema+".")) {
			snapshotRows++
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One sink per configuration and schemas.enable setting; the
	// schema-carrying one (SchemasEnable) writes under the prefix with
	// "s" appended.
	var sinks []*kafkasink.Sink
	for _, c := range debeziumConfigs {
		for _, v := range debeziumVariants {
			prefix := v.prefix(c.prefix)
			enc := debeziumEncoder(c.enc, prefix, v)
			sink, err := kafkasink.New(ctx, kafkasink.Config{
				Brokers:   e.brokers,
				SinkID:    e.name + "_" + prefix,
				Topics:    kafkasink.Topics{Prefix: prefix, Partitions: 1},
				KeyFormat: kafkasink.KeyJSON,
				Encoder:   enc,
			})
			if err != nil {
				t.Fatalf("kafkasink.New: %v", err)
			}
			t.Cleanup(func() { sink.Close(context.Background()) })
			sinks = append(sinks, sink)
		}
	}
	runDebeziumWorkload(t, ctx, e, schema, tables, snapshotRows, sinks)

	for _, c := range debeziumConfigs {
		for _, v := range debeziumVariants {
			prefix := v.prefix(c.prefix)
			var topics []string
			for _, table := range tables {
				topics = append(topics, prefix+"."+schema+"."+table)
			}
			if t := debeziumEncoder(c.enc, prefix, v).FrameTopic(); t != "" {
				topics = append(topics, t)
			}
			ours := make([]dbzRecord, 0, len(golden[c.name][v.schemas]))
			for _, rec := range sinktest.ReadCommitted(t, e.brokers, topics...) {
				r := ourDebeziumRecord(rec, schema)
				r.Topic = "dbz" + strings.TrimPrefix(r.Topic, prefix)
				ours = append(ours, r)
			}
			t.Run(fmt.Sprintf("%s/schemas.enable=%t/MatchDebeziumLosses=%t", c.name, v.schemas, v.losses), func(t *testing.T) {
				got := debeziumDeviations(golden[c.name][v.schemas], ours)
				if c.enc.ProvideTransactionMetadata {
					got = append(got, transactionDeviations(golden[c.name][v.schemas], ours)...)
				}
				file := fmt.Sprintf("deviations-%s-schemas-%t.txt", c.name, v.schemas)
				if v.losses {
					checkLossesMatched(t, file, got)
				} else {
					checkDeviations(t, c.name, file, got)
				}
			})
		}
	}
}

// debeziumVariants are the sinks run per configuration: JsonConverter's
// schemas.enable false and true, each also with MatchDebeziumLosses.
var debeziumVariants = []debeziumVariant{{false, false}, {true, false}, {false, true}, {true, true}}

type debeziumVariant struct{ schemas, losses bool }

// prefix is the variant's topic prefix: the configuration's, with "s"
// appended for SchemasEnable and "l" for MatchDebeziumLosses.
func (v debeziumVariant) prefix(prefix string) string {
	if v.schemas {
		prefix += "s"
	}
	if v.losses {
		prefix += "l"
	}
	return prefix
}

// debeziumLossColumns are the workload's columns whose values Debezium
// loses, each listed as a deviation: c_int_arr2d (nested arrays), c_name
// (streamed name columns) and c_date (a BC date read by the snapshot).
var debeziumLossColumns = []string{"c_int_arr2d", "c_name", "c_date"}

// debeziumDefaultsTable is the workload's table of column DEFAULTs: each
// of its deviations is a default Debezium declares in a schema, or a NULL
// Kafka Connect's JsonConverter (replace.null.with.default) writes as
// that default, a loss MatchDebeziumLosses reproduces (without it, the
// encoder declares no default, which JsonConverter would read in place
// of the NULLs it keeps).
const debeziumDefaultsTable = "mixed_defaults"

// debeziumDroppedArraysTable is the workload's table of array columns
// Debezium leaves out of its records (money[], interval[], varbit[],
// point[], xml[], a domain's array): each of its deviations is about
// them (a value or a schema field Debezium's records lack), a loss
// MatchDebeziumLosses reproduces.
const debeziumDroppedArraysTable = "rare_arrays"

// debeziumToastTable is the workload's table of unchanged TOASTed values:
// Debezium writes null for the placeholder of those its converters cannot
// take (a bytea in the base64 modes, a bytea array outside the bytes
// mode, a date array under time.precision.mode connect or isostring),
// where the encoder writes the placeholder in the field's form, a loss
// MatchDebeziumLosses reproduces.
const debeziumToastTable = "toast_types"

// debeziumZerosTable is the workload's table of trailing and negative
// zeros: its deviations in debeziumStrippedColumns, its numeric columns
// without a declared scale, are the trailing zeros Debezium strips in the
// default decimal mode, a loss MatchDebeziumLosses reproduces.
const debeziumZerosTable = "num_zeros"

var debeziumStrippedColumns = []string{"n_var", "a_var"}

// isDebeziumLoss reports whether a deviation line is one MatchDebeziumLosses
// reproduces: one of Debezium's losses (debeziumLossColumns,
// debeziumDefaultsTable's defaults, debeziumDroppedArraysTable's columns,
// debeziumToastTable's placeholders Debezium writes as null,
// debeziumZerosTable's stripped trailing zeros), or the TRUNCATE's null
// key.
func isDebeziumLoss(line string) bool {
	if strings.HasPrefix(line, debeziumDefaultsTable+"[") || strings.HasPrefix(line, debeziumDroppedArraysTable+"[") {
		return true
	}
	if strings.HasPrefix(line, debeziumZerosTable+"[") && slices.ContainsFunc(debeziumStrippedColumns, func(c string) bool {
		return strings.Contains(line, "."+c+".") || strings.Contains(line, "."+c+"[")
	}) {
		return true
	}
	if strings.HasPrefix(line, debeziumToastTable+"[") && strings.Contains(line, ": debezium=null ours=") {
		return true
	}
	if strings.HasPrefix(line, "truncated[") && strings.Contains(line, ": key: ") {
		return true // the TRUNCATE's key: the sink's event id, Debezium's null
	}
	return slices.ContainsFunc(debeziumLossColumns, func(c string) bool { return strings.Contains(line, "after."+c) })
}

// checkLossesMatched demands that a sink with MatchDebeziumLosses differs
// from Debezium exactly by the deviations in file that are not losses
// (isDebeziumLoss): each loss is reproduced, nothing else changes.
func checkLossesMatched(t *testing.T, file string, got []string) {
	t.Helper()
	var want []string
	for _, line := range readDeviations(t, filepath.Join(debeziumData, file)) {
		if !isDebeziumLoss(line) {
			want = append(want, line)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("with MatchDebeziumLosses the differences from Debezium are\n%s\nwant the deviations of %s that are not losses (columns %v, %s's defaults, %s's arrays, %s's null placeholders, %s's stripped zeros in %v, the TRUNCATE key):\n%s",
			strings.Join(got, "\n"), file, debeziumLossColumns, debeziumDefaultsTable, debeziumDroppedArraysTable, debeziumToastTable, debeziumZerosTable, debeziumStrippedColumns, strings.Join(want, "\n"))
	}
}

// checkDeviations compares the differences found with the committed list

// runDebeziumWorkload runs the workload's changes through Run into sinks:
// an initial snapshot of tables (schema's, snapshotRows rows in all), then,
// as Debezium's capture did once its snapshot was complete, the statements
// of workload-changes.sql, until the end marker (zz_end) is written. Each
// batch is written to every sink, in order.
func runDebeziumWorkload(t *testing.T, ctx context.Context, e *pgEnv, schema string, tables []string, snapshotRows int, sinks []*kafkasink.Sink) {
	t.Helper()
	var reads atomic.Int64
	var ended atomic.Bool
	watched := &recSink{Sink: sinks[0], tr: newTracker(), after: func(_ int, b *kafkasink.Batch) error {
		for _, other := range sinks[1:] {
			if err := other.Write(ctx, *b); err != nil {
				return err
			}
		}
		for i := range b.Events {
			if b.Events[i].Op == kafkasink.OpRead {
				reads.Add(1)
			}
			if b.Events[i].Table == "zz_end" {
				ended.Store(true)
			}
		}
		return nil
	}}
	cfg := e.config()
	for _, table := range tables {
		cfg.Tables = append(cfg.Tables, schema+"."+table)
	}
	cfg.Snapshot = true
	// no_pk has no key: Debezium writes its records with a null key.
	cfg.KeylessTables = true
	stop, r := start(t, cfg, watched)
	// Debezium applied the changes once its snapshot was complete; so does
	// this test, so that both see the same rows in the snapshot.
	waitFor(t, 60*time.Second, fmt.Sprintf("the %d snapshot rows", snapshotRows), r, func() bool { return reads.Load() >= int64(snapshotRows) })
	for _, stmt := range workloadStatements(t, "workload-changes.sql", schema) {
		e.exec(stmt)
	}
	waitFor(t, 60*time.Second, "the end marker (zz_end)", r, ended.Load)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
}

// in file, or rewrites the file with -update.
func checkDeviations(t *testing.T, config, file string, got []string) {
	t.Helper()
	path := filepath.Join(debeziumData, file)
	if *updateGolden {
		var b strings.Builder
		test, _, _ := strings.Cut(t.Name(), "/")
		b.WriteString(strings.NewReplacer("{config}", config, "{test}", test).Replace(deviationsHeader))
		for _, line := range got {
			b.WriteString(line + "\n")
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readDeviations(t, path)
	var fixed, added []string
	for _, line := range want {
		if !slices.Contains(got, line) {
			fixed = append(fixed, "- "+line)
		}
	}
	for _, line := range got {
		if !slices.Contains(want, line) {
			added = append(added, "+ "+line)
		}
	}
	if len(fixed) > 0 || len(added) > 0 {
		t.Errorf("the differences from Debezium changed (%d listed in %s no longer occur, %d are new); "+
			"if that is the intended progress, rerun with -update and review the diff:\n%s",
			len(fixed), path, len(added), strings.Join(append(fixed, added...), "\n"))
	}
}

// readDeviations returns the deviation lines of a committed list.
func readDeviations(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it, then review it)", err)
	}
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

const deviationsHeader = `# Differences between Debezium 3.6.1 (configuration "{config}") and
# kafkasink's pipeline (pgcdc.Run + DebeziumEncoder) for the workload in
# this directory, kept by {test} in pgcdc (a ratchet:
# the test fails when this list changes; -update rewrites it).
#
# One line per difference:
#   <table>[<i>] <op> <key>: <path>: debezium=<value> ours=<value>
# where [<i>] is the record's index among Debezium's records of that
# table, <op> its op ("tombstone" for a null value), <key> Debezium's key
# columns and their values. "missing in ours" and "not in Debezium's
# output" are whole records. <absent> is a field that is not there.
# Normalized on both sides before comparing (they differ run to run):
# top-level and source ts_ms/ts_us/ts_ns, source lsn/txId/xmin (a number
# becomes 0 when it is 0, else 1; a string has each digit run replaced by
# N), source.sequence and transaction.id (digit runs to N),
# source.version, and the __debezium.context.runId header. The unique
# schema name this test runs the workload under is mapped back to dbzconf.
# Long strings are cut to 60 characters and their length.
`

// dbzRecord is one Kafka record as the golden files hold it: key and value
// are JSON (null for a null key or value), header values strings.
type dbzRecord struct {
	Topic   string          `json:"topic"`
	Key     json.RawMessage `json:"key"`
	Value   json.RawMessage `json:"value"`
	Headers []dbzHeader     `json:"headers"`
}

type dbzHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// op returns the record's op, "tombstone" for a null value, or "" when
// the value has none.
func (r dbzRecord) op() string {
	v := decodeJSON(r.Value)
	if v == nil {
		return "tombstone"
	}
	op, _ := unwrapPayload(v).(map[string]any)["op"].(string)
	return op
}

func readDebeziumGolden(t *testing.T, file string) []dbzRecord {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(debeziumData, file))
	if err != nil {
		t.Fatalf("%v (scripts/debezium-capture.sh makes it)", err)
	}
	var out []dbzRecord
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r dbzRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s line %d: %v", file, i+1, err)
		}
		out = append(out, r)
	}
	return out
}

// ourDebeziumRecord turns a record the sink wrote into the golden files'
// form, with the test's unique schema name mapped back to dbzconf.
func ourDebeziumRecord(rec *kgo.Record, schema string) dbzRecord {
	rename := func(b []byte) json.RawMessage {
		if b == nil {
			return json.RawMessage("null")
		}
		return bytes.ReplaceAll(b, []byte(schema), []byte(debeziumSchema))
	}
	r := dbzRecord{
		Topic: strings.ReplaceAll(rec.Topic, schema, debeziumSchema),
		Key:   rename(rec.Key),
		Value: rename(rec.Value),
	}
	for _, h := range rec.Headers {
		v := string(rename(h.Value))
		r.Headers = append(r.Headers, dbzHeader{Key: h.Key, Value: &v})
	}
	return r
}

// debeziumTables lists the workload's tables in the order workload.sql
// creates them.
func debeziumTables(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(debeziumData, "workload.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, m := range regexp.MustCompile(`(?m)^CREATE TABLE `+debeziumSchema+`\.(\w+)`).FindAllSubmatch(data, -1) {
		tables = append(tables, string(m[1]))
	}
	return tables
}

// workloadStatements reads a workload file and splits it into statements,
// as psql runs them (each in its own transaction unless the file says
// BEGIN), with schema dbzconf renamed to schema. psql meta-commands
// (lines starting with a backslash) are left out.
func workloadStatements(t *testing.T, file, schema string) []string {
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
	sql := regexp.MustCompile(`\b`+debeziumSchema+`\b`).ReplaceAllString(strings.Join(lines, "\n"), schema)
	return splitSQL(sql)
}

var dollarQuote = regexp.MustCompile(`^\$\w*\$`)

// splitSQL splits a script at the semicolons outside string literals,
// quoted identifiers, dollar-quoted bodies and -- comments, dropping
// statements that are empty or only comments.
func splitSQL(sql string) []string {
	var out []string
	start := 0
	meaningful := false
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(sql)
			}
		case c == '\'' || c == '"':
			// A doubled quote inside ends this literal and opens the
			// next, which reads the same.
			if j := strings.IndexByte(sql[i+1:], c); j >= 0 {
				i += j + 1
			} else {
				i = len(sql)
			}
			meaningful = true
		case c == '$':
			if m := dollarQuote.FindString(sql[i:]); m != "" {
				if j := strings.Index(sql[i+len(m):], m); j >= 0 {
					i += len(m) + j + len(m) - 1
				} else {
					i = len(sql)
				}
			}
			meaningful = true
		case c == ';':
			if meaningful {
				out = append(out, strings.TrimSpace(sql[start:i]))
			}
			start, meaningful = i+1, false
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			meaningful = true
		}
	}
	if meaningful {
		out = append(out, strings.TrimSpace(sql[start:]))
	}
	return out
}

// debeziumDeviations lists every difference between Debezium's records
// (want) and ours, table by table. Within a table, records are paired in
// order by op and key (a longest common subsequence), so a record one
// side lacks shows as one line instead of shifting every later pair.
func debeziumDeviations(want, ours []dbzRecord) []string {
	topicOf := func(r dbzRecord) string { return r.Topic }
	w, o := groupBy(want, topicOf), groupBy(ours, topicOf)
	var out []string
	for _, topic := range sortedKeys(w, o) {
		out = append(out, topicDeviations(topic, w[topic], o[topic])...)
	}
	return out
}

func topicDeviations(topic string, want, ours []dbzRecord) []string {
	table := strings.TrimPrefix(topic, "dbz."+debeziumSchema+".")
	keyCols := debeziumKeyColumns(want)
	ws := make([]string, len(want))
	for i, r := range want {
		ws[i] = recordSignature(r, keyCols)
	}
	oursSigs := make([]string, len(ours))
	for i, r := range ours {
		oursSigs[i] = recordSignature(r, keyCols)
	}
	var out []string
	i, j := 0, 0
	for _, p := range lcsPairs(ws, oursSigs) {
		for ; i < p[0]; i++ {
			out = append(out, fmt.Sprintf("%s[%d] %s: missing in ours", table, i, ws[i]))
		}
		for ; j < p[1]; j++ {
			out = append(out, fmt.Sprintf("%s ours[%d] %s: not in Debezium's output", table, j, oursSigs[j]))
		}
		label := fmt.Sprintf("%s[%d] %s", table, i, ws[i])
		for _, d := range recordDiff(want[i], ours[j]) {
			out = append(out, label+": "+d)
		}
		i, j = i+1, j+1
	}
	for ; i < len(ws); i++ {
		out = append(out, fmt.Sprintf("%s[%d] %s: missing in ours", table, i, ws[i]))
	}
	for ; j < len(oursSigs); j++ {
		out = append(out, fmt.Sprintf("%s ours[%d] %s: not in Debezium's output", table, j, oursSigs[j]))
	}
	return out
}

// debeziumKeyColumns returns the names of the key's fields in Debezium's
// records of one table, in key order, or nil when its key is null.
func debeziumKeyColumns(rs []dbzRecord) []string {
	for _, r := range rs {
		dec := json.NewDecoder(bytes.NewReader(unwrapPayloadRaw(r.Key)))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			continue // a null key
		}
		var cols []string
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			cols = append(cols, tok.(string))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break
			}
		}
		return cols
	}
	return nil
}

// recordSignature is what pairs records: the op and the values of the key
// columns, from the row image (after, else before), or from the key of a
// tombstone.
func recordSignature(r dbzRecord, keyCols []string) string {
	if status := txnStatus(r); status != "" {
		return status // a transaction's BEGIN or END, whose id differs run to run
	}
	op := r.op()
	var row map[string]any
	if op == "tombstone" {
		row, _ = unwrapPayload(decodeJSON(r.Key)).(map[string]any)
	} else if v, ok := unwrapPayload(decodeJSON(r.Value)).(map[string]any); ok {
		if row, _ = v["after"].(map[string]any); row == nil {
			row, _ = v["before"].(map[string]any)
		}
	}
	var b strings.Builder
	b.WriteString(op)
	for i, c := range keyCols {
		if i == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", c, renderJSON(row[c]))
	}
	return b.String()
}

// lcsPairs returns the index pairs of a longest common subsequence of a
// and b, in order.
func lcsPairs(a, b []string) [][2]int {
	n, m := len(a), len(b)
	l := make([][]int, n+1)
	for i := range l {
		l[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	var out [][2]int
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case a[i] == b[j]:
			out = append(out, [2]int{i, j})
			i, j = i+1, j+1
		case l[i+1][j] >= l[i][j+1]:
			i++
		default:
			j++
		}
	}
	return out
}

// recordDiff lists the differences of two paired records: key, value, and
// the headers Debezium writes (ours may carry more: a Debezium reader
// ignores headers it does not know).
func recordDiff(want, ours dbzRecord) []string {
	var out []string
	add := func(path string, w, o any) {
		out = append(out, fmt.Sprintf("%s: debezium=%s ours=%s", path, renderJSON(w), renderJSON(o)))
	}
	diffDocument("key", normalizeTxnKey(decodeJSON(want.Key)), normalizeTxnKey(normalizeEventID(decodeJSON(ours.Key))), add)
	diffDocument("value", normalizeDebezium(decodeJSON(want.Value)), normalizeDebezium(decodeJSON(ours.Value)), add)
	for _, h := range want.Headers {
		w, o := headerValue(want.Headers, h.Key), headerValue(ours.Headers, h.Key)
		if w != o {
			add("header "+h.Key, w, o)
		}
	}
	return out
}

// headerValue returns the header's value, normalized, or absent.
func headerValue(hs []dbzHeader, key string) any {
	for _, h := range hs {
		if h.Key != key {
			continue
		}
		switch {
		case h.Value == nil:
			return nil
		case key == "__debezium.context.runId":
			return "<run>"
		}
		return *h.Value
	}
	return sinktest.Absent{}
}

// diffDocument compares a key or value. A schema-carrying document
// ({"schema":...,"payload":...}) that ours is not counts as one
// difference, and its payload is then compared with ours as a whole.
func diffDocument(path string, want, ours any, add func(string, any, any)) {
	if w, ok := want.(map[string]any); ok && isSchemaForm(w) {
		if o, ok := ours.(map[string]any); !ok || !isSchemaForm(o) {
			add(path+".schema", schemaSummary(w["schema"]), sinktest.Absent{})
			sinktest.DiffTrees(path+".payload", w["payload"], ours, sameJSONLeaf, add)
			return
		}
	}
	sinktest.DiffTrees(path, want, ours, sameJSONLeaf, add)
}

func isSchemaForm(m map[string]any) bool {
	_, s := m["schema"]
	_, p := m["payload"]
	return s && p && len(m) == 2
}

// schemaSummary names a Connect schema by its name, or its type.
func schemaSummary(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	if name, ok := m["name"]; ok {
		return fmt.Sprintf("<schema %s>", name)
	}
	return fmt.Sprintf("<schema %s>", m["type"])
}

// sameJSONLeaf reports whether two decoded JSON leaves are the same:
// numbers by value (sameNumber), strings, booleans and null as they are.
func sameJSONLeaf(want, ours any) bool {
	if w, ok := want.(json.Number); ok {
		o, ok := ours.(json.Number)
		return ok && sameNumber(w, o)
	}
	return want == ours
}

// sortedKeys returns the keys of a and b, each once, sorted.
func sortedKeys[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// sameNumber reports whether two JSON numbers are the same value, however
// written (-2.25E-300 and -2.25e-300, 1.0 and 1), a zero's sign included
// as readers that type numbers by their spelling see it: -0.0 is negative
// zero, and -0, which Jackson's defaults and Python read as the integer 0,
// is zero (so a float column's -0.0 written as -0 or 0 is a difference).
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, _, errX := big.ParseFloat(string(a), 10, 256, big.ToNearestEven)
	y, _, errY := big.ParseFloat(string(b), 10, 256, big.ToNearestEven)
	return errX == nil && errY == nil && x.Cmp(y) == 0 && negativeZero(a, x) == negativeZero(b, y)
}

// negativeZero reports whether n, parsed as f, is a negative zero that a
// reader typing numbers by their spelling keeps: one with a fraction or
// an exponent.
func negativeZero(n json.Number, f *big.Float) bool {
	return f.Sign() == 0 && f.Signbit() && strings.ContainsAny(string(n), ".eE")
}

// normalizeDebezium replaces, in a Debezium value, what differs from run to
// run (times, positions, transaction ids, the version), keeping whether a
// field is there, its JSON type, and whether a number is zero.
func normalizeDebezium(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if isSchemaForm(m) {
		m["payload"] = normalizeDebezium(m["payload"])
		return m
	}
	for _, k := range []string{"ts_ms", "ts_us", "ts_ns"} {
		normalizeField(m, k)
	}
	if src, ok := m["source"].(map[string]any); ok {
		for _, k := range []string{"ts_ms", "ts_us", "ts_ns", "lsn", "txId", "xmin", "sequence"} {
			normalizeField(src, k)
		}
		if _, ok := src["version"].(string); ok {
			src["version"] = "<version>"
		}
	}
	if tx, ok := m["transaction"].(map[string]any); ok {
		normalizeField(tx, "id")
	}
	if _, ok := m["status"]; ok { // a BEGIN or END
		normalizeField(m, "id")
	}
	return m
}

// normalizeTxnKey normalizes the id of a BEGIN's or END's key
// ({"id":"<txId>:<LSN>"}), which differs from run to run.
func normalizeTxnKey(key any) any {
	if m, ok := key.(map[string]any); ok {
		if isSchemaForm(m) {
			m["payload"] = normalizeTxnKey(m["payload"])
		} else if len(m) == 1 {
			if id, ok := m["id"].(string); ok && txnID.MatchString(id) {
				m["id"] = "N:N"
			}
		}
	}
	return key
}

// txnID is the form of Debezium's transaction id.
var txnID = regexp.MustCompile(`^[0-9]+:[0-9]+$`)

// txnStatus is the status of a BEGIN or END record, "" for another.
func txnStatus(r dbzRecord) string {
	v, _ := unwrapPayload(decodeJSON(r.Value)).(map[string]any)
	status, _ := v["status"].(string)
	return status
}

var digitRuns = regexp.MustCompile(`[0-9]+`)

// eventID is the form of Event.ID, which keys our records of tables
// without a key (a truncate's): it differs from run to run.
var eventID = regexp.MustCompile(`^[0-9A-F]+/[0-9A-F]+:[0-9]+$`)

// normalizeEventID replaces a key that is an event id by "<event id>",
// the payload of a schema-carrying key (SchemasEnable) too.
func normalizeEventID(key any) any {
	if m, ok := key.(map[string]any); ok && isSchemaForm(m) {
		m["payload"] = normalizeEventID(m["payload"])
		return m
	}
	if s, ok := key.(string); ok && eventID.MatchString(s) {
		return "<event id>"
	}
	return key
}

func normalizeField(m map[string]any, k string) {
	switch v := m[k].(type) {
	case json.Number:
		if v == "0" {
			m[k] = json.Number("0")
		} else {
			m[k] = json.Number("1")
		}
	case string:
		m[k] = digitRuns.ReplaceAllString(v, "N")
	}
}

// decodeJSON decodes with numbers kept as written; invalid JSON is kept
// as its text, which then differs from anything valid.
func decodeJSON(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "<invalid JSON " + string(b) + ">"
	}
	return v
}

func unwrapPayload(v any) any {
	if m, ok := v.(map[string]any); ok && isSchemaForm(m) {
		return m["payload"]
	}
	return v
}

// unwrapPayloadRaw returns the payload of a schema-carrying document, with
// its fields in their order, or the document itself.
func unwrapPayloadRaw(b []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil && len(m) == 2 && m["schema"] != nil && m["payload"] != nil {
		return m["payload"]
	}
	return b
}

// renderJSON writes a value compactly for a deviation line, long strings
// cut.
func renderJSON(v any) string {
	if _, ok := v.(sinktest.Absent); ok {
		return "<absent>"
	}
	if s, ok := v.(string); ok && len([]rune(s)) > 60 {
		v = fmt.Sprintf("%s…(%d bytes)", string([]rune(s)[:60]), len(s))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	out := []rune(strings.TrimSuffix(b.String(), "\n"))
	if len(out) > 200 {
		return string(out[:200]) + "…"
	}
	return string(out)
}

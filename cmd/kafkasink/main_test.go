package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// TestStreamsRowsIntoKafka runs the program against the real PostgreSQL and
// Kafka of scripts/testenv.sh: rows inserted, updated and deleted arrive in
// the table's topic once each, progress is logged with the lag, and a
// cancelled context (what SIGTERM does) stops it with status 0.
func TestStreamsRowsIntoKafka(t *testing.T) {
	pg, brokers := os.Getenv("KAFKASINK_TEST_PG"), os.Getenv("KAFKASINK_TEST_BROKERS")
	var missing []string
	if pg == "" {
		missing = append(missing, "KAFKASINK_TEST_PG")
	}
	if brokers == "" {
		missing = append(missing, "KAFKASINK_TEST_BROKERS")
	}
	if missing != nil {
		t.Skipf("%s not set: start scripts/testenv.sh and eval \"$(scripts/testenv.sh env)\"", strings.Join(missing, " and "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("kafkasink_cmd_%06d", rand.IntN(1e6))
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatalf("connecting to KAFKASINK_TEST_PG: %v", err)
	}
	t.Cleanup(func() { dropAll(db, name, brokers) })
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY, note text)"); err != nil {
		t.Fatal(err)
	}

	var out sinktest.SyncBuffer
	runCtx, stop := context.WithCancel(ctx)
	status := make(chan int, 1)
	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-partitions", "3", "-batch-max-wait", "20ms", "-progress", "300ms", "-log-format", "text"}
	go func() { status <- run(runCtx, args, func(k string) string { return env(k, brokers) }, &out) }()
	defer stop()

	// The slot is created by the program; changes made before it exists
	// are not in it, so wait for it.
	waitFor(t, 60*time.Second, "the replication slot", status, &out, func() bool {
		var n int
		db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&n)
		return n == 1
	})
	for _, sql := range []string{
		"INSERT INTO " + name + " SELECT g, 'row ' || g FROM generate_series(1, 20) g",
		"UPDATE " + name + " SET note = 'changed' WHERE id <= 5",
		"DELETE FROM " + name + " WHERE id = 20",
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	const want = 20 + 5 + 1
	topic := name + ".public." + name
	var recs int
	waitFor(t, 60*time.Second, fmt.Sprintf("%d records in %s", want, topic), status, &out, func() bool {
		recs = len(sinktest.ReadCommitted(t, []string{brokers}, topic))
		return recs >= want
	})
	progressLine := regexp.MustCompile(fmt.Sprintf(`msg=progress events=%d .*lag_seconds=\S+ lag_bytes=\d+`, want))
	waitFor(t, 30*time.Second, "a progress line counting every event, with the lag", status, &out, func() bool {
		return progressLine.MatchString(out.String())
	})
	stop()
	select {
	case code := <-status:
		if code != 0 {
			t.Fatalf("exit status %d after cancellation, want 0:\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("did not stop within 30s of cancellation:\n%s", out.String())
	}

	records := sinktest.ReadCommitted(t, []string{brokers}, topic)
	ops := map[string]int{}
	ids := map[string]bool{}
	for _, r := range records {
		ops[sinktest.Header(r, kafkasink.HeaderOp)]++
		id := sinktest.Header(r, kafkasink.HeaderID)
		if ids[id] {
			t.Errorf("event %s delivered twice", id)
		}
		ids[id] = true
	}
	if len(records) != want || ops["insert"] != 20 || ops["update"] != 5 || ops["delete"] != 1 {
		t.Fatalf("read %d records %v, want 20 inserts, 5 updates, 1 delete", len(records), ops)
	}
	var progress string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "msg=progress") {
			progress = line
		}
	}
	t.Log("last progress line: ", progress)
}

// env is the test's environment: the broker, nothing else, so settings of
// the developer's shell do not leak into the run.
func env(k, brokers string) string {
	if k == "KAFKASINK_BROKERS" {
		return brokers
	}
	return ""
}

func waitFor(t *testing.T, timeout time.Duration, what string, status chan int, out *sinktest.SyncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case code := <-status:
			t.Fatalf("the program exited with status %d while waiting for %s:\n%s", code, what, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s:\n%s", timeout, what, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dropAll removes the slot (ending a walsender that still holds it), the
// publication, the table and its topic.
func dropAll(db *pgx.Conn, name, brokers string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sinktest.DropSlot(ctx, db, name)
	db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name)
	db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	db.Close(ctx)
	if cl, err := kgo.NewClient(kgo.SeedBrokers(brokers)); err == nil {
		kadm.NewClient(cl).DeleteTopics(ctx, name+".public."+name)
		cl.Close()
	}
}

// TestFlagsOverrideEnvironment pins the precedence: a flag on the command
// line wins over its environment variable, which wins over the default;
// the SASL password comes from the environment only.
func TestFlagsOverrideEnvironment(t *testing.T) {
	environ := map[string]string{
		"KAFKASINK_BROKERS":          "env:9092",
		"KAFKASINK_MODE":             "idempotent",
		"KAFKASINK_BATCH_MAX_EVENTS": "77",
		"KAFKASINK_SNAPSHOT":         "true",
		"KAFKASINK_SASL_MECHANISM":   "scram-sha-512",
		"KAFKASINK_SASL_USER":        "cdc",
		"KAFKASINK_SASL_PASSWORD":    "hunter2",
		"KAFKASINK_TLS_CA":           "/ca.pem",
	}
	var stderr bytes.Buffer
	o, err := parse([]string{"-brokers", "flag:9092", "-pg", "postgres://h/db", "-encoder", "debezium"}, func(k string) string { return environ[k] }, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	kcfg, pcfg, err := o.configs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := kcfg.Brokers; len(got) != 1 || got[0] != "flag:9092" {
		t.Errorf("Brokers %v, want the flag's [flag:9092]", got)
	}
	if kcfg.Mode != kafkasink.Idempotent || pcfg.BatchMaxEvents != 77 || !pcfg.Snapshot {
		t.Errorf("environment not applied: mode %v, batch %d, snapshot %t", kcfg.Mode, pcfg.BatchMaxEvents, pcfg.Snapshot)
	}
	if _, ok := kcfg.Encoder.(kafkasink.DebeziumEncoder); !ok {
		t.Errorf("Encoder %T, want DebeziumEncoder", kcfg.Encoder)
	}
	if kcfg.SASL == nil || kcfg.SASL.Mechanism != kafkasink.SASLScramSHA512 || kcfg.SASL.Username != "cdc" || kcfg.SASL.Password != "hunter2" {
		t.Errorf("SASL %+v", kcfg.SASL)
	}
	if kcfg.TLS == nil || kcfg.TLS.CAFile != "/ca.pem" {
		t.Errorf("TLS %+v", kcfg.TLS)
	}
	if kcfg.SinkID != "kafkasink" || pcfg.Slot != "kafkasink" {
		t.Errorf("SinkID %q, Slot %q: want both the default slot name", kcfg.SinkID, pcfg.Slot)
	}

	if o.slotGap != pgcdc.SlotGapRefuse || pcfg.SlotGap != pgcdc.SlotGapRefuse {
		t.Errorf("default slot gap policy %v, want refuse", pcfg.SlotGap)
	}
	for arg, want := range map[string]pgcdc.SlotGap{"resnapshot": pgcdc.SlotGapResnapshot, "accept": pgcdc.SlotGapAccept} {
		o, err := parse([]string{"-slot-gap", arg, "-retained-wal-warn", "4096"}, func(string) string { return "" }, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if _, pcfg, _ := o.configs(nil); pcfg.SlotGap != want || pcfg.RetainedWALWarn != 4096 {
			t.Errorf("-slot-gap %s -retained-wal-warn 4096: SlotGap %v, RetainedWALWarn %d", arg, pcfg.SlotGap, pcfg.RetainedWALWarn)
		}
	}
	if _, err := parse([]string{"-slot-gap", "ignore"}, func(string) string { return "" }, &stderr); err == nil || !strings.Contains(err.Error(), "-slot-gap") {
		t.Errorf("-slot-gap ignore: %v, want an error naming the flag", err)
	}

	if _, err := parse([]string{"-sasl-password", "x"}, func(string) string { return "" }, &stderr); err == nil {
		t.Error("-sasl-password was accepted: the password must not be a flag")
	}
	if _, err := parse(nil, func(k string) string { return map[string]string{"KAFKASINK_BATCH_MAX_EVENTS": "many"}[k] }, &stderr); err == nil || !strings.Contains(err.Error(), "KAFKASINK_BATCH_MAX_EVENTS") {
		t.Errorf("a bad environment value: %v, want an error naming it", err)
	}
	o, _ = parse([]string{"-encoder", "xml", "-key-format", "yaml", "-key-columns", "public.t"}, func(string) string { return "" }, &stderr)
	if _, _, err := o.configs(nil); err == nil || !strings.Contains(err.Error(), "-encoder") || !strings.Contains(err.Error(), "-key-format") ||
		!strings.Contains(err.Error(), "-pg") || !strings.Contains(err.Error(), "-key-columns") {
		t.Errorf("configs: %v, want every problem at once", err)
	}
}

// TestQuotedTablesAndRejections runs the program on two tables whose names
// need quotes in -tables: one with a dot and a comma, routed by
// -topic-routes, and one with a space, whose derived topic name is
// invalid. The first table's rows arrive in their topic; the second's
// first row stops the program with status 1 and an error that names the
// -dead-letter-topic flag.
func TestQuotedTablesAndRejections(t *testing.T) {
	pg, brokers := os.Getenv("KAFKASINK_TEST_PG"), os.Getenv("KAFKASINK_TEST_BROKERS")
	if pg == "" || brokers == "" {
		t.Skip("KAFKASINK_TEST_PG or KAFKASINK_TEST_BROKERS not set: start scripts/testenv.sh and eval \"$(scripts/testenv.sh env)\"")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("kafkasink_quoted_%06d", rand.IntN(1e6))
	routedTable, badTable := name+".a,b", name+" bad"
	routedTopic := name + ".routed"
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatalf("connecting to KAFKASINK_TEST_PG: %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, tb := range []string{routedTable, badTable} {
			db.Exec(cctx, "DROP TABLE IF EXISTS "+pgx.Identifier{tb}.Sanitize())
		}
		if cl, err := kgo.NewClient(kgo.SeedBrokers(brokers)); err == nil {
			kadm.NewClient(cl).DeleteTopics(cctx, routedTopic, name+".checkpoints")
			cl.Close()
		}
		dropAll(db, name, brokers)
	})
	for _, tb := range []string{routedTable, badTable} {
		if _, err := db.Exec(ctx, "CREATE TABLE "+pgx.Identifier{tb}.Sanitize()+" (id int PRIMARY KEY, note text)"); err != nil {
			t.Fatal(err)
		}
	}

	var out sinktest.SyncBuffer
	status := make(chan int, 1)
	args := []string{"-pg", pg, "-slot", name, "-publication", name, "-topic-prefix", name,
		"-checkpoint-topic", name + ".checkpoints", "-batch-max-wait", "20ms", "-progress", "0",
		"-tables", fmt.Sprintf(`public."%s", public."%s"`, routedTable, badTable),
		"-topic-routes", fmt.Sprintf(`public."%s"=%s`, routedTable, routedTopic)}
	go func() { status <- run(ctx, args, func(k string) string { return env(k, brokers) }, &out) }()
	waitFor(t, 60*time.Second, "the replication slot", status, &out, func() bool {
		var n int
		db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&n)
		return n == 1
	})
	if _, err := db.Exec(ctx, "INSERT INTO "+pgx.Identifier{routedTable}.Sanitize()+" SELECT g, 'row ' || g FROM generate_series(1, 3) g"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "3 records in "+routedTopic, status, &out, func() bool {
		return len(sinktest.ReadCommitted(t, []string{brokers}, routedTopic)) >= 3
	})
	if _, err := db.Exec(ctx, "INSERT INTO "+pgx.Identifier{badTable}.Sanitize()+" VALUES (1, 'x')"); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-status:
		if code != 1 {
			t.Fatalf("exit status %d, want 1:\n%s", code, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60s after an unroutable row:\n%s", out.String())
	}
	// slog's text handler escapes the quotes of the table's name.
	for _, w := range []string{"unroutable", "-dead-letter-topic", `of public.\"` + badTable + `\" (unroutable)`} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output does not contain %s:\n%s", w, out.String())
		}
	}

	rows := map[string]bool{}
	for _, r := range sinktest.ReadCommitted(t, []string{brokers}, routedTopic) {
		var v struct {
			Table string `json:"table"`
			After struct {
				ID   int    `json:"id"`
				Note string `json:"note"`
			} `json:"after"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Table != routedTable {
			t.Fatalf("record %s of table %q (%v), want one of %q", r.Value, v.Table, err, routedTable)
		}
		rows[fmt.Sprintf("%d %s", v.After.ID, v.After.Note)] = true
	}
	want := map[string]bool{"1 row 1": true, "2 row 2": true, "3 row 3": true}
	if !maps.Equal(rows, want) {
		t.Errorf("rows in %s: %v, want %v", routedTopic, rows, want)
	}
}

func TestSplitNames(t *testing.T) {
	t.Parallel()
	in := ` a.b , public."x,y", "s"".q"."t,u"=topic.one,,c `
	want := []string{"a.b", `public."x,y"`, `"s"".q"."t,u"=topic.one`, "c"}
	if got := splitNames(in); !slices.Equal(got, want) {
		t.Errorf("splitNames(%q) = %q, want %q", in, got, want)
	}
}

func TestKeyColumnsFlag(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parse([]string{"-pg", "postgres://h/db", "-brokers", "b:9092", "-key-columns", "shop.orders=tenant, id; items=sku"}, func(string) string { return "" }, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	_, pcfg, err := o.configs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if pcfg.KeyColumns == nil {
		t.Fatal("-key-columns did not set pgcdc.Config.KeyColumns")
	}
	for _, tc := range []struct {
		schema, table string
		want          []string
	}{{"shop", "orders", []string{"tenant", "id"}}, {"public", "items", []string{"sku"}}, {"public", "other", nil}} {
		if got, _ := pcfg.KeyColumns.Columns(tc.schema, tc.table); !slices.Equal(got, tc.want) {
			t.Errorf("KeyColumns(%s, %s) = %q, want %q", tc.schema, tc.table, got, tc.want)
		}
	}
	for _, bad := range []string{"orders", "orders=", "=id", "a.b=x;a.b=y"} {
		if _, err := parseKeyColumns(bad); err == nil || !strings.Contains(err.Error(), "-key-columns") {
			t.Errorf("parseKeyColumns(%q) = %v, want an error naming -key-columns", bad, err)
		}
	}
}

func TestKeylessTablesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{{nil, "", false}, {[]string{"-keyless-tables"}, "", true}, {nil, "true", true}, {[]string{"-keyless-tables=false"}, "true", false}} {
		var stderr bytes.Buffer
		getenv := func(name string) string {
			if name == "KAFKASINK_KEYLESS_TABLES" {
				return tc.env
			}
			return ""
		}
		o, err := parse(append([]string{"-pg", "postgres://h/db", "-brokers", "b:9092"}, tc.args...), getenv, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		_, pcfg, err := o.configs(nil)
		if err != nil {
			t.Fatal(err)
		}
		if pcfg.KeylessTables != tc.want {
			t.Errorf("%q with $KAFKASINK_KEYLESS_TABLES=%q: pgcdc.Config.KeylessTables = %t, want %t", tc.args, tc.env, pcfg.KeylessTables, tc.want)
		}
	}
}

// TestDebeziumFlags checks that each DebeziumEncoder option has its flag,
// named after Debezium's property, with Debezium's default; that its
// environment variable sets it too; that a mode Debezium does not have is
// refused naming the flag; and that the flags are refused with another
// encoder.
func TestDebeziumFlags(t *testing.T) {
	base := []string{"-pg", "postgres://h/db", "-brokers", "b:9092", "-slot", "shop"}
	encoder := func(t *testing.T, args []string, env map[string]string) (kafkasink.DebeziumEncoder, error) {
		t.Helper()
		var stderr bytes.Buffer
		o, err := parse(append(slices.Clone(base), args...), func(k string) string { return env[k] }, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(nil)
		enc, _ := kcfg.Encoder.(kafkasink.DebeziumEncoder)
		return enc, err
	}

	enc, err := encoder(t, []string{"-encoder", "debezium"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (kafkasink.DebeziumEncoder{Name: "shop"}); !reflect.DeepEqual(enc, want) {
		t.Errorf("defaults: %+v, want Debezium's, %+v", enc, want)
	}

	enc, err = encoder(t, []string{"-encoder", "debezium",
		"-decimal.handling.mode", "string", "-time.precision.mode", "isostring", "-interval.handling.mode", "string",
		"-binary.handling.mode", "hex", "-tombstones.on.delete=false", "-skipped.operations", "none",
		"-unavailable.value.placeholder", "??", "-extended.headers.enabled=false",
		"-debezium-lsn-as-string", "-debezium-null-nested-arrays", "-debezium-run-id", "run-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := kafkasink.DebeziumEncoder{Name: "shop",
		DecimalHandling: kafkasink.DecimalString, TimePrecision: kafkasink.TimeIsostring, IntervalHandling: kafkasink.IntervalString,
		BinaryHandling: kafkasink.BinaryHex, DisableTombstones: true, SkippedOperations: "none",
		UnavailableValuePlaceholder: "??", DisableExtendedHeaders: true,
		LSNAsString: true, NullNestedArrays: true, RunID: "run-1"}
	if !reflect.DeepEqual(enc, want) {
		t.Errorf("every flag set:\n got %+v\nwant %+v", enc, want)
	}

	enc, err = encoder(t, []string{"-encoder", "debezium"}, map[string]string{"KAFKASINK_DECIMAL_HANDLING_MODE": "double", "KAFKASINK_TOMBSTONES_ON_DELETE": "false"})
	if err != nil || enc.DecimalHandling != kafkasink.DecimalDouble || !enc.DisableTombstones {
		t.Errorf("from the environment: %+v, %v; want decimal double, no tombstones", enc, err)
	}

	_, err = encoder(t, []string{"-encoder", "debezium", "-decimal.handling.mode", "exact", "-binary.handling.mode", "b64"}, nil)
	if err == nil || !strings.Contains(err.Error(), "-decimal.handling.mode") || !strings.Contains(err.Error(), "-binary.handling.mode") {
		t.Errorf("unknown modes: %v, want an error naming both flags", err)
	}
	_, err = encoder(t, []string{"-encoder", "json", "-time.precision.mode", "connect"}, nil)
	if err == nil || !strings.Contains(err.Error(), "-time.precision.mode") || !strings.Contains(err.Error(), "-encoder debezium") {
		t.Errorf("a Debezium flag with -encoder json: %v, want an error naming the flag and -encoder debezium", err)
	}
}

// -log-format auto writes JSON where no person reads (a pipe, a file, a
// buffer) and text on a terminal; json and text force it; others are
// refused.
func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	for format, want := range map[string]string{"auto": `{"time":`, "json": `{"time":`, "text": "time="} {
		buf.Reset()
		h, err := logHandler(format, &buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		slog.New(h).Info("hello")
		if !strings.HasPrefix(buf.String(), want) {
			t.Errorf("-log-format %s wrote %q, want it to start with %q", format, buf.String(), want)
		}
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if h, _ := logHandler("auto", tty, nil); fmt.Sprintf("%T", h) != "*slog.TextHandler" {
			t.Errorf("-log-format auto on a terminal: %T, want text", h)
		}
	}
	if _, err := logHandler("xml", &buf, nil); err == nil || !strings.Contains(err.Error(), "-log-format") {
		t.Errorf("-log-format xml: %v, want an error naming the flag", err)
	}
}

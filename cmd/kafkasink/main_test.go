package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// TestStreamsRowsIntoKafka runs the program against the real PostgreSQL and
// Kafka of scripts/testenv.sh: rows inserted, updated and deleted arrive in
// the table's topic once each, progress is logged with the lag, and a
// cancelled context (what SIGTERM does) stops it with status 0.
func TestStreamsRowsIntoKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_cmd")

	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-partitions", "3", "-batch-max-wait", "20ms", "-progress", "300ms", "-log-format", "text"}
	out, status, stop := startProgram(ctx, t, db, name, brokers, args)
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
	waitFor(t, 60*time.Second, fmt.Sprintf("%d records in %s", want, topic), status, out, func() bool {
		recs = len(kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic))
		return recs >= want
	})
	progressLine := regexp.MustCompile(fmt.Sprintf(`msg=progress events=%d .*lag_seconds=\S+ lag_bytes=\d+`, want))
	waitFor(t, 30*time.Second, "a progress line counting every event, with the lag", status, out, func() bool {
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

	records := kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic)
	ops := map[string]int{}
	ids := map[string]bool{}
	for _, r := range records {
		ops[kafkasinktest.Header(r, kafkasink.HeaderOp)]++
		id := kafkasinktest.Header(r, kafkasink.HeaderID)
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

// realTable skips the test unless the real PostgreSQL and Kafka are
// there, and makes a table there with a unique name, starting with prefix,
// for the test to stream; its slot, publication and topic are named after
// it too, and all are dropped at the end of the test.
func realTable(ctx context.Context, t *testing.T, prefix string) (pg, brokers, name string, db *pgx.Conn) {
	t.Helper()
	pg, brokers = os.Getenv("KAFKASINK_TEST_PG"), os.Getenv("KAFKASINK_TEST_BROKERS")
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
	name = fmt.Sprintf("%s_%06d", prefix, rand.IntN(1e6))
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatalf("connecting to KAFKASINK_TEST_PG: %v", err)
	}
	t.Cleanup(func() { dropAll(db, name, brokers) })
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY, note text)"); err != nil {
		t.Fatal(err)
	}
	return pg, brokers, name, db
}

// startProgram runs the program with args, its brokers' variable set to
// brokers, until stop is called or the test ends, and waits until it
// streams from its slot. out collects its log; status gets its exit
// status.
func startProgram(ctx context.Context, t *testing.T, db *pgx.Conn, slot, brokers string, args []string) (out *kafkasinktest.LogBuffer, status chan int, stop context.CancelFunc) {
	t.Helper()
	out, status = &kafkasinktest.LogBuffer{}, make(chan int, 1)
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { status <- run(runCtx, args, func(k string) string { return env(k, brokers) }, out) }()
	waitForSlot(ctx, t, db, slot, status, out)
	return out, status, stop
}

// waitForSlot waits for the program to create its slot: changes made
// before it exists are not in it.
func waitForSlot(ctx context.Context, t *testing.T, db *pgx.Conn, slot string, status chan int, out *kafkasinktest.LogBuffer) {
	t.Helper()
	waitFor(t, 60*time.Second, "the replication slot", status, out, func() bool {
		var n int
		// Created and consistent: a change committed while the slot is
		// created (which waits for the server's running transactions) is
		// before its start, and never streamed.
		db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL", slot).Scan(&n)
		return n == 1
	})
}

// env is the test's environment: the broker, nothing else, so settings of
// the developer's shell do not leak into the run.
func env(k, brokers string) string {
	if k == "KAFKASINK_BROKERS" {
		return brokers
	}
	return ""
}

func waitFor(t *testing.T, timeout time.Duration, what string, status chan int, out *kafkasinktest.LogBuffer, cond func() bool) {
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
	pgtest.DropSlot(ctx, db, name)
	db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name)
	db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	db.Close(ctx)
	if cl, err := kgo.NewClient(kgo.SeedBrokers(brokers)); err == nil {
		kadm.NewClient(cl).DeleteTopics(ctx, name+".public."+name)
		cl.Close()
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

	args := []string{"-pg", pg, "-slot", name, "-publication", name, "-topic-prefix", name,
		"-checkpoint-topic", name + ".checkpoints", "-batch-max-wait", "20ms", "-progress", "0",
		"-tables", fmt.Sprintf(`public."%s", public."%s"`, routedTable, badTable),
		"-topic-routes", fmt.Sprintf(`public."%s"=%s`, routedTable, routedTopic)}
	out, status, _ := startProgram(ctx, t, db, name, brokers, args)
	if _, err := db.Exec(ctx, "INSERT INTO "+pgx.Identifier{routedTable}.Sanitize()+" SELECT g, 'row ' || g FROM generate_series(1, 3) g"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "3 records in "+routedTopic, status, out, func() bool {
		return len(kafkasinktest.ReadCommittedRaw(t, []string{brokers}, routedTopic)) >= 3
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
	for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, routedTopic) {
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

// TestHeadersAndCompressionOnTheWire runs the program against the real
// PostgreSQL and Kafka with -headers minimal -compression zstd: every row
// the table holds arrives once, in a zstd record batch, with the
// kafkasink.id and kafkasink.op headers and no others.
func TestHeadersAndCompressionOnTheWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_cmd_headers")

	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name, "-ha=false",
		"-topic-prefix", name, "-partitions", "3", "-batch-max-wait", "20ms", "-progress", "0",
		"-headers", "minimal", "-compression", "zstd"}
	out, status, stop := startProgram(ctx, t, db, name, brokers, args)
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" SELECT g, repeat('row ' || g, 20) FROM generate_series(1, 50) g"); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+name).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	topic := name + ".public." + name
	var records []*kgo.Record
	waitFor(t, 60*time.Second, fmt.Sprintf("%d records in %s", rows, topic), status, out, func() bool {
		records = kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic)
		return len(records) >= rows
	})
	stop()
	<-status

	const zstd = 4 // the record batch's compression attribute
	keys := map[string]bool{}
	for _, r := range records {
		if len(r.Headers) != 2 || r.Headers[0].Key != kafkasink.HeaderID || r.Headers[1].Key != kafkasink.HeaderOp ||
			string(r.Headers[1].Value) != "insert" {
			t.Fatalf("record %s[%d]@%d has headers %v, want %s and %s=insert only", r.Topic, r.Partition, r.Offset, r.Headers, kafkasink.HeaderID, kafkasink.HeaderOp)
		}
		if _, err := kafkasink.ParsePosition(string(r.Headers[0].Value)); err != nil {
			t.Errorf("record %s[%d]@%d: %s: %v", r.Topic, r.Partition, r.Offset, kafkasink.HeaderID, err)
		}
		if c := r.Attrs.CompressionType(); c != zstd {
			t.Errorf("record %s[%d]@%d was in a batch of compression %d, want zstd (%d)", r.Topic, r.Partition, r.Offset, c, zstd)
		}
		if keys[string(r.Key)] {
			t.Errorf("row %s delivered twice", r.Key)
		}
		keys[string(r.Key)] = true
	}
	if len(records) != rows || len(keys) != rows {
		t.Fatalf("read %d records of %d rows, want each of the table's %d rows once", len(records), len(keys), rows)
	}
}

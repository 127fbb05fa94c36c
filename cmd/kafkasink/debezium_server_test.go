package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// debeziumRecord is one record of the Debezium capture: its topic and key.
type debeziumRecord struct {
	Topic string          `json:"topic"`
	Key   json.RawMessage `json:"key"`
}

// TestDebeziumServerSample runs the program with Debezium Server's sample
// configuration (testdata/debezium-server/application.properties, its
// connection and brokers substituted, nothing else) against the real
// PostgreSQL and Kafka, on the workload the real Debezium 3.6.1 captured
// with the same file (debezium-capture.jsonl): the topics written are the
// capture's, and each topic's record keys are the capture's, byte for
// byte and in order (snapshot rows, changes, tombstones, the key change,
// the null keys of a table without a primary key); the schema the file's
// schema.include.list leaves out has no topic. Only the slot and the
// publication are named for the run, by flags, so that runs do not share
// them; the file is not changed for that.
func TestDebeziumServerSample(t *testing.T) {
	pg, brokers := os.Getenv("KAFKASINK_TEST_PG"), os.Getenv("KAFKASINK_TEST_BROKERS")
	if pg == "" || brokers == "" {
		t.Skip("KAFKASINK_TEST_PG or KAFKASINK_TEST_BROKERS not set: start scripts/testenv.sh and eval \"$(scripts/testenv.sh env)\"")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	want := readDebeziumCapture(t)
	topics := topicsOf(want)
	name := fmt.Sprintf("kafkasink_dbzserver_%06d", rand.IntN(1e6))
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	dropTopics := func() {
		// Every topic of the prefix: one the program should not have made
		// must not survive into the next run either.
		if names := prefixedTopics(context.Background(), t, adm, "tutorial."); names != nil {
			adm.DeleteTopics(context.Background(), names...)
		}
	}
	dropTopics()
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer ccancel()
		pgtest.DropSlot(cctx, db, name)
		db.Exec(cctx, "DROP PUBLICATION IF EXISTS "+name)
		db.Exec(cctx, "DROP SCHEMA IF EXISTS inventory CASCADE; DROP SCHEMA IF EXISTS outside CASCADE")
		db.Close(cctx)
		dropTopics()
		cl.Close()
	})
	runSQLFile(ctx, t, db, "testdata/debezium-server/workload.sql")

	file := writeFile(t, "application.properties", sampleFor(t, pg, brokers))
	args := []string{"-debezium-config", file, "-slot", name, "-publication", name, "-batch-max-wait", "20ms", "-log-format", "text"}
	out, status := &kafkasinktest.LogBuffer{}, make(chan int, 1)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { status <- run(runCtx, args, func(string) string { return "" }, out) }()
	waitForSlot(ctx, t, db, name, status, out)
	waitFor(t, 60*time.Second, "the snapshot", status, out, func() bool {
		return len(kafkasinktest.ReadCommittedRaw(t, []string{brokers}, "tutorial.inventory.customers")) >= 2
	})
	runSQLFile(ctx, t, db, "testdata/debezium-server/workload-changes.sql")
	waitFor(t, 60*time.Second, "the end marker", status, out, func() bool {
		return len(kafkasinktest.ReadCommittedRaw(t, []string{brokers}, "tutorial.inventory.zz_end")) >= 1
	})

	// A broker's metadata can lag behind the topics just created: ask
	// again for a while before comparing.
	var made []string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		made = prefixedTopics(ctx, t, adm, "tutorial.")
		if slices.Equal(made, topics) || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(made, topics) {
		t.Errorf("topics written %q, want Debezium's %q", made, topics)
	}
	for _, topic := range topics {
		var got, wantKeys []string
		for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic) {
			got = append(got, keyText(r.Key))
		}
		for _, r := range want {
			if r.Topic == topic {
				wantKeys = append(wantKeys, keyText(compactJSON(t, r.Key)))
			}
		}
		if !slices.Equal(got, wantKeys) {
			t.Errorf("%s: keys\n%s\nwant Debezium's\n%s", topic, strings.Join(got, "\n"), strings.Join(wantKeys, "\n"))
		}
	}
	stop()
	if code := <-status; code != 0 {
		t.Fatalf("exit status %d after cancellation, want 0:\n%s", code, out.String())
	}
}

// prefixedTopics is the sorted topics whose names start with prefix.
func prefixedTopics(ctx context.Context, t *testing.T, adm *kadm.Client, prefix string) []string {
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tp := range listed.Names() {
		if strings.HasPrefix(tp, prefix) {
			out = append(out, tp)
		}
	}
	return out
}

// readDebeziumCapture reads the topics and keys of the capture.
func readDebeziumCapture(t *testing.T) []debeziumRecord {
	b, err := os.ReadFile("testdata/debezium-server/debezium-capture.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out []debeziumRecord
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r debeziumRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// topicsOf is the sorted topics of records.
func topicsOf(records []debeziumRecord) []string {
	var out []string
	for _, r := range records {
		if !slices.Contains(out, r.Topic) {
			out = append(out, r.Topic)
		}
	}
	slices.Sort(out)
	return out
}

// compactJSON is the capture's key as JsonConverter wrote it: the capture
// embeds the bytes verbatim, null for a null key.
func compactJSON(t *testing.T, raw json.RawMessage) []byte {
	if string(raw) == "null" {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func keyText(k []byte) string {
	if k == nil {
		return "(null)"
	}
	return string(k)
}

// sampleFor is Debezium Server's sample with its connection and brokers
// replaced by the test's: the lines of those properties only.
func sampleFor(t *testing.T, pg, brokers string) string {
	b, err := os.ReadFile(debeziumSampleFile)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	for key, value := range map[string]string{
		"debezium.source.database.hostname":              u.Hostname(),
		"debezium.source.database.port":                  u.Port(),
		"debezium.source.database.user":                  u.User.Username(),
		"debezium.source.database.password":              password,
		"debezium.source.database.dbname":                strings.TrimPrefix(u.Path, "/"),
		"debezium.sink.kafka.producer.bootstrap.servers": brokers,
	} {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `=.*$`)
		if !re.Match(b) {
			t.Fatalf("the sample has no %s", key)
		}
		b = re.ReplaceAllLiteral(b, []byte(key+"="+value))
	}
	return string(b)
}

// runSQLFile runs a workload file's statements (its psql commands, lines
// starting with a backslash, left out).
func runSQLFile(ctx context.Context, t *testing.T, db *pgx.Conn, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sql []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, `\`) {
			sql = append(sql, l)
		}
	}
	if _, err := db.Exec(ctx, strings.Join(sql, "\n")); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

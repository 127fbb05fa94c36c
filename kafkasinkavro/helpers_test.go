package kafkasinkavro_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5"
	twmb "github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// The variables of the real environment these tests read (with
// kafkasinktest.Env, which skips without them), as eval
// "$(scripts/testenv.sh env)" sets them in the kafkasink repository.
const (
	envPG             = "KAFKASINK_TEST_PG"              // postgres:// URL, wal_level=logical, a REPLICATION role
	envBrokers        = "KAFKASINK_TEST_BROKERS"         // the single-node broker, plaintext
	envSchemaRegistry = "KAFKASINK_TEST_SCHEMA_REGISTRY" // a Confluent-compatible Schema Registry API
)

// avroEnv is one test's share of the real environment: PostgreSQL, the
// single broker and the Schema Registry, with names of its own (name:
// the slot, the publication, the sink id and the topic prefix) and a
// cleanup that drops what the test made.
type avroEnv struct {
	t        *testing.T
	name     string
	pg       string
	brokers  []string
	registry *sr.Client
	db       *pgx.Conn
	snapshot bool                 // run takes an initial snapshot of the tables
	avro     kafkasinkavro.Config // run's encoder configuration, its Registry set by run
	routes   map[string]string    // run's kafkasink.Topics.Routes
	encoder  kafkasink.Encoder    // run's encoder instead of kafkasinkavro's of avro
	sink     *deliveredSink       // run's sink
}

// deliveredSink is the sink, noting the events of every Write that
// returned nil: what its topics must hold, each once.
type deliveredSink struct {
	*kafkasink.Sink // its other methods (Delivers) too, for pgcdc.Run

	mu     sync.Mutex
	events map[kafkasink.Position]kafkasink.Event
}

func (s *deliveredSink) Write(ctx context.Context, b kafkasink.Batch) error {
	err := s.Sink.Write(ctx, b)
	if err == nil {
		s.mu.Lock()
		if s.events == nil {
			s.events = make(map[kafkasink.Position]kafkasink.Event)
		}
		for _, e := range b.Events {
			s.events[e.Position] = e // a redelivery's again
		}
		s.mu.Unlock()
	}
	return err
}

// delivered returns the events delivered so far.
func (s *deliveredSink) delivered() []kafkasink.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]kafkasink.Event, 0, len(s.events))
	for _, e := range s.events {
		out = append(out, e)
	}
	return out
}

func newAvroEnv(t *testing.T) *avroEnv {
	t.Helper()
	vals := kafkasinktest.Env(t, envPG, envBrokers, envSchemaRegistry)
	reg, err := sr.NewClient(sr.URLs(vals[2]))
	if err != nil {
		t.Fatal(err)
	}
	e := &avroEnv{t: t, pg: vals[0], brokers: strings.Split(vals[1], ","), registry: reg,
		name: strings.NewReplacer("-", "_").Replace(kafkasinktest.UniqueName(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.db, err = pgx.Connect(ctx, e.pg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pgtest.DropSlot(ctx, e.db, e.name)
		e.db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+e.name)
		e.db.Close(ctx)
		kafkasinktest.DeleteTopics(ctx, e.brokers, e.name+".")
		subjects, _ := e.registry.Subjects(ctx)
		for _, s := range subjects {
			if strings.HasPrefix(s, e.name+".") {
				e.registry.DeleteSubject(ctx, s, sr.SoftDelete)
				e.registry.DeleteSubject(ctx, s, sr.HardDelete)
			}
		}
	})
	return e
}

// exec runs SQL statements, failing the test on an error.
func (e *avroEnv) exec(sql string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.db.Exec(ctx, sql); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// table creates a table of the test's from its column list, dropped at the
// end of the test, and returns its name.
func (e *avroEnv) table(suffix, columns string) string {
	e.t.Helper()
	name := e.name + "_" + suffix
	e.exec("CREATE TABLE " + name + " (" + columns + ")")
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	})
	return name
}

// run streams tables through pgcdc.Run into an exactly-once sink with the
// Avro encoder until stop; stop returns Run's error. done is closed when
// Run returns by itself.
func (e *avroEnv) run(tables ...string) (stop func() error, done <-chan struct{}, runErr func() error) {
	e.t.Helper()
	var enc kafkasink.Encoder = e.encoder
	if enc == nil {
		cfg := e.avro
		cfg.Registry = e.registry
		avro, err := kafkasinkavro.New(cfg)
		if err != nil {
			e.t.Fatal(err)
		}
		enc = avro
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: e.brokers, SinkID: e.name, Encoder: enc,
		Topics: kafkasink.Topics{Prefix: e.name, Routes: e.routes, Partitions: 1}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { sink.Close(context.Background()) })
	e.sink = &deliveredSink{Sink: sink}
	qualified := make([]string, len(tables))
	for i, t := range tables {
		qualified[i] = "public." + t
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	var (
		mu     sync.Mutex
		result error
	)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		err := pgcdc.Run(runCtx, pgcdc.Config{
			ConnString: e.pg, Slot: e.name, Publication: e.name, Tables: qualified,
			CreateSlot: true, CreatePublication: true, Snapshot: e.snapshot,
			BatchMaxWait: 20 * time.Millisecond, StandbyInterval: time.Second, HeartbeatInterval: -1,
			ReconnectBackoff: 50 * time.Millisecond, ReconnectMax: time.Second,
			Logger: slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}, e.sink)
		mu.Lock()
		result = err
		mu.Unlock()
	}()
	var once sync.Once
	stop = func() error {
		once.Do(func() {
			stopRun()
			<-finished
		})
		mu.Lock()
		defer mu.Unlock()
		return result
	}
	e.t.Cleanup(func() { stop() })
	waitFor(e.t, 30*time.Second, "the slot", e.slotStreaming, finished)
	return stop, finished, func() error {
		mu.Lock()
		defer mu.Unlock()
		return result
	}
}

// slotStreaming reports whether the test's slot is streamed from and
// consistent: changes made from then on are streamed, not snapshotted. A
// slot is active while it is being created, too, and its creation waits
// for the transactions running on the (shared) server to end: a change
// committed meanwhile is before the slot's start and never streamed.
// confirmed_flush_lsn is set once the slot is consistent.
func (e *avroEnv) slotStreaming() bool {
	var n int
	e.db.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active AND confirmed_flush_lsn IS NOT NULL", e.name).Scan(&n)
	return n == 1
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// waitFor polls cond until it holds, failing the test after timeout or
// when done closes first.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-done:
			t.Fatalf("the pipeline stopped while waiting for %s", what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readRecords waits until the topic holds n records for read_committed
// consumers and returns them.
func (e *avroEnv) readRecords(topic string, n int, done <-chan struct{}) []*kgo.Record {
	e.t.Helper()
	var recs []*kgo.Record
	waitFor(e.t, 60*time.Second, fmt.Sprintf("%d records in %s", n, topic), func() bool {
		recs = kafkasinktest.ReadCommittedRaw(e.t, e.brokers, topic)
		return len(recs) >= n
	}, done)
	if len(recs) != n {
		e.t.Fatalf("%s holds %d records, want %d", topic, len(recs), n)
	}
	return recs
}

// decoded is a record's key or value decoded by both independent Avro
// libraries with the schema the registry has under the record's id.
type decoded struct {
	id     int
	schema string
	value  map[string]any // canonical form (see canonical), the same from both
}

// checkVersions checks that the subject <topic>-value holds one version
// per table version, in order: the schema ids of its versions are ids,
// those of the records read in order with each table version's first.
func (e *avroEnv) checkVersions(topic string, ids []int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	versions, err := e.registry.Schemas(ctx, topic+"-value")
	if err != nil {
		e.t.Fatal(err)
	}
	var registered []int
	for _, v := range versions {
		registered = append(registered, v.ID)
	}
	if fmt.Sprint(registered) != fmt.Sprint(ids) {
		e.t.Errorf("subject %s-value has schema ids %v (by version), the records %v: want one version per table version, in order", topic, registered, ids)
	}
}

// wireSchema reads the Confluent wire format of b and fetches the schema
// of its id from the registry.
func (e *avroEnv) wireSchema(b []byte) (id int, s sr.Schema) {
	e.t.Helper()
	if len(b) < 5 || b[0] != 0 {
		e.t.Fatalf("not the Confluent wire format (magic byte 0, 4-byte id): %x", b)
	}
	id = int(binary.BigEndian.Uint32(b[1:5]))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := e.registry.SchemaByID(ctx, id)
	if err != nil {
		e.t.Fatalf("schema id %d: %v", id, err)
	}
	return id, s
}

// decode reads the Confluent wire format of b, fetches the schema of its
// id from the registry, decodes the payload with hamba/avro and with
// twmb/avro (neither is what the encoder uses), and checks they agree.
func (e *avroEnv) decode(b []byte) decoded {
	e.t.Helper()
	id, s := e.wireSchema(b)
	hs, err := hamba.Parse(s.Schema)
	if err != nil {
		e.t.Fatalf("hamba/avro cannot parse schema %d: %v\n%s", id, err, s.Schema)
	}
	var hv map[string]any
	if err := hamba.Unmarshal(hs, b[5:], &hv); err != nil {
		e.t.Fatalf("hamba/avro cannot decode with schema %d: %v\n%s", id, err, s.Schema)
	}
	ts, err := twmb.Parse(s.Schema)
	if err != nil {
		e.t.Fatalf("twmb/avro cannot parse schema %d: %v", id, err)
	}
	var tv map[string]any
	rest, err := ts.Decode(b[5:], &tv)
	if err != nil {
		e.t.Fatalf("twmb/avro cannot decode with schema %d: %v", id, err)
	}
	if len(rest) != 0 {
		e.t.Fatalf("twmb/avro left %d bytes after the record", len(rest))
	}
	h, w := canonical(hv).(map[string]any), canonical(tv).(map[string]any)
	if fmt.Sprint(h) != fmt.Sprint(w) {
		e.t.Fatalf("the two Avro libraries read schema %d's record differently:\nhamba %v\ntwmb  %v", id, h, w)
	}
	return decoded{id: id, schema: s.Schema, value: h}
}

// canonical turns a decoded value into one form whatever the library:
// hamba's union maps ({"int": 5}) unwrapped, integers int64, floats in
// their shortest text, times RFC 3339 in UTC, decimals as exact text,
// bytes in hex.
func canonical(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 {
			for k, inner := range v {
				if unionBranch(k) {
					return canonical(inner)
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = canonical(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = canonical(x)
		}
		return out
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case float32:
		return "float:" + strconv.FormatFloat(float64(v), 'g', -1, 32)
	case float64:
		return "double:" + strconv.FormatFloat(v, 'g', -1, 64)
	case []byte:
		return "bytes:" + hex.EncodeToString(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return "time:" + v.String()
	case *big.Rat:
		return "decimal:" + v.RatString()
	}
	return v
}

// unionBranch reports whether k names a union branch as hamba/avro keys
// a decoded union: a primitive type, with its logical type, or a record's
// full name.
func unionBranch(k string) bool {
	base, _, _ := strings.Cut(k, ".")
	return slices.Contains([]string{"null", "boolean", "int", "long", "float", "double", "bytes", "string", "array", "map"}, base) ||
		strings.HasSuffix(k, ".Value") || strings.HasSuffix(k, ".Truncate")
}

// javaReaderModule is the Maven module of the Java reader.
const javaReaderModule = "internal/javareader"

var (
	javaReaderBuild sync.Once
	javaReaderCP    string
	javaReaderErr   error
)

// javaRead decodes records (Confluent wire format) with the Apache Avro
// Java library, the schema of each fetched from the registry by its id,
// and returns each as its top-level fields rendered as text by Java (a
// row image as a map of its fields). It skips t when java or mvn is
// missing; .ci/run's machine has both.
func (e *avroEnv) javaRead(t *testing.T, records [][]byte) []map[string]any {
	t.Helper()
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the Java reader needs %s (Java 17+ and Maven): %v", tool, err)
		}
	}
	javaReaderBuild.Do(func() {
		cmd := exec.Command("mvn", "-B", "-q", "compile", "dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt")
		cmd.Dir = javaReaderModule
		if out, err := cmd.CombinedOutput(); err != nil {
			javaReaderErr = fmt.Errorf("building %s with Maven: %v\n%s", javaReaderModule, err, out)
			return
		}
		cp, err := os.ReadFile(filepath.Join(javaReaderModule, "target", "classpath.txt"))
		if err != nil {
			javaReaderErr = err
			return
		}
		abs, err := filepath.Abs(filepath.Join(javaReaderModule, "target", "classes"))
		javaReaderCP, javaReaderErr = abs+string(os.PathListSeparator)+strings.TrimSpace(string(cp)), err
	})
	if javaReaderErr != nil {
		t.Fatal(javaReaderErr)
	}
	var in bytes.Buffer
	for _, r := range records {
		in.WriteString(hex.EncodeToString(r) + "\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-cp", javaReaderCP, "io.kafkasink.avroreader.Read", kafkasinktest.Env(t, envSchemaRegistry)[0])
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Java reader: %v\n%s", err, stderr.String())
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("the Java reader's line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != len(records) {
		t.Fatalf("the Java reader read %d records, want %d", len(recs), len(records))
	}
	return recs
}

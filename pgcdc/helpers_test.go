package pgcdc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The test kit of package pgcdc: what more than one test file uses. The
// pgoutput message builders are in helpers_pgoutput_test.go.
//
// The integration tests need a PostgreSQL with wal_level = logical and a
// role that may replicate (sinktest.EnvPG); most use the in-process fake
// Kafka cluster, the end-to-end test and the benchmark the real brokers.

// realEnv returns the real PostgreSQL and Kafka of the test environment,
// or skips naming what is missing.
func realEnv(t testing.TB) (pg string, brokers []string) {
	t.Helper()
	v := sinktest.Env(t, sinktest.EnvPG, sinktest.EnvBrokers)
	return v[0], strings.Split(v[1], ",")
}

// pgEnv is one test's database objects (slot, publication and table share
// one unique name) and its fake Kafka cluster.
type pgEnv struct {
	t       *testing.T
	conn    string
	name    string
	brokers []string

	mu sync.Mutex // guards db
	db *pgx.Conn
}

// newPGEnv connects to the test environment's PostgreSQL (skipping
// without it), starts a fake Kafka cluster and drops the test's objects
// at its end.
func newPGEnv(t *testing.T) *pgEnv {
	t.Helper()
	conn := sinktest.RealPG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", sinktest.EnvPG, err)
	}
	short := strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	short = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, short)
	if len(short) > 30 {
		short = short[:30]
	}
	e := &pgEnv{t: t, conn: conn, db: db, name: fmt.Sprintf("pgcdc_%s_%06d", short, rand.IntN(1e6))}
	_, e.brokers = sinktest.Cluster(t)
	t.Cleanup(e.cleanup)
	return e
}

// cleanup drops the test's slot, publication and tables.
func (e *pgEnv) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	dropTestObjects(ctx, e.db, e.name)
	e.db.Close(ctx)
}

// dropTestObjects drops the slot and the publication named name and the
// tables whose names start with it.
func dropTestObjects(ctx context.Context, db *pgx.Conn, name string) {
	sinktest.DropSlot(ctx, db, name)
	db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name)
	rows, err := db.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1`, name+"%")
	if err == nil {
		names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, n := range names {
			db.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{n}.Sanitize())
		}
	}
}

// exec runs statements, each in its own transaction unless they are one
// string with BEGIN/COMMIT.
func (e *pgEnv) exec(sql string, args ...any) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.db.Exec(ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// txn runs fn in one transaction.
func (e *pgEnv) txn(fn func(tx pgx.Tx)) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error { fn(tx); return nil }); err != nil {
		e.t.Fatalf("transaction: %v", err)
	}
}

func (e *pgEnv) queryLSN(sql string, args ...any) kafkasink.LSN {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	lsn, err := queryLSN(context.Background(), e.db, sql, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return lsn
}

// confirmedFlushSQL reads a slot's confirmed_flush_lsn, NULL when there is
// no such slot.
const confirmedFlushSQL = `SELECT (SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1)`

// queryLSN runs a query returning one LSN as text; NULL is 0.
func queryLSN(ctx context.Context, db *pgx.Conn, sql string, args ...any) (kafkasink.LSN, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var s *string
	if err := db.QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		return 0, err
	}
	if s == nil {
		return 0, nil
	}
	return kafkasink.ParseLSN(*s)
}

// slotConfirmed returns the slot's confirmed_flush_lsn, 0 when there is no
// such slot.
func slotConfirmed(ctx context.Context, db *pgx.Conn, slot string) (kafkasink.LSN, error) {
	return queryLSN(ctx, db, confirmedFlushSQL, slot)
}

// confirmedFlush returns the slot's confirmed_flush_lsn, 0 when there is
// no slot yet.
func (e *pgEnv) confirmedFlush() kafkasink.LSN {
	e.t.Helper()
	return e.queryLSN(confirmedFlushSQL, e.name)
}

// streaming reports whether a walsender streams from the test's slot: it
// has started replication (a slot being created is active too, before Run
// opened its decoder) and the slot is not lost.
func (e *pgEnv) streaming() bool {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int
	if err := e.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1 AND r.state IN ('catchup', 'streaming') AND s.wal_status <> 'lost'`, e.name).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n > 0
}

// createTable creates the test table name+suffix: id int primary key, seq
// bigint, note text.
func (e *pgEnv) createTable(suffix string) string {
	e.t.Helper()
	n := e.name + suffix
	e.exec("CREATE TABLE " + n + " (id int PRIMARY KEY, seq bigint NOT NULL, note text)")
	return n
}

// config returns a Config for the test's slot, publication and tables,
// with short intervals.
func (e *pgEnv) config(tables ...string) Config {
	return Config{
		ConnString:        e.conn,
		Slot:              e.name,
		Publication:       e.name,
		Tables:            tables,
		CreateSlot:        true,
		CreatePublication: true,
		BatchMaxWait:      20 * time.Millisecond,
		StandbyInterval:   time.Second,
		HeartbeatInterval: -1,
		ReconnectBackoff:  50 * time.Millisecond,
		ReconnectMax:      time.Second,
		Logger:            testLogger(e.t),
	}
}

// testLogger logs to the test at debug level with -v, else at warn level.
func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

// logRecorder is a slog.Handler that keeps the message and attributes of
// every warning and passes every record on, for tests of what Run warns
// about.
type logRecorder struct {
	slog.Handler
	mu   *sync.Mutex
	recs *[]loggedRecord
}

type loggedRecord struct {
	msg   string
	attrs map[string]string
}

// newLogRecorder returns a recorder that passes on to testLogger(t).
func newLogRecorder(t *testing.T) *logRecorder {
	return &logRecorder{Handler: testLogger(t).Handler(), mu: new(sync.Mutex), recs: new([]loggedRecord)}
}

func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		lr := loggedRecord{msg: r.Message, attrs: make(map[string]string)}
		r.Attrs(func(a slog.Attr) bool {
			lr.attrs[a.Key] = a.Value.String()
			return true
		})
		h.mu.Lock()
		*h.recs = append(*h.recs, lr)
		h.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

// Enabled lets warnings through whatever the test log's level.
func (h *logRecorder) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.Handler.Enabled(ctx, l)
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{Handler: h.Handler.WithAttrs(as), mu: h.mu, recs: h.recs}
}

func (h *logRecorder) WithGroup(name string) slog.Handler {
	return &logRecorder{Handler: h.Handler.WithGroup(name), mu: h.mu, recs: h.recs}
}

// warnings returns the warnings logged so far.
func (h *logRecorder) warnings() []loggedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(*h.recs)
}

// find returns the attributes of the warnings whose message starts with
// prefix.
func (h *logRecorder) find(prefix string) []map[string]string {
	var out []map[string]string
	for _, r := range h.warnings() {
		if strings.HasPrefix(r.msg, prefix) {
			out = append(out, r.attrs)
		}
	}
	return out
}

// matching returns how many warnings had a message starting with prefix
// and the given table.
func (h *logRecorder) matching(prefix, table string) int {
	n := 0
	for _, attrs := range h.find(prefix) {
		if attrs["table"] == table {
			n++
		}
	}
	return n
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// newSink starts an exactly-once sink on the test's cluster.
func (e *pgEnv) newSink(sinkID string) *kafkasink.Sink {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers: e.brokers,
		SinkID:  sinkID,
		Topics:  kafkasink.Topics{Prefix: "t", Partitions: 3},
	})
	if err != nil {
		e.t.Fatalf("kafkasink.New: %v", err)
	}
	e.t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// tracker records what Writes delivered, across sinks.
type tracker struct {
	mu         sync.Mutex
	ids        map[string]bool
	maxWritten kafkasink.Position
	writes     int // successful Writes with events
	readWrites int // successful Writes with OpRead events
}

func newTracker() *tracker { return &tracker{ids: make(map[string]bool)} }

func (tr *tracker) delivered() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.ids)
}

func (tr *tracker) written() kafkasink.Position {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.maxWritten
}

// recSink wraps a sink: it records successful Writes in a tracker and lets
// a test act before and after each Write.
type recSink struct {
	*kafkasink.Sink
	tr *tracker
	// before, when set, runs before the n-th Write (from 1); an error is
	// returned instead of writing.
	before func(n int, b *kafkasink.Batch) error
	// after, when set, runs after the n-th Write returned nil and may
	// replace its result.
	after func(n int, b *kafkasink.Batch) error
	n     int
}

func (s *recSink) Write(ctx context.Context, b kafkasink.Batch) error {
	s.n++
	if s.before != nil {
		if err := s.before(s.n, &b); err != nil {
			return err
		}
	}
	if err := s.Sink.Write(ctx, b); err != nil {
		return err
	}
	s.tr.mu.Lock()
	reads := false
	for i := range b.Events {
		s.tr.ids[b.Events[i].ID()] = true
		if b.Events[i].Position.Compare(s.tr.maxWritten) > 0 {
			s.tr.maxWritten = b.Events[i].Position
		}
		reads = reads || b.Events[i].Op == kafkasink.OpRead
	}
	if len(b.Events) > 0 {
		s.tr.writes++
	}
	if reads {
		s.tr.readWrites++
	}
	s.tr.mu.Unlock()
	if s.after != nil {
		return s.after(s.n, &b)
	}
	return nil
}

// run is Run running in the background.
type run struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, once done is closed
}

// start runs Run in the background; stop cancels it and returns Run's
// error.
func start(t *testing.T, cfg Config, sink Sink) (stop func() error, r *run) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r = &run{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = Run(ctx, cfg, sink)
	}()
	stop = func() error {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of cancelling its context")
		}
		return r.err
	}
	t.Cleanup(func() { stop() })
	return stop, r
}

// waitFor polls cond until it holds, failing after timeout, or at once
// when r returns.
func waitFor(t *testing.T, timeout time.Duration, what string, r *run, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-r.done:
			t.Fatalf("Run returned while waiting for %s: %v", what, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// change is one expected event, or one read from Kafka.
type change struct {
	op  string
	id  int64 // -1 for a truncate
	seq int64 // -1 when the event has no after image
}

func (c change) String() string { return fmt.Sprintf("%s(id=%d seq=%d)", c.op, c.id, c.seq) }

// model records the changes a test makes, in commit order. It is safe for
// concurrent use: Write hooks add to it while the test waits.
type model struct {
	mu      sync.Mutex
	changes []change
}

func (m *model) add(op string, id, seq int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changes = append(m.changes, change{op, id, seq})
}

func (m *model) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.changes)
}

func (m *model) all() []change {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.changes)
}

// record is the JSONEncoder's value, the fields the tests look at.
type record struct {
	ID       string             `json:"id"`
	Op       string             `json:"op"`
	Key      []string           `json:"key"`
	Before   map[string]any     `json:"before"`
	After    map[string]any     `json:"after"`
	RunID    string             `json:"backfill_run_id"`
	Position kafkasink.Position `json:"-"`
}

// readTopic reads the test table's topic as a read_committed consumer.
func (e *pgEnv) readTopic(table string) []record {
	e.t.Helper()
	recs := sinktest.ReadCommitted(e.t, e.brokers, "t.public."+table)
	return decodeRecords(e.t, recs)
}

// decodeRecords decodes the JSONEncoder's records.
func decodeRecords(t *testing.T, recs []*kgo.Record) []record {
	t.Helper()
	out := make([]record, 0, len(recs))
	for _, r := range recs {
		var v record
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record value %q: %v", r.Value, err)
		}
		pos, err := kafkasink.ParsePosition(v.ID)
		if err != nil {
			t.Fatal(err)
		}
		v.Position = pos
		out = append(out, v)
	}
	return out
}

// num returns the number m holds under k, -1 when there is none.
func num(m map[string]any, k string) int64 {
	if f, ok := m[k].(float64); ok {
		return int64(f)
	}
	return -1
}

func (r record) change() change {
	switch {
	case r.Op == "truncate":
		return change{r.Op, -1, -1}
	case r.After != nil:
		return change{r.Op, num(r.After, "id"), num(r.After, "seq")}
	default:
		return change{r.Op, num(r.Before, "id"), -1}
	}
}

// checkExactlyOnce checks that recs hold each change of want exactly once,
// nothing else, with unique event ids, and that the changes of each row
// appear in commit order.
func checkExactlyOnce(t *testing.T, recs []record, want []change) {
	t.Helper()
	ids := make(map[string]int)
	for _, r := range recs {
		ids[r.ID]++
		if ids[r.ID] == 2 {
			t.Errorf("event %s (%v) delivered more than once", r.ID, r.change())
		}
	}
	got := make([]change, len(recs))
	for i, r := range recs {
		got[i] = r.change()
	}
	count := func(cs []change) map[change]int {
		m := make(map[change]int)
		for _, c := range cs {
			m[c]++
		}
		return m
	}
	gm, wm := count(got), count(want)
	bad := 0
	for c, n := range wm {
		if gm[c] != n {
			bad++
			if bad <= 10 {
				t.Errorf("%v: delivered %d times, want %d", c, gm[c], n)
			}
		}
	}
	for c, n := range gm {
		if _, ok := wm[c]; !ok {
			bad++
			if bad <= 10 {
				t.Errorf("%v: delivered %d times, never made", c, n)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d changes wrong among %d records, %d expected", bad, len(recs), len(want))
	}
	// Per row, the order of the topic (one key, one partition) is the
	// commit order.
	row := func(c change) int64 { return c.id }
	gp, wp := groupBy(got, row), groupBy(want, row)
	for id, w := range wp {
		if id >= 0 && !slices.Equal(gp[id], w) {
			t.Errorf("row %d: changes in topic order %v, commit order %v", id, gp[id], w)
		}
	}
	// One pass, remembering each row's last position.
	last := make(map[int64]kafkasink.Position)
	for _, r := range recs {
		id := r.change().id
		if id < 0 {
			continue
		}
		if prev, ok := last[id]; ok && r.Position.Compare(prev) <= 0 {
			t.Errorf("row %d: position %s after %s", id, r.Position, prev)
		}
		last[id] = r.Position
	}
}

// confirmSample is the slot's confirmed_flush_lsn and the highest position
// written, read after it.
type confirmSample struct {
	confirmed kafkasink.LSN
	written   kafkasink.Position
}

// slotMonitor samples a Run's slot from its creation on, for
// checkConfirmed.
type slotMonitor struct {
	start kafkasink.LSN // the slot's confirmed position at its creation
	stop  func() []confirmSample
}

// monitorSlot waits until r created the slot, then samples its confirmed
// position, with what tr says was written just after, until check.
func (e *pgEnv) monitorSlot(r *run, tr *tracker) *slotMonitor {
	e.t.Helper()
	waitFor(e.t, 20*time.Second, "the slot", r, func() bool { return e.confirmedFlush() != 0 })
	mon := &slotMonitor{start: e.confirmedFlush()}
	ctx, cancel := context.WithCancel(context.Background())
	db, err := pgx.Connect(ctx, e.conn)
	if err != nil {
		e.t.Fatal(err)
	}
	var samples []confirmSample
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer db.Close(context.Background())
		for ctx.Err() == nil {
			lsn, err := slotConfirmed(ctx, db, e.name)
			w := tr.written()
			if err == nil && lsn != 0 {
				samples = append(samples, confirmSample{lsn, w})
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	mon.stop = func() []confirmSample {
		cancel()
		<-done
		return samples
	}
	e.t.Cleanup(func() { mon.stop() })
	return mon
}

// check stops the sampling and checks the samples against the records
// read back (checkConfirmed).
func (mon *slotMonitor) check(t *testing.T, recs []record) {
	t.Helper()
	checkConfirmed(t, mon.stop(), recs, mon.start)
}

// checkDelivered waits until Run delivered as many events as want holds,
// checks that the table's topic holds each change of want exactly once
// (checkExactlyOnce), and returns the records.
func (e *pgEnv) checkDelivered(r *run, tr *tracker, table string, want []change) []record {
	e.t.Helper()
	waitFor(e.t, 30*time.Second, "every change delivered", r, func() bool { return tr.delivered() == len(want) })
	recs := e.readTopic(table)
	checkExactlyOnce(e.t, recs, want)
	return recs
}

// checkConfirmed checks that the slot never confirmed a position beyond an
// event not yet written: for every sample, the first event above what was
// written has a commit LSN at or above the confirmed position.
func checkConfirmed(t *testing.T, samples []confirmSample, recs []record, slotStart kafkasink.LSN) {
	t.Helper()
	pos := make([]kafkasink.Position, len(recs))
	for i, r := range recs {
		pos[i] = r.Position
	}
	slices.SortFunc(pos, kafkasink.Position.Compare)
	advanced := 0
	for _, s := range samples {
		i, _ := slices.BinarySearchFunc(pos, s.written, kafkasink.Position.Compare)
		for i < len(pos) && pos[i].Compare(s.written) <= 0 {
			i++
		}
		if i < len(pos) && pos[i].LSN < s.confirmed {
			t.Fatalf("slot confirmed %s while event %s (commit LSN below it) was not written yet (written up to %s)", s.confirmed, pos[i], s.written)
		}
		if s.confirmed > slotStart {
			advanced++
		}
	}
	if len(samples) == 0 || advanced == 0 {
		t.Fatalf("the slot's confirmed position never advanced beyond %s in %d samples", slotStart, len(samples))
	}
}

// groupBy groups vs by key, in their order within each group.
func groupBy[K comparable, V any](vs []V, key func(V) K) map[K][]V {
	m := make(map[K][]V)
	for _, v := range vs {
		k := key(v)
		m[k] = append(m[k], v)
	}
	return m
}

// containsAll reports whether s contains every one of parts.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// seqs hands out unique seq values, so every change is recognisable in
// the topic.
type seqs struct{ n atomic.Int64 }

func (s *seqs) next() int64 { return s.n.Add(1) }

// insertRows inserts the rows ids in tx, each with a fresh seq, and
// records them in m.
func insertRows(tx pgx.Tx, t *testing.T, table string, m *model, sq *seqs, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		seq := sq.next()
		if _, err := tx.Exec(context.Background(), "INSERT INTO "+table+" (id, seq, note) VALUES ($1, $2, $3)", id, seq, fmt.Sprintf("row %d", id)); err != nil {
			t.Fatal(err)
		}
		m.add("insert", id, seq)
	}
}

// updateRows gives the rows ids a fresh seq in tx and records the updates
// in m.
func updateRows(tx pgx.Tx, t *testing.T, table string, m *model, sq *seqs, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		seq := sq.next()
		if _, err := tx.Exec(context.Background(), "UPDATE "+table+" SET seq = $2 WHERE id = $1", id, seq); err != nil {
			t.Fatal(err)
		}
		m.add("update", id, seq)
	}
}

// deleteRows deletes the rows ids in tx and records the deletes in m.
func deleteRows(tx pgx.Tx, t *testing.T, table string, m *model, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if _, err := tx.Exec(context.Background(), "DELETE FROM "+table+" WHERE id = $1", id); err != nil {
			t.Fatal(err)
		}
		m.add("delete", id, -1)
	}
}

// ids returns from, from+1, ..., to.
func ids(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// fillTable inserts rows 1..n with seq = id in one statement.
func (e *pgEnv) fillTable(table string, n int) {
	e.t.Helper()
	e.exec(fmt.Sprintf("INSERT INTO %s (id, seq, note) SELECT i, i, 'row ' || i FROM generate_series(1, %d) i", table, n))
}

// encoderSinks is one sink per built-in encoder on the test's cluster,
// each with its own topic prefix, fed by one Run: Write writes the batch
// to each in turn, so every encoder sees the same events.
type encoderSinks struct {
	sinks []Sink
}

// encoderPrefixes are the topic prefixes of newEncoderSinks' sinks.
var encoderPrefixes = []string{"json", "upsert", "debezium"}

func (e *pgEnv) newEncoderSinks() *encoderSinks {
	e.t.Helper()
	encoders := []kafkasink.Encoder{kafkasink.JSONEncoder{}, kafkasink.UpsertEncoder{}, debezium.Encoder{}}
	fan := &encoderSinks{}
	for i, enc := range encoders {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := kafkasink.New(ctx, kafkasink.Config{
			Brokers: e.brokers,
			SinkID:  e.name + "_" + encoderPrefixes[i],
			Topics:  kafkasink.Topics{Prefix: encoderPrefixes[i], Partitions: 1},
			Encoder: enc,
		})
		cancel()
		if err != nil {
			e.t.Fatalf("kafkasink.New: %v", err)
		}
		e.t.Cleanup(func() { s.Close(context.Background()) })
		fan.sinks = append(fan.sinks, s)
	}
	return fan
}

func (f *encoderSinks) Write(ctx context.Context, b kafkasink.Batch) error {
	for _, s := range f.sinks {
		if err := s.Write(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

func (f *encoderSinks) Checkpoint() kafkasink.Checkpoint { return f.sinks[len(f.sinks)-1].Checkpoint() }

func (f *encoderSinks) Close(ctx context.Context) error { return nil }

// encodedRecord is a record of an encoder sink's topic: its key, and its
// value as JSON, nil for a tombstone.
type encodedRecord struct {
	key   string
	value map[string]any
}

// readEncoded waits until the topic of the table under the encoder's
// prefix holds at least n records and returns them in topic order.
func (e *pgEnv) readEncoded(r *run, prefix, table string, n int) []encodedRecord {
	e.t.Helper()
	var out []encodedRecord
	waitFor(e.t, 30*time.Second, prefix+" records of "+table, r, func() bool {
		out = out[:0]
		for _, rec := range sinktest.ReadCommitted(e.t, e.brokers, prefix+".public."+table) {
			var v map[string]any
			if rec.Value != nil {
				if err := json.Unmarshal(rec.Value, &v); err != nil {
					e.t.Fatalf("%s record %s: %v", prefix, rec.Value, err)
				}
			}
			out = append(out, encodedRecord{string(rec.Key), v})
		}
		return len(out) >= n
	})
	return out
}

// rowImage returns the row a record of the encoder carries: "document"
// for upsert, "after" for the others; nil for a tombstone or a null
// image. ok is false when a value has no such field or it is not an
// object.
func rowImage(prefix string, v map[string]any) (row map[string]any, ok bool) {
	if v == nil {
		return nil, true
	}
	field := "after"
	if prefix == "upsert" {
		field = "document"
	}
	f, present := v[field]
	row, isObject := f.(map[string]any)
	return row, present && (f == nil || isObject)
}

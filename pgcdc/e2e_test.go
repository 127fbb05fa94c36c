package pgcdc

// The end-to-end test runs the real program, examples/pglogrepl, against
// the real PostgreSQL and Kafka of scripts/testenv.sh, kills it with SIGKILL
// again and again while a workload changes rows, restarts PostgreSQL and
// terminates the walsender under it, and checks that a read_committed
// reader sees every change exactly once, in commit order per row.
//
// Default size (a big transaction of 50,000 rows; about a minute on a
// 2-core machine):
//
//	eval "$(scripts/testenv.sh env)"
//	go test -count=1 -run TestEndToEndSIGKILLExactlyOnce -v ./pgcdc
//
// Full size, the 1,000,000-row transaction (about two and a half minutes
// there):
//
//	eval "$(scripts/testenv.sh env)"
//	KAFKASINK_E2E_BIGTXN=1000000 go test -count=1 -timeout 30m -run TestEndToEndSIGKILLExactlyOnce -v ./pgcdc
//
// (-pgcdc.bigtxn=1000000 does the same; the environment variable wins.)
//
// The test restarts the shared PostgreSQL once (pg_ctl restart -m fast):
// other tests connected to it at that moment see their connections fail.
// KAFKASINK_E2E_NO_PG_RESTART=1 skips that step.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

var bigTxnRows = flag.Int("pgcdc.bigtxn", 50000, "rows of the end-to-end test's big transaction (KAFKASINK_E2E_BIGTXN overrides; the full size is 1000000)")

// The end-to-end test's own knobs, read only by readE2EKnobs.
const (
	envBigTxn      = "KAFKASINK_E2E_BIGTXN"        // rows of the big transaction; wins over -pgcdc.bigtxn
	envNoPGRestart = "KAFKASINK_E2E_NO_PG_RESTART" // set: leave the shared PostgreSQL running
)

// e2eKnobs are the end-to-end test's settings beyond the environment's
// targets.
type e2eKnobs struct {
	bigTxn  int    // rows of the big transaction
	testDir string // sinktest.EnvDir, where PostgreSQL's data is; "" when the test must not restart it
}

// readE2EKnobs reads the knobs, failing on a malformed one and skipping
// when restarting PostgreSQL is asked for but its directory is unknown.
func readE2EKnobs(t *testing.T) e2eKnobs {
	t.Helper()
	k := e2eKnobs{bigTxn: *bigTxnRows}
	if s := os.Getenv(envBigTxn); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			t.Fatalf("%s=%q: want a number of rows, at least 1000", envBigTxn, s)
		}
		k.bigTxn = n
	}
	if os.Getenv(envNoPGRestart) == "" {
		if !sinktest.Has(sinktest.EnvDir) {
			t.Skipf("%s is not set: the test restarts PostgreSQL in $%[1]s/pg/data; eval \"$(scripts/testenv.sh env)\", or set %s=1", sinktest.EnvDir, envNoPGRestart)
		}
		k.testDir = sinktest.Env(t, sinktest.EnvDir)[0]
	}
	return k
}

// program builds examples/pglogrepl into the test's temporary directory.
func program(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pglogrepl")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/kafkasink/kafkasink/examples/pglogrepl").CombinedOutput()
	if err != nil {
		t.Fatalf("building examples/pglogrepl: %v\n%s", err, out)
	}
	return bin
}

// proc is one run of the program.
type proc struct {
	cmd  *exec.Cmd
	out  *sinktest.SyncBuffer
	done chan struct{} // closed when it exited
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of the output, for failure messages.
func (p *proc) tail() string {
	s := p.out.String()
	if len(s) > 6000 {
		s = "..." + s[len(s)-6000:]
	}
	return s
}

// e2e is the end-to-end test's state.
type e2e struct {
	t       *testing.T
	pg      string
	brokers []string
	name    string // slot, publication, table, sink id and topic prefix
	runs    int
	bin     string    // the built program
	db      *pgx.Conn // the test's own queries; only the test goroutine uses it
}

func (e *e2e) topic() string     { return e.name + ".public." + e.name }
func (e *e2e) ckptTopic() string { return e.name + ".checkpoints" }

// start starts the program; it streams until killed or signalled.
func (e *e2e) start() *proc {
	e.t.Helper()
	e.runs++
	cmd := exec.Command(e.bin,
		"-pg", e.pg, "-brokers", strings.Join(e.brokers, ","), "-tables", "public."+e.name,
		"-slot", e.name, "-publication", e.name, "-sink-id", e.name,
		"-topic-prefix", e.name, "-checkpoint-topic", e.ckptTopic(), "-partitions", "3",
		// Smaller batches than the default split the big transaction
		// into more Writes, so a kill lands inside it more surely.
		"-batch-max-events", "5000",
		"-transaction-timeout", "20s", "-progress", "2s")
	// The test's environment must not configure the program behind its
	// back: only what the flags say.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	out := &sinktest.SyncBuffer{}
	fmt.Fprintf(out, "--- run %d\n", e.runs)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	p := &proc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		if !p.exited() {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// kill SIGKILLs p, which must still be running: a run that ended on its
// own failed.
func (e *e2e) kill(p *proc, why string) {
	e.t.Helper()
	if p.exited() {
		e.t.Fatalf("the program exited by itself before the kill %s (status %d):\n%s", why, p.cmd.ProcessState.ExitCode(), p.tail())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		e.t.Fatalf("SIGKILL: %v", err)
	}
	<-p.done
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		e.t.Fatalf("the program ended with %v before the kill %s:\n%s", p.cmd.ProcessState, why, p.tail())
	}
	e.t.Logf("SIGKILL %s", why)
}

// stop SIGTERMs p and returns its exit status.
func (e *e2e) stop(p *proc) int {
	e.t.Helper()
	if p.exited() {
		e.t.Fatalf("the program exited by itself (status %d):\n%s", p.cmd.ProcessState.ExitCode(), p.tail())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		e.t.Fatalf("the program did not stop within 60s of SIGTERM:\n%s", p.tail())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (e *e2e) queryLSN(sql string, args ...any) kafkasink.LSN {
	e.t.Helper()
	lsn, err := queryLSN(context.Background(), e.db, sql, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return lsn
}

func (e *e2e) confirmed() kafkasink.LSN {
	return e.queryLSN(confirmedFlushSQL, e.name)
}

// reconnect replaces the test's connection after a server restart.
func (e *e2e) reconnect() {
	e.t.Helper()
	e.db.Close(context.Background())
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		db, err := pgx.Connect(ctx, e.pg)
		cancel()
		if err == nil {
			e.db = db
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("reconnecting to PostgreSQL: %v", err)
		}
	}
}

// cleanup drops the slot, the publication and the table, and the topics.
func (e *e2e) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, e.pg)
	if err != nil {
		e.t.Logf("cleanup: %v", err)
		return
	}
	defer db.Close(ctx)
	dropTestObjects(ctx, db, e.name)
	if cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...)); err == nil {
		kadm.NewClient(cl).DeleteTopics(ctx, e.topic(), e.ckptTopic())
		cl.Close()
	}
}

// workload changes rows in small transactions on its own connection until
// stopped: inserts, updates, deletes and primary-key changes. Every row
// change sets a fresh seq, so each expected event is unique. It records the
// changes in commit order in m; it is the only writer of the table besides
// the big transaction, which uses ids of its own.
type workload struct {
	pg    string
	table string
	m     *model
	rnd   *rand.Rand

	pause   sync.Mutex // held for each transaction; the test takes it to pause
	db      *pgx.Conn
	live    []int64
	nextID  int64
	seq     *atomic.Int64
	txns    atomic.Int64
	stopped atomic.Bool
	err     error
	done    chan struct{}
}

// op is one row change of a workload transaction, and the events it
// becomes.
type op struct {
	sql     string
	args    []any
	changes []change
}

func (w *workload) run() {
	defer close(w.done)
	for !w.stopped.Load() {
		w.pause.Lock()
		err := w.txn()
		w.pause.Unlock()
		if err != nil {
			w.err = err
			return
		}
		time.Sleep(time.Duration(2+w.rnd.IntN(6)) * time.Millisecond)
	}
}

// txn runs one transaction of 1 to 6 changes and records them once it
// committed. A failure before COMMIT leaves nothing behind; one during
// COMMIT would leave its outcome unknown, so the test pauses the workload
// around anything that breaks connections.
func (w *workload) txn() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live := slices.Clone(w.live)
	next := w.nextID
	var ops []op
	for range 1 + w.rnd.IntN(6) {
		s := w.seq.Add(1)
		r := w.rnd.IntN(10)
		switch {
		case len(live) < 20 || r < 4: // insert
			next++
			ops = append(ops, op{"INSERT INTO " + w.table + " (id, seq, note) VALUES ($1, $2, 'w')", []any{next, s}, []change{{"insert", next, s}}})
			live = append(live, next)
		case r < 7: // update
			id := live[w.rnd.IntN(len(live))]
			ops = append(ops, op{"UPDATE " + w.table + " SET seq = $2, note = 'u' WHERE id = $1", []any{id, s}, []change{{"update", id, s}}})
		case r < 9: // delete
			i := w.rnd.IntN(len(live))
			ops = append(ops, op{"DELETE FROM " + w.table + " WHERE id = $1", []any{live[i]}, []change{{"delete", live[i], -1}}})
			live = slices.Delete(live, i, i+1)
		default: // primary-key change: the decoder makes it a delete and an insert
			i := w.rnd.IntN(len(live))
			next++
			ops = append(ops, op{"UPDATE " + w.table + " SET id = $2, seq = $3, note = 'k' WHERE id = $1", []any{live[i], next, s},
				[]change{{"delete", live[i], -1}, {"insert", next, s}}})
			live[i] = next
		}
	}
	err := pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		for _, o := range ops {
			tag, err := tx.Exec(ctx, o.sql, o.args...)
			if err != nil {
				return fmt.Errorf("%s: %w", o.sql, err)
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("%s %v: %d rows affected, want 1", o.sql, o.args, tag.RowsAffected())
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("workload transaction: %w", err)
	}
	w.live, w.nextID = live, next
	for _, o := range ops {
		for _, c := range o.changes {
			w.m.add(c.op, c.id, c.seq)
		}
	}
	w.txns.Add(1)
	return nil
}

// ckptWatcher follows the sink's checkpoint topic as a read_committed
// consumer.
type ckptWatcher struct {
	cl     *kgo.Client
	adm    *kadm.Client
	topic  string
	sinkID string

	mu      sync.Mutex
	latest  kafkasink.Position
	next    int64 // offset after the last record seen, control records included
	decline error // a checkpoint that went backwards or did not parse
}

func newCkptWatcher(t *testing.T, brokers []string, topic, sinkID string) *ckptWatcher {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w := &ckptWatcher{cl: cl, adm: kadm.NewClient(cl), topic: topic, sinkID: sinkID}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.loop(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return w
}

func (w *ckptWatcher) loop(ctx context.Context) {
	for ctx.Err() == nil {
		fetches := w.cl.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.next = r.Offset + 1
			if r.Attrs.IsControl() || string(r.Key) != w.sinkID {
				return
			}
			var v struct {
				Position string `json:"position"`
			}
			pos, err := kafkasink.Position{}, json.Unmarshal(r.Value, &v)
			if err == nil {
				pos, err = kafkasink.ParsePosition(v.Position)
			}
			switch {
			case err != nil:
				w.decline = fmt.Errorf("checkpoint at offset %d: %v", r.Offset, err)
			case pos.Compare(w.latest) < 0:
				w.decline = fmt.Errorf("committed checkpoint went back from %s to %s at offset %d", w.latest, pos, r.Offset)
			default:
				w.latest = pos
			}
		})
	}
}

func (w *ckptWatcher) current() kafkasink.Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

// synced returns the newest checkpoint committed when it was called: it
// reads the partition's last stable offset and waits until the consumer is
// there. ok is false when it could not tell within a few seconds (an
// aborted record whose marker lies beyond the stable offset hides the end).
func (w *ckptWatcher) synced() (kafkasink.Position, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := w.adm.ListCommittedOffsets(ctx, w.topic)
	if err != nil {
		return kafkasink.Position{}, false
	}
	o, ok := ends.Lookup(w.topic, 0)
	if !ok || o.Err != nil {
		return kafkasink.Position{}, false
	}
	for ctx.Err() == nil {
		w.mu.Lock()
		next, latest := w.next, w.latest
		w.mu.Unlock()
		if next >= o.Offset {
			return latest, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return kafkasink.Position{}, false
}

// sampler pairs the slot's confirmed_flush_lsn with the checkpoint
// committed after it was read, until stopped.
//
// Which comparison is right: "checkpoint LSN >= confirmed_flush_lsn" is
// not. The checkpoint holds a commit LSN (where the transaction's commit
// record starts), while the slot is confirmed the end LSN of that commit
// record, which is above it, and, between transactions, keepalive and
// heartbeat positions further on; a correct sink confirms above its
// checkpoint all the time. The invariant is that every transaction whose
// commit LSN lies below the confirmed position is in Kafka: the first
// event above the checkpoint has a commit LSN at or above the confirmed
// position. checkConfirmed checks exactly that against the events read
// back at the end.
type sampler struct {
	mu      sync.Mutex
	samples []confirmSample
	skipped int
	stop    func()
}

func startSampler(t *testing.T, pg, slot string, w *ckptWatcher) *sampler {
	s := &sampler{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var db *pgx.Conn
		defer func() {
			if db != nil {
				db.Close(context.Background())
			}
		}()
		for ctx.Err() == nil {
			time.Sleep(150 * time.Millisecond)
			if db == nil {
				c, err := pgx.Connect(ctx, pg)
				if err != nil {
					continue // PostgreSQL restarting
				}
				db = c
			}
			lsn, err := slotConfirmed(ctx, db, slot)
			if err != nil {
				db.Close(context.Background())
				db = nil
				continue
			}
			s.add(lsn, w, liveSampleDelay)
		}
	}()
	s.stop = func() {
		cancel()
		<-done
	}
	return s
}

// liveSampleDelay is how long a sample taken while the program runs waits
// between reading the slot and reading the checkpoint. A Kafka commit
// returns to the producer once the coordinator has logged it; the commit
// markers that make the records (and the checkpoint) visible to
// read_committed consumers are written to the partitions just after. The
// sink may confirm to PostgreSQL in between, which is correct: the
// transaction is decided and will become visible, even if the producer
// dies. The delay covers that gap; a bug confirming a transaction that
// commits less than this later would go unseen by live samples, but not by
// the samples taken after each SIGKILL, when nothing can commit any more.
const liveSampleDelay = 500 * time.Millisecond

// add records one sample: confirmed first, then, after delay, the
// checkpoint, so the checkpoint is at least the one whose Write let the
// slot confirm.
func (s *sampler) add(confirmed kafkasink.LSN, w *ckptWatcher, delay time.Duration) {
	if confirmed == 0 {
		return
	}
	time.Sleep(delay)
	pos, ok := w.synced()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		s.skipped++
		return
	}
	s.samples = append(s.samples, confirmSample{confirmed: confirmed, written: pos})
}

// endOffsets sums the topic's high watermarks: it stops moving when the
// sink has nothing more to write.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// TestEndToEndSIGKILLExactlyOnce: the program streams a workload of small
// transactions and one big transaction into Kafka while it is SIGKILLed at
// random moments, inside the big transaction (while PostgreSQL writes it
// and while the sink writes it), while its walsender is terminated and
// while PostgreSQL restarts. After a final run that catches up and stops
// on SIGTERM, our read_committed reader, kcat and Kafka's Java console
// consumer see every change exactly once, each row's changes in commit
// order, and the slot never confirmed a position whose transactions were
// not all committed to Kafka.
func TestEndToEndSIGKILLExactlyOnce(t *testing.T) {
	pg, brokers := realEnv(t)
	knobs := readE2EKnobs(t)
	big := knobs.bigTxn
	began := time.Now()
	bin := program(t) // built before any timer starts

	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	e := &e2e{t: t, pg: pg, brokers: brokers, bin: bin, name: fmt.Sprintf("pgcdc_e2e_%06d", rnd.IntN(1e6))}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatalf("connecting to KAFKASINK_TEST_PG: %v", err)
	}
	e.db = db
	t.Cleanup(func() { e.db.Close(context.Background()) })
	t.Cleanup(e.cleanup)
	if _, err := e.db.Exec(ctx, "CREATE TABLE "+e.name+" (id bigint PRIMARY KEY, seq bigint NOT NULL, note text)"); err != nil {
		t.Fatal(err)
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	kadmin := kadm.NewClient(adm)

	p := e.start()
	// Changes before the slot exists are not in it: wait for the slot and
	// the checkpoint topic the sink creates.
	for deadline := time.Now().Add(90 * time.Second); e.confirmed() == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || p.exited() {
			t.Fatalf("no replication slot after 90s:\n%s", p.tail())
		}
	}
	slotStart := e.confirmed()
	watcher := newCkptWatcher(t, brokers, e.ckptTopic(), e.name)
	samples := startSampler(t, pg, e.name, watcher)
	defer samples.stop()
	// killSample checks the slot right after a kill, when nothing can
	// move it: the moment a restart resumes from.
	killSample := func() {
		samples.add(e.confirmed(), watcher, 2*time.Second)
	}

	m := &model{}
	var seq atomic.Int64
	wdb, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	w := &workload{pg: pg, table: e.name, m: m, rnd: rand.New(rand.NewPCG(rnd.Uint64(), 1)), db: wdb, seq: &seq, done: make(chan struct{})}
	go w.run()
	stopWorkload := func() {
		w.stopped.Store(true)
		<-w.done
		if w.err != nil {
			t.Fatalf("workload: %v", w.err)
		}
	}
	defer func() {
		if !w.stopped.Load() {
			w.stopped.Store(true)
			<-w.done
		}
		w.db.Close(context.Background())
	}()

	kills := 0
	killAfter := func(d time.Duration, why string) {
		time.Sleep(d)
		e.kill(p, why)
		kills++
		killSample()
		p = e.start()
	}

	// Kills at random moments, one early in start-up (fencing, reading the
	// checkpoint, slot still held by the old walsender).
	killAfter(time.Duration(100+rnd.IntN(400))*time.Millisecond, "during start-up")
	for i := range 4 {
		d := time.Duration(800+rnd.IntN(2500)) * time.Millisecond
		killAfter(d, fmt.Sprintf("at a random moment %d (after %v)", i+1, d))
	}

	// The big transaction: fresh ids above the workload's, in ten
	// statements so the program can be killed while PostgreSQL writes
	// (and, beyond logical_decoding_work_mem, streams) it.
	const bigBase = 1 << 40
	bigStart := seq.Add(int64(big)) - int64(big) + 1
	bigErr := make(chan error, 1)
	halfway := make(chan struct{})
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		bdb, err := pgx.Connect(bctx, pg)
		if err != nil {
			bigErr <- err
			return
		}
		defer bdb.Close(context.Background())
		bigErr <- pgx.BeginFunc(bctx, bdb, func(tx pgx.Tx) error {
			chunk := big / 10
			for i := range 10 {
				from, to := i*chunk, (i+1)*chunk
				if i == 9 {
					to = big
				}
				if _, err := tx.Exec(bctx, "INSERT INTO "+e.name+" (id, seq, note) SELECT $1 + g, $2 + g, 'big' FROM generate_series($3::bigint, $4::bigint - 1) g",
					int64(bigBase), bigStart, from, to); err != nil {
					return err
				}
				if i == 2 {
					close(halfway)
				}
			}
			return nil
		})
	}()
	<-halfway
	e.kill(p, "while PostgreSQL writes the big transaction")
	kills++
	select {
	case err := <-bigErr:
		bigErr <- err
		t.Log("(the big transaction had already committed at that kill)")
	default:
	}
	killSample()
	p = e.start()
	if err := <-bigErr; err != nil {
		t.Fatalf("big transaction: %v", err)
	}
	for i := range big {
		m.add("insert", bigBase+int64(i), bigStart+int64(i))
	}
	t.Logf("big transaction of %d rows committed after %v", big, time.Since(began).Round(time.Millisecond))

	// Kill while the sink is part way through the big transaction: its
	// checkpoint is inside it (no workload transaction has 100 events).
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if ck := watcher.current(); ck.Index >= 100 && ck.Index < uint64(big-1) {
			e.kill(p, fmt.Sprintf("while the sink writes the big transaction (checkpoint %s of %d events)", ck, big))
			kills++
			killSample()
			p = e.start()
			break
		}
		if ck := watcher.current(); ck.Index == uint64(big-1) || time.Now().After(deadline) || p.exited() {
			t.Fatalf("never saw a checkpoint inside the big transaction (latest %s): the kill could not land inside it:\n%s", ck, p.tail())
		}
	}
	killAfter(time.Duration(500+rnd.IntN(1500))*time.Millisecond, "at a random moment after the big transaction")

	// The walsender terminated under a running program: it reconnects.
	time.Sleep(time.Duration(1000+rnd.IntN(1000)) * time.Millisecond)
	var terminated bool
	if err := e.db.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(active_pid)), false) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, e.name).Scan(&terminated); err != nil {
		t.Fatal(err)
	}
	if !terminated {
		t.Fatalf("no walsender to terminate: is the program streaming?\n%s", p.tail())
	}
	waitOutput(t, p, "msg=\"replication started\"", 2, "a new replication connection after the walsender was terminated")
	t.Log("walsender terminated; the program reconnected")

	// PostgreSQL restarted under a running program. The workload pauses
	// so no COMMIT is in flight when the connections break.
	if knobs.testDir != "" {
		time.Sleep(time.Duration(1000+rnd.IntN(1000)) * time.Millisecond)
		w.pause.Lock()
		logf, err := os.OpenFile(filepath.Join(t.TempDir(), "pg_ctl.log"), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		restartStart := time.Now()
		// -l: the new postmaster must not write to a pipe of ours.
		cmd := exec.Command("runuser", "-u", "postgres", "--", "setsid", "/usr/lib/postgresql/15/bin/pg_ctl",
			"-D", filepath.Join(knobs.testDir, "pg", "data"), "-l", filepath.Join(knobs.testDir, "pg", "postgres.log"),
			"restart", "-m", "fast", "-w", "-t", "60")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
		err = cmd.Run()
		logf.Close()
		if err != nil {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("pg_ctl restart: %v\n%s", err, b)
		}
		t.Logf("PostgreSQL restarted in %v", time.Since(restartStart).Round(time.Millisecond))
		e.reconnect()
		w.db.Close(context.Background())
		if w.db, err = pgx.Connect(ctx, pg); err != nil {
			t.Fatal(err)
		}
		w.pause.Unlock()
		waitOutput(t, p, "msg=\"replication started\"", 3, "a new replication connection after PostgreSQL restarted")
	}
	time.Sleep(time.Duration(1000+rnd.IntN(1000)) * time.Millisecond)
	killAfter(time.Duration(rnd.IntN(1000))*time.Millisecond, "at a random moment after the restarts")
	time.Sleep(time.Second)
	stopWorkload()

	// Catch up: the last run is not killed. It has caught up when the slot
	// confirmed the WAL written after the workload stopped and the topic
	// stopped growing.
	end := e.queryLSN("SELECT pg_current_wal_lsn()::text")
	var last int64 = -1
	stable := 0
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if p.exited() {
			t.Fatalf("the program exited while catching up:\n%s", p.tail())
		}
		n := endOffsets(t, kadmin, e.topic())
		if n == last && e.confirmed() >= end {
			stable++
		} else {
			stable = 0
		}
		last = n
		if stable >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up after 10 minutes: slot at %s, want %s:\n%s", e.confirmed(), end, p.tail())
		}
	}
	if code := e.stop(p); code != 0 {
		t.Fatalf("SIGTERM: exit status %d, want 0:\n%s", code, p.tail())
	}
	samples.stop()
	t.Logf("%d kills, %d runs, %d workload transactions, %d expected events; caught up %v after start",
		kills, e.runs, w.txns.Load(), m.len(), time.Since(began).Round(time.Millisecond))
	if kills < 6 {
		t.Fatalf("only %d kills", kills)
	}

	readStart := time.Now()
	raw := sinktest.ReadCommitted(t, brokers, e.topic())
	recs := decodeRecords(t, raw)
	t.Logf("read_committed reader: %d records in %v", len(recs), time.Since(readStart).Round(time.Millisecond))
	// The big transaction keeps its order: one key per row, but its
	// positions must be exactly 0..big-1 at one commit LSN.
	checkBigTxn(t, recs, bigBase, big)
	checkChanges(t, recs, m.all())
	if all := sinktest.ReadUncommitted(t, brokers, e.topic()); len(all) > len(recs) {
		t.Logf("the log holds %d records of transactions the kills left unfinished, invisible to read_committed", len(all)-len(recs))
	}

	samples.mu.Lock()
	t.Logf("%d samples of the slot's confirmed position against the committed checkpoint (%d skipped: the checkpoint topic's end was hidden)", len(samples.samples), samples.skipped)
	checkConfirmed(t, samples.samples, recs, slotStart)
	samples.mu.Unlock()
	watcher.mu.Lock()
	if watcher.decline != nil {
		t.Errorf("checkpoint topic: %v", watcher.decline)
	}
	watcher.mu.Unlock()

	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	sinktest.CheckExternalReaders(t, brokers, e.topic(), ids)
	t.Logf("total %v", time.Since(began).Round(time.Millisecond))
}

// checkChanges checks that recs hold each change of want exactly once,
// nothing else, under unique event ids, and that each row's changes appear
// in the topic (one key, one partition) in commit order with increasing
// positions. It is checkExactlyOnce in linear time, for a million records.
func checkChanges(t *testing.T, recs []record, want []change) {
	t.Helper()
	ids := make(map[string]bool, len(recs))
	got := make(map[change]int, len(recs))
	gotByRow := make(map[int64][]change)
	last := make(map[int64]kafkasink.Position)
	for _, r := range recs {
		if ids[r.ID] {
			t.Errorf("event %s (%v) delivered more than once", r.ID, r.change())
		}
		ids[r.ID] = true
		c := r.change()
		got[c]++
		gotByRow[c.id] = append(gotByRow[c.id], c)
		if p, ok := last[c.id]; ok && r.Position.Compare(p) <= 0 {
			t.Errorf("row %d: position %s after %s", c.id, r.Position, p)
		}
		last[c.id] = r.Position
	}
	wantN := make(map[change]int, len(want))
	wantByRow := make(map[int64][]change)
	for _, c := range want {
		wantN[c]++
		wantByRow[c.id] = append(wantByRow[c.id], c)
	}
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for c, n := range wantN {
		if got[c] != n {
			report("%v: delivered %d times, want %d", c, got[c], n)
		}
	}
	for c, n := range got {
		if _, ok := wantN[c]; !ok {
			report("%v: delivered %d times, never made", c, n)
		}
	}
	for id, w := range wantByRow {
		if !slices.Equal(gotByRow[id], w) {
			report("row %d: changes in topic order %v, commit order %v", id, gotByRow[id], w)
		}
	}
	if bad > 0 || t.Failed() {
		t.Fatalf("%d changes wrong among %d records, %d expected", bad, len(recs), len(want))
	}
}

// waitOutput waits until p's output holds s at least n times.
func waitOutput(t *testing.T, p *proc, s string, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); strings.Count(p.out.String(), s) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || p.exited() {
			t.Fatalf("no %s (%d times %q in the output):\n%s", what, strings.Count(p.out.String(), s), s, p.tail())
		}
	}
}

// checkBigTxn checks that the big transaction arrived as one transaction:
// every row once, with indexes 0..n-1 at one commit LSN.
func checkBigTxn(t *testing.T, recs []record, base int64, n int) {
	t.Helper()
	var lsn kafkasink.LSN
	seen := make([]bool, n)
	count := 0
	for _, r := range recs {
		if r.change().id < base {
			continue
		}
		if lsn == 0 {
			lsn = r.Position.LSN
		}
		if r.Position.LSN != lsn || r.Position.Index >= uint64(n) || seen[r.Position.Index] {
			t.Fatalf("big transaction: record %s does not fit (commit LSN %s, %d rows)", r.ID, lsn, n)
		}
		seen[r.Position.Index] = true
		count++
	}
	if count != n {
		t.Fatalf("big transaction: %d of %d rows", count, n)
	}
}

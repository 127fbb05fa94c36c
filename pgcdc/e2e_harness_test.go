package pgcdc

// The end-to-end test's harness: the program and its runs, the workload,
// the checkpoint watcher and the slot sampler.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// program builds the test's own program, internal/cmd/e2esink, into the
// test's temporary directory.
func program(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "e2esink")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/kafkasink/kafkasink/internal/cmd/e2esink").CombinedOutput()
	if err != nil {
		t.Fatalf("building internal/cmd/e2esink: %v\n%s", err, out)
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

// e2e is the end-to-end test's state, shared by its phases. Each phase
// runs as a subtest and passes its own t to the methods that can fail;
// what must outlive a phase (the program's runs, the connections) is
// cleaned up with the whole test, owner.
type e2e struct {
	owner   *testing.T
	pg      string
	brokers []string
	knobs   e2eKnobs
	name    string // slot, publication, table, sink id and topic prefix
	bin     string // the built program
	rnd     *rand.Rand
	began   time.Time

	db     *pgx.Conn // the test's own queries; only the running phase uses it
	kadmin *kadm.Client
	p      *proc // the program's current run
	runs   int
	kills  int

	slotStart kafkasink.LSN // the slot's confirmed position once it exists
	watcher   *ckptWatcher
	samples   *sampler
	m         *model // every change committed, in commit order
	seq       atomic.Int64
	w         *workload
}

func (e *e2e) topic() string     { return e.name + ".public." + e.name }
func (e *e2e) ckptTopic() string { return e.name + ".checkpoints" }

// start starts the program; it streams until killed or signalled.
func (e *e2e) start(t *testing.T) *proc {
	t.Helper()
	e.runs++
	cmd := exec.Command(e.bin,
		"-pg", e.pg, "-brokers", strings.Join(e.brokers, ","), "-tables", "public."+e.name,
		"-slot", e.name, "-publication", e.name, "-sink-id", e.name,
		"-topic-prefix", e.name, "-checkpoint-topic", e.ckptTopic(), "-partitions", "3",
		// Smaller batches than the default split the big transaction
		// into more Writes, so a kill lands inside it more surely.
		"-batch-max-events", "5000",
		"-transaction-timeout", "20s")
	// The test's environment must not configure the program behind its
	// back (pgx reads PG* variables): only what the flags say.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	out := &sinktest.SyncBuffer{}
	fmt.Fprintf(out, "--- run %d\n", e.runs)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	p := &proc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	e.owner.Cleanup(func() {
		if !p.exited() {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// kill SIGKILLs p, which must still be running: a run that ended on its
// own failed.
func (e *e2e) kill(t *testing.T, p *proc, why string) {
	t.Helper()
	if p.exited() {
		t.Fatalf("the program exited by itself before the kill %s (status %d):\n%s", why, p.cmd.ProcessState.ExitCode(), p.tail())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	<-p.done
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the program ended with %v before the kill %s:\n%s", p.cmd.ProcessState, why, p.tail())
	}
	t.Logf("SIGKILL %s", why)
}

// stop SIGTERMs p and returns its exit status.
func (e *e2e) stop(t *testing.T, p *proc) int {
	t.Helper()
	if p.exited() {
		t.Fatalf("the program exited by itself (status %d):\n%s", p.cmd.ProcessState.ExitCode(), p.tail())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the program did not stop within 60s of SIGTERM:\n%s", p.tail())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (e *e2e) queryLSN(t *testing.T, sql string, args ...any) kafkasink.LSN {
	t.Helper()
	lsn, err := queryLSN(context.Background(), e.db, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return lsn
}

// confirmed returns the slot's confirmed_flush_lsn, 0 before it exists.
func (e *e2e) confirmed(t *testing.T) kafkasink.LSN {
	t.Helper()
	return e.queryLSN(t, confirmedFlushSQL, e.name)
}

// reconnect replaces the test's connection after a server restart.
func (e *e2e) reconnect(t *testing.T) {
	t.Helper()
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
			t.Fatalf("reconnecting to PostgreSQL: %v", err)
		}
	}
}

// cleanup drops the slot, the publication and the table, and the topics.
func (e *e2e) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, e.pg)
	if err != nil {
		e.owner.Logf("cleanup: %v", err)
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

// waitOutput waits until p's output holds s at least n times.
func waitOutput(t *testing.T, p *proc, s string, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); strings.Count(p.out.String(), s) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || p.exited() {
			t.Fatalf("no %s (%d times %q in the output):\n%s", what, strings.Count(p.out.String(), s), s, p.tail())
		}
	}
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

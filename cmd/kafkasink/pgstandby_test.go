package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// TestProgramOnStandbyThroughPromotion runs the program against a hot
// standby of PostgreSQL 17 (decoding on a standby needs 16) while a
// writer loads the primary. At a random moment the primary is SIGKILLed
// and the standby promoted with pg_ctl promote; the writer goes on
// against it, and the program, never restarted, goes on too. Every row of
// the promoted server's table must be in the topic exactly once for a
// read_committed reader, and nothing else. The workload only inserts, so
// that table is the truth: a commit the old primary acknowledged but never
// sent to the standby is rightly in neither.
func TestProgramOnStandbyThroughPromotion(t *testing.T) {
	_, brokers := replicaTargets(t)
	pair := pgtest.StartPair(t, pgtest.PairOptions{Major: 17})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name := fmt.Sprintf("kafkasink_standby_%06d", rand.IntN(1e6))
	topic, checkpoints := name+".public."+name, name+".checkpoints"
	pair.Primary.Exec(fmt.Sprintf("CREATE TABLE %[1]s (id bigint PRIMARY KEY); CREATE PUBLICATION %[1]s FOR TABLE %[1]s", name))
	pair.WaitReplayed()
	t.Cleanup(func() { _ = kafkasinktest.DeleteTopics(context.Background(), []string{brokers}, name) })

	bin := filepath.Join(t.TempDir(), "kafkasink")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	program := startReplica(t, bin, []string{"-pg", pair.Standby.ConnString("kafkasink"), "-brokers", brokers, "-ha=false",
		"-tables", "public." + name, "-slot", name, "-publication", name, "-topic-prefix", name, "-partitions", "3",
		"-checkpoint-topic", checkpoints, "-progress", "0", "-log-format", "text"}, "program")
	t.Cleanup(func() {
		program.kill()
		if t.Failed() {
			t.Logf("the program's log:\n%s", program.out.String())
		}
	})

	// A slot made on a standby waits for the primary's next record of
	// its running transactions: ask for one until the program streams.
	// The writer starts after that, at a position past the slot's
	// consistent point, so that every row is streamed (the program runs
	// without an initial snapshot).
	waitFor(t, 90*time.Second, "the program streaming from the standby", nil, &program.out, func() bool {
		pair.Primary.Exec("SELECT pg_log_standby_snapshot()")
		time.Sleep(100 * time.Millisecond)
		return strings.Contains(program.out.String(), `msg="replication started"`)
	})
	seen := newSeenRows(t, ctx, brokers, topic)
	w := startFailoverWriter(ctx, pair.Primary, name)
	waitFor(t, 60*time.Second, "the first rows through the standby", nil, &program.out, func() bool { return seen.count() > 0 })
	moment := time.Duration(300+rand.IntN(1500)) * time.Millisecond
	time.Sleep(moment)
	pair.Primary.Kill()
	pair.Standby.Promote()
	w.retarget(pair.Standby)
	time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
	acked, failed := w.stop()

	db := pair.Standby.Connect("kafkasink")
	defer db.Close(context.Background())
	ids := deliveredOnce(t, ctx, db, brokers, name, topic, seen, program)
	t.Logf("primary SIGKILLed and standby promoted %v after the first rows arrived; %d rows on the promoted standby (writer: %d commits acknowledged, %d failed or unknown), each in the topic once",
		moment, len(ids), acked, failed)
}

// failoverWriter inserts a row, with a new id, every 10ms into the
// server retarget names, connecting again after a failure (the server
// went away): the table of the server that ends up primary says which
// commits survived.
type failoverWriter struct {
	table    string
	stopping context.CancelFunc
	done     chan struct{}

	mu            sync.Mutex
	target        *pgtest.Server
	acked, failed int

	// Only the writer's goroutine uses these.
	conn        *pgx.Conn
	connectedTo *pgtest.Server
	nextID      int64
}

func startFailoverWriter(ctx context.Context, target *pgtest.Server, table string) *failoverWriter {
	wctx, stop := context.WithCancel(ctx)
	w := &failoverWriter{target: target, table: table, stopping: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer func() {
			if w.conn != nil {
				w.conn.Close(context.Background())
			}
		}()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			w.insert(wctx)
		}
	}()
	return w
}

// insert inserts the next row, counting the outcome.
func (w *failoverWriter) insert(ctx context.Context) {
	w.mu.Lock()
	target := w.target
	w.mu.Unlock()
	if w.conn == nil || w.connectedTo != target {
		if w.conn != nil {
			w.conn.Close(context.Background())
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, target.ConnString("kafkasink"))
		cancel()
		if err != nil {
			w.conn = nil
			time.Sleep(50 * time.Millisecond)
			return
		}
		w.conn, w.connectedTo = conn, target
	}
	w.nextID++
	_, err := w.conn.Exec(ctx, "INSERT INTO "+w.table+" VALUES ($1)", w.nextID)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failed++
		w.conn.Close(context.Background())
		w.conn = nil
		return
	}
	w.acked++
}

// retarget points the writer at s.
func (w *failoverWriter) retarget(s *pgtest.Server) {
	w.mu.Lock()
	w.target = s
	w.mu.Unlock()
}

// stop ends the workload and returns how many commits were acknowledged
// and how many failed or had no known outcome.
func (w *failoverWriter) stop() (acked, failed int) {
	w.stopping()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed
}

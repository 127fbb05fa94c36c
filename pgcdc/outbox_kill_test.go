package pgcdc

// TestOutboxSIGKILLExactlyOnce: a service runs transactions that update
// rows and emit outbox messages, about 5% of them rolled back, while the
// pipeline (internal/cmd/e2esink with -outbox-topics) is SIGKILLed at
// random moments, at least KAFKASINK_OUTBOX_KILLS times (default 20).
// Default size 10,000 transactions (KAFKASINK_OUTBOX_TXNS), about a
// minute on a 2-core machine:
//
//	eval "$(scripts/testenv.sh env)"
//	go test -count=1 -run TestOutboxSIGKILLExactlyOnce -v ./pgcdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/outbox"
)

// outboxTxn is one transaction of the outbox workload as committed.
type outboxTxn struct {
	key      string
	updates  int
	messages []string // the values emitted, in order
}

// envCount reads a positive count from the environment, def when unset.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

func TestOutboxSIGKILLExactlyOnce(t *testing.T) {
	pg, brokers := realEnv(t)
	txns := envCount(t, "KAFKASINK_OUTBOX_TXNS", 10000)
	minKills := envCount(t, "KAFKASINK_OUTBOX_KILLS", 20)
	name := fmt.Sprintf("pgcdc_outboxkill_%06d", rand.IntN(1e6))
	rowTopic, msgTopic, ckpt := name+".public."+name, name+".events", name+".checkpoints"
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dropTestObjects(cctx, db, name)
		db.Close(cctx)
		if cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...)); err == nil {
			kadm.NewClient(cl).DeleteTopics(cctx, rowTopic, msgTopic, ckpt)
			cl.Close()
		}
	})
	const keys = 40
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY, seq bigint NOT NULL, note text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" SELECT g, 0, 'k' FROM generate_series(0, $1) g", keys-1); err != nil {
		t.Fatal(err)
	}

	bin := program(t)
	runs, kills := 0, 0
	start := func() *proc {
		runs++
		cmd := exec.Command(bin, "-pg", pg, "-brokers", strings.Join(brokers, ","), "-tables", "public."+name,
			"-slot", name, "-publication", name, "-sink-id", name, "-topic-prefix", name, "-checkpoint-topic", ckpt,
			"-partitions", "3", "-transaction-timeout", "20s", "-outbox-topics", msgTopic, "-outbox-prefix", name)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
		out := &sinktest.SyncBuffer{}
		fmt.Fprintf(out, "--- run %d\n", runs)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, out: out, done: make(chan struct{})}
		go func() { cmd.Wait(); close(p.done) }()
		t.Cleanup(func() {
			if !p.exited() {
				cmd.Process.Kill()
				<-p.done
			}
		})
		return p
	}
	kill := func(p *proc) {
		if p.exited() {
			t.Fatalf("the pipeline exited by itself (status %d):\n%s", p.cmd.ProcessState.ExitCode(), p.tail())
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		kills++
	}
	p := start()
	waitSlot(t, db, name, p)

	// The service: one connection, transactions in commit order.
	done := make(chan []outboxTxn, 1)
	rolledBack := make(chan int, 1)
	go func() {
		committed, rb := runOutboxService(t, pg, name, txns, keys)
		rolledBack <- rb
		done <- committed
	}()
	var committed []outboxTxn
	for committed == nil || kills < minKills {
		select {
		case committed = <-done:
		case <-time.After(time.Duration(300+rand.IntN(1500)) * time.Millisecond):
			kill(p)
			p = start()
		}
	}
	rb := <-rolledBack
	t.Logf("%d transactions committed, %d rolled back; %d SIGKILLs over %d runs", len(committed), rb, kills, runs)

	wantMsgs, wantRows := 0, 0
	for _, c := range committed {
		wantMsgs += len(c.messages)
		wantRows += c.updates
	}
	var msgs, rows []*kgo.Record
	deadline := time.Now().Add(3 * time.Minute)
	for {
		msgs = sinktest.ReadCommitted(t, brokers, msgTopic)
		rows = sinktest.ReadCommitted(t, brokers, rowTopic)
		if len(msgs) >= wantMsgs && len(rows) >= wantRows || time.Now().After(deadline) {
			break
		}
		if p.exited() {
			t.Fatalf("the final run exited (status %d):\n%s", p.cmd.ProcessState.ExitCode(), p.tail())
		}
		time.Sleep(2 * time.Second)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	msgs = sinktest.ReadCommitted(t, brokers, msgTopic)
	rows = sinktest.ReadCommitted(t, brokers, rowTopic)
	t.Logf("read_committed: %d messages (want %d), %d row changes (want %d)", len(msgs), wantMsgs, len(rows), wantRows)
	checkOutboxDelivered(t, committed, msgs, rows)
}

// waitSlot waits until the pipeline made its slot and streams.
func waitSlot(t *testing.T, db *pgx.Conn, slot string, p *proc) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var active bool
		err := db.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err == nil && active {
			return
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("the pipeline did not start streaming:\n%s", p.tail())
		}
	}
}

// runOutboxService runs n transactions on its own connection: each updates
// one or two rows of one key and emits one to three outbox messages with
// that key; about 5% roll back after emitting. It returns the committed
// ones in commit order and how many rolled back.
func runOutboxService(t *testing.T, pg, name string, n, keys int) (committed []outboxTxn, rolledBack int) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Error(err)
		return nil, 0
	}
	defer conn.Close(ctx)
	em := outbox.Emitter{Prefix: name}
	for i := range n {
		c := outboxTxn{key: strconv.Itoa(rand.IntN(keys)), updates: 1 + rand.IntN(2)}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for j := range max(c.updates, 3) {
				if j < c.updates {
					if _, err := tx.Exec(ctx, "UPDATE "+name+" SET seq = seq + 1 WHERE id = $1", c.key); err != nil {
						return err
					}
				}
				if j == 0 || rand.IntN(2) == 0 {
					v := fmt.Sprintf(`{"txn":%d,"msg":%d}`, i, j)
					if err := em.Emit(ctx, tx, outbox.Message{Topic: name + ".events", Key: []byte(c.key), Value: []byte(v)}); err != nil {
						return err
					}
					c.messages = append(c.messages, v)
				}
			}
			if rand.IntN(100) < 5 {
				return errRollBack
			}
			return nil
		})
		switch {
		case err == errRollBack:
			rolledBack++
		case err != nil:
			t.Errorf("transaction %d: %v", i, err)
			return committed, rolledBack
		default:
			committed = append(committed, c)
		}
	}
	return committed, rolledBack
}

var errRollBack = fmt.Errorf("roll back")

// checkOutboxDelivered checks what a read_committed reader sees: every
// committed message exactly once, each key's messages in commit order, no
// message of a rolled-back transaction, and each commit's messages and
// row changes together: for every commit LSN its messages, all of them,
// and exactly its row changes.
func checkOutboxDelivered(t *testing.T, committed []outboxTxn, msgs, rows []*kgo.Record) {
	t.Helper()
	type txnSeen struct{ msgs, rows int }
	seen := map[kafkasink.LSN]*txnSeen{}
	at := func(r *kgo.Record) *txnSeen {
		pos := recordPosition(t, r)
		s := seen[pos.LSN]
		if s == nil {
			s = &txnSeen{}
			seen[pos.LSN] = s
		}
		return s
	}
	ids := map[string]int{}
	perKey := map[string][]string{}
	lsnOf := map[string]kafkasink.LSN{} // message value → its commit LSN
	for _, r := range msgs {
		ids[sinktest.Header(r, kafkasink.HeaderID)]++
		perKey[string(r.Key)] = append(perKey[string(r.Key)], string(r.Value))
		lsnOf[string(r.Value)] = recordPosition(t, r).LSN
		at(r).msgs++
	}
	for _, r := range rows {
		ids[sinktest.Header(r, kafkasink.HeaderID)]++
		at(r).rows++
	}
	dups := 0
	for id, n := range ids {
		if n > 1 {
			if dups++; dups <= 5 {
				t.Errorf("event %s seen %d times", id, n)
			}
		}
	}
	wantPerKey := map[string][]string{}
	for _, c := range committed {
		wantPerKey[c.key] = append(wantPerKey[c.key], c.messages...)
	}
	for k, want := range wantPerKey {
		if got := perKey[k]; strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("key %s: %d messages, want %d in commit order; first difference at %d", k, len(got), len(want), firstDiff(got, want))
		}
	}
	for k := range perKey {
		if _, ok := wantPerKey[k]; !ok {
			t.Errorf("messages for key %s, which no committed transaction emitted", k)
		}
	}
	apart := 0
	for i, c := range committed {
		lsn, ok := lsnOf[c.messages[0]]
		s := seen[lsn]
		if !ok || s == nil || s.msgs != len(c.messages) || s.rows != c.updates {
			if apart++; apart <= 5 {
				t.Errorf("committed transaction %d: seen %+v at commit %s, want %d messages and %d row changes together", i, s, lsn, len(c.messages), c.updates)
			}
		}
	}
	if len(seen) != len(committed) {
		t.Errorf("records of %d commits, want %d: a rolled-back transaction's records appeared", len(seen), len(committed))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

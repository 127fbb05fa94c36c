package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// The takeover test's settings: the lease and the Kafka transaction
// timeouts of both replicas, how many kill-and-freeze rounds it plays, and
// the bounds it holds the program to.
const (
	haLeaseTimeout = 3 * time.Second
	haTxnTimeout   = 5 * time.Second
	haRounds       = 3
	// takeoverBound bounds the time from the active replica's SIGKILL or
	// SIGSTOP to the first row inserted after it being visible to a
	// read_committed reader.
	takeoverBound = 30 * time.Second
	// fencedExitBound bounds the time from SIGCONT to the resumed former
	// leader's exit.
	fencedExitBound = 20 * time.Second
)

// TestHighAvailabilityTakeover runs two replicas of the built program with
// the same configuration against the real PostgreSQL and Kafka while a
// steady workload inserts a row every 20ms, and for several rounds (their
// timing drawn from a logged seed, $KAFKASINK_HA_SEED to replay one):
//
//   - SIGKILLs the active replica: the standby must deliver the rows
//     inserted after the kill within takeoverBound; the killed one is
//     started again as the new standby;
//   - SIGSTOPs the active replica for longer than its lease and
//     transaction timeouts, until the standby has taken over and
//     committed rows inserted after the stop, then SIGCONTs it: it must
//     exit with status 3 within fencedExitBound, saying another instance
//     took over, and is started again as the new standby.
//
// At the end every row of the table is in the topic exactly once for a
// read_committed reader, and nothing else is: nothing a killed or frozen
// replica had in flight became visible a second time. The takeover
// times are logged.
func TestHighAvailabilityTakeover(t *testing.T) {
	pg, brokers := replicaTargets(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KAFKASINK_HA_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("KAFKASINK_HA_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (set KAFKASINK_HA_SEED to replay the timing)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := newReplicaFixture(t, ctx, "kafkasink_ha", pg, brokers)
	name, topic, db := f.name, f.topic, f.db
	start := func() *replica { return f.start(t) }

	active := start()
	active.waitLog(t, 60*time.Second, "lease acquired")
	standby := start()
	waitForStandby(t, active, standby)
	waitFor(t, 60*time.Second, "the replication slot", nil, &active.out, func() bool {
		var n int
		db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&n)
		return n == 1
	})

	seen := newSeenRows(t, ctx, brokers, topic)
	admClient, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer admClient.Close()
	adm := kadm.NewClient(admClient)
	work := startInserts(t, ctx, pg, name)

	var kills, freezes []time.Duration
	ongoing := 0 // rounds that froze the active replica in the middle of a transaction
	for round := 1; round <= haRounds; round++ {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		killed := time.Now()
		active.signal(t, syscall.SIGKILL)
		standby.waitLog(t, takeoverBound, "lease acquired")
		took := seen.firstAfter(t, work, killed, takeoverBound)
		kills = append(kills, took)
		t.Logf("round %d: SIGKILL of %s: %s delivered the rows inserted after it %v later", round, active.name, standby.name, took)
		active, standby = standby, start()
		waitForStandby(t, active, standby)

		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		stopped, inFlight := active.stopInFlight(t, ctx, adm, "kafkasink-"+name, 5*time.Second)
		if inFlight == "Ongoing" {
			ongoing++
		}
		standby.waitLog(t, takeoverBound, "lease acquired")
		took = seen.firstAfter(t, work, stopped, takeoverBound)
		freezes = append(freezes, took)
		if rest := time.Until(stopped.Add(max(haLeaseTimeout, haTxnTimeout) + time.Second)); rest > 0 {
			time.Sleep(rest)
		}
		frozenFor := time.Since(stopped)
		active.signal(t, syscall.SIGCONT)
		code, exited := active.wait(fencedExitBound)
		if !exited {
			t.Fatalf("round %d: %s still runs %v after SIGCONT, want it stopped with status 3:\n%s", round, active.name, fencedExitBound, active.out.String())
		}
		if code != 3 || !strings.Contains(active.out.String(), "another instance took over") {
			t.Fatalf("round %d: %s exited with status %d after SIGCONT, want 3 saying another instance took over:\n%s", round, active.name, code, active.out.String())
		}
		t.Logf("round %d: SIGSTOP of %s (its Kafka transaction then: %s) for %v: %s delivered the rows inserted after it %v later; resumed, %s exited 3: %s",
			round, active.name, inFlight, frozenFor.Round(time.Millisecond), standby.name, took, active.name, stopReason(active.out.String()))
		active, standby = standby, start()
		waitForStandby(t, active, standby)
	}

	work.stop(t)
	ids := deliveredOnce(t, ctx, db, brokers, name, topic, seen, active, standby)
	t.Logf("%d rows, each in the topic once; takeover after SIGKILL %v, after SIGSTOP (lease timeout %v) %v; %d of %d replicas were frozen with a transaction open",
		len(ids), kills, haLeaseTimeout, freezes, ongoing, haRounds)
}

// replicaTargets are the real PostgreSQL and Kafka, or a skip.
func replicaTargets(t *testing.T) (pg, brokers string) {
	pg, brokers = os.Getenv("KAFKASINK_TEST_PG"), os.Getenv("KAFKASINK_TEST_BROKERS")
	if pg == "" || brokers == "" {
		t.Skip("KAFKASINK_TEST_PG or KAFKASINK_TEST_BROKERS not set: start scripts/testenv.sh and eval \"$(scripts/testenv.sh env)\"")
	}
	return pg, brokers
}

// replicaFixture is the built program, a table of its own (named after
// the slot) and the arguments of replicas of one configuration that
// stream it: the tests that run replicas as processes share it.
type replicaFixture struct {
	bin, name, topic string
	db               *pgx.Conn
	args             []string
	replicas         []*replica // every one started, for the cleanup
}

func newReplicaFixture(t *testing.T, ctx context.Context, prefix, pg, brokers string) *replicaFixture {
	t.Helper()
	f := &replicaFixture{bin: filepath.Join(t.TempDir(), "kafkasink"), name: fmt.Sprintf("%s_%06d", prefix, rand.IntN(1e6))}
	if out, err := exec.Command("go", "build", "-o", f.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f.topic = f.name + ".public." + f.name
	checkpoints := f.name + ".checkpoints"
	var err error
	if f.db, err = pgx.Connect(ctx, pg); err != nil {
		t.Fatalf("connecting to KAFKASINK_TEST_PG: %v", err)
	}
	t.Cleanup(func() {
		for _, r := range f.replicas {
			r.kill()
			if t.Failed() {
				t.Logf("%s's log:\n%s", r.name, r.out.String())
			}
		}
		if cl, err := kgo.NewClient(kgo.SeedBrokers(brokers)); err == nil {
			kadm.NewClient(cl).DeleteTopics(context.Background(), checkpoints)
			cl.Close()
		}
		dropAll(f.db, f.name, brokers)
	})
	if _, err := f.db.Exec(ctx, "CREATE TABLE "+f.name+" (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	f.args = []string{"-pg", pg, "-brokers", brokers, "-tables", "public." + f.name, "-slot", f.name, "-publication", f.name,
		"-topic-prefix", f.name, "-partitions", "3", "-checkpoint-topic", checkpoints, "-progress", "0", "-log-format", "text",
		"-lease-timeout", haLeaseTimeout.String(), "-transaction-timeout", haTxnTimeout.String()}
	return f
}

// start starts a replica, named replica-N, with the fixture's arguments
// and more.
func (f *replicaFixture) start(t *testing.T, more ...string) *replica {
	r := startReplica(t, f.bin, append(append([]string(nil), f.args...), more...), fmt.Sprintf("replica-%d", len(f.replicas)+1))
	f.replicas = append(f.replicas, r)
	return r
}

// deliveredOnce waits for every row of table to be seen in topic,
// SIGTERMs the replicas still running (each must exit 0), and checks
// that every row is in the topic exactly once for a read_committed
// reader, and nothing else is. It returns the rows' ids.
func deliveredOnce(t *testing.T, ctx context.Context, db *pgx.Conn, brokers, table, topic string, seen *seenRows, running ...*replica) []int64 {
	t.Helper()
	var ids []int64
	rows, err := db.Query(ctx, "SELECT id FROM "+table+" ORDER BY id")
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("all %d rows in %s", len(ids), topic), nil, &running[0].out, func() bool {
		return seen.count() >= len(ids)
	})
	for _, r := range running {
		r.signal(t, syscall.SIGTERM)
		if code, exited := r.wait(30 * time.Second); !exited || code != 0 {
			t.Errorf("%s after SIGTERM: exited %t, status %d; want 0:\n%s", r.name, exited, code, r.out.String())
		}
	}
	counts := map[int64]int{}
	for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic) {
		counts[rowID(t, r)]++
	}
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("row %d is in the topic %d times, want once", id, counts[id])
		}
		delete(counts, id)
	}
	for id, n := range counts {
		t.Errorf("the topic has %d records of row %d, which is not in the table", n, id)
	}
	return ids
}

// replica is one process of the program.
type replica struct {
	name string
	cmd  *exec.Cmd
	out  kafkasinktest.LogBuffer
	done chan struct{} // closed when it exited
	code int           // its exit status, once done; -1 when a signal ended it
}

func startReplica(t *testing.T, bin string, args []string, name string) *replica {
	t.Helper()
	r := &replica{name: name, done: make(chan struct{})}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = []string{"TZ=UTC"} // the flags say everything; nothing of the test's environment leaks in
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.cmd.Wait()
		r.code = r.cmd.ProcessState.ExitCode()
		close(r.done)
	}()
	return r
}

func (r *replica) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-r.done:
		t.Fatalf("%s exited with status %d before it was sent %v:\n%s", r.name, r.code, sig, r.out.String())
	default:
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v: %v", r.name, sig, err)
	}
}

// wait waits up to within for the process to exit and returns its status.
func (r *replica) wait(within time.Duration) (code int, exited bool) {
	select {
	case <-r.done:
		return r.code, true
	case <-time.After(within):
		return 0, false
	}
}

// kill ends the process if it still runs (SIGKILL ends a stopped one too).
func (r *replica) kill() {
	select {
	case <-r.done:
	default:
		r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	}
}

// waitLog waits for the process to log msg.
// waitForStandby waits for a new replica to log that it waits for the
// lease active holds. A standby that takes the lease instead means active
// lost or left it: the failure shows both logs.
func waitForStandby(t *testing.T, active, standby *replica) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(standby.out.String(), `msg="waiting for the lease`) {
		if time.Now().After(deadline) || strings.Contains(standby.out.String(), `msg="lease acquired`) {
			t.Fatalf("%s did not wait for the lease %s holds:\n%s\n%s's log:\n%s", standby.name, active.name, standby.out.String(), active.name, active.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *replica) waitLog(t *testing.T, within time.Duration, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(r.out.String(), "msg=\""+msg) {
		select {
		case <-r.done:
			t.Fatalf("%s exited with status %d while waiting for it to log %q:\n%s", r.name, r.code, msg, r.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v:\n%s", r.name, msg, within, r.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopReason is the error of the process's "stopped" line.
func stopReason(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "another instance took over") {
			if i := strings.Index(line, "error="); i >= 0 {
				return line[i:]
			}
		}
	}
	return "(no reason logged)"
}

// stopInFlight SIGSTOPs the process while its Kafka transaction is open,
// trying for up to within (then it stops it whatever the state): it asks
// the broker for the transaction's state until it is Ongoing, stops the
// process, and asks again, resuming it to try again when the transaction
// ended meanwhile. It returns when it stopped it and the transaction's
// state then.
func (r *replica) stopInFlight(t *testing.T, ctx context.Context, adm *kadm.Client, txnID string, within time.Duration) (time.Time, string) {
	t.Helper()
	state := func() string {
		described, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return err.Error()
		}
		return described[txnID].State
	}
	deadline := time.Now().Add(within)
	for {
		late := time.Now().After(deadline)
		if !late && state() != "Ongoing" {
			continue
		}
		r.signal(t, syscall.SIGSTOP)
		stopped := time.Now()
		if st := state(); st == "Ongoing" || late {
			return stopped, st
		}
		r.signal(t, syscall.SIGCONT)
	}
}

// inserts is the workload: a row a transaction, every 20ms.
type inserts struct {
	mu       sync.Mutex
	begun    []time.Time // begun[i] is when the insert of row i+1 began
	stopping context.CancelFunc
	done     chan error
}

func startInserts(t *testing.T, ctx context.Context, pg, table string) *inserts {
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	ictx, stop := context.WithCancel(ctx)
	w := &inserts{stopping: stop, done: make(chan error, 1)}
	go func() {
		defer conn.Close(context.Background())
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for id := int64(1); ; id++ {
			select {
			case <-ictx.Done():
				w.done <- nil
				return
			case <-tick.C:
			}
			begun := time.Now()
			if _, err := conn.Exec(ictx, "INSERT INTO "+table+" VALUES ($1)", id); err != nil {
				if ictx.Err() != nil {
					// Cancelled mid-insert: committed or not, the
					// table says which.
					w.done <- nil
				} else {
					w.done <- fmt.Errorf("inserting row %d: %w", id, err)
				}
				return
			}
			w.mu.Lock()
			w.begun = append(w.begun, begun)
			w.mu.Unlock()
		}
	}()
	return w
}

// firstBegunAfter is the first row whose insert began after at: no
// replica could have delivered it before at.
func (w *inserts) firstBegunAfter(at time.Time) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, _ := slices.BinarySearchFunc(w.begun, at, func(b, at time.Time) int { return b.Compare(at) })
	return int64(i + 1), i < len(w.begun)
}

// stop ends the workload; the table says what it inserted.
func (w *inserts) stop(t *testing.T) {
	w.stopping()
	if err := <-w.done; err != nil {
		t.Fatal(err)
	}
}

// seenRows reads the topic read_committed as the replicas write it and
// notes when each row was first seen.
type seenRows struct {
	mu    sync.Mutex
	first map[int64]time.Time
}

func newSeenRows(t *testing.T, ctx context.Context, brokers, topic string) *seenRows {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s := &seenRows{first: make(map[int64]time.Time)}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() {
		stop()
		<-done
		cl.Close()
	})
	go func() {
		defer close(done)
		for rctx.Err() == nil {
			fetches := cl.PollFetches(rctx)
			now := time.Now()
			s.mu.Lock()
			fetches.EachRecord(func(r *kgo.Record) {
				if id, err := rowOf(r.Value); err == nil {
					if _, ok := s.first[id]; !ok {
						s.first[id] = now
					}
				}
			})
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *seenRows) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.first)
}

// firstAfter waits up to within for a row whose insert began after at to
// be seen, and returns how long after at the first such row was seen.
func (s *seenRows) firstAfter(t *testing.T, w *inserts, at time.Time, within time.Duration) time.Duration {
	t.Helper()
	deadline := at.Add(within)
	for time.Now().Before(deadline) {
		if id, ok := w.firstBegunAfter(at); ok {
			s.mu.Lock()
			var first time.Time
			for row, seen := range s.first {
				if row >= id && (first.IsZero() || seen.Before(first)) {
					first = seen
				}
			}
			s.mu.Unlock()
			if !first.IsZero() {
				return first.Sub(at).Round(time.Millisecond)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no row inserted after %s was delivered within %v", at.Format(time.RFC3339Nano), within)
	return 0
}

// rowID is the id of the row a record carries.
func rowID(t *testing.T, r *kgo.Record) int64 {
	id, err := rowOf(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// rowOf reads the row id of a record's value, a change event.
func rowOf(value []byte) (int64, error) {
	var v struct {
		After struct{ ID int64 } `json:"after"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.After.ID == 0 {
		return 0, fmt.Errorf("record %s: no row id (%v)", value, err)
	}
	return v.After.ID, nil
}

// TestSignalBeforeStreaming cancels the program's context, as SIGTERM
// does, while it waits for the lease, and while its sink starts: both are
// clean stops, status 0, not errors.
func TestSignalBeforeStreaming(t *testing.T) {
	pg := os.Getenv("KAFKASINK_TEST_PG")
	if pg == "" {
		t.Skip("KAFKASINK_TEST_PG not set: start scripts/testenv.sh and eval \"$(scripts/testenv.sh env)\"")
	}
	slot := fmt.Sprintf("kafkasink_signal_%06d", rand.IntN(1e6))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder, err := pgcdc.AcquireLease(ctx, pgcdc.LeaseConfig{ConnString: pg, Slot: slot})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	// A broker that accepts connections and never answers: New waits
	// for it until its context ends.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for _, tc := range []struct {
		name, waitFor string
		args          []string
	}{
		// The slot's lease is held above.
		{"waiting for the lease", `msg="waiting for the lease`, nil},
		{"starting the sink", "msg=\"-ha=false", []string{"-ha=false", "-brokers", silent.Addr().String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out kafkasinktest.LogBuffer
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			status := make(chan int, 1)
			args := append([]string{"-pg", pg, "-brokers", silent.Addr().String(), "-slot", slot, "-progress", "0", "-log-format", "text"}, tc.args...)
			go func() { status <- run(rctx, args, func(string) string { return "" }, &out) }()
			waitFor(t, 30*time.Second, tc.waitFor, status, &out, func() bool { return strings.Contains(out.String(), tc.waitFor) })
			time.Sleep(200 * time.Millisecond)
			stop()
			select {
			case code := <-status:
				if code != 0 {
					t.Fatalf("status %d after the signal, want 0:\n%s", code, out.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10s after the signal:\n%s", out.String())
			}
		})
	}
}

// TestHAFlags pins -ha (on by default) and -lease-timeout (pgcdc's
// default), their environment variables, and the refusal of a lease
// timeout below a second, which names the flag and exits with status 2
// before connecting anywhere.
func TestHAFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want leaseOptions
	}{
		{nil, nil, leaseOptions{enabled: true, timeout: pgcdc.DefaultLeaseTimeout}},
		{nil, map[string]string{"KAFKASINK_HA": "false", "KAFKASINK_LEASE_TIMEOUT": "3s"}, leaseOptions{enabled: false, timeout: 3 * time.Second}},
		{[]string{"-ha", "-lease-timeout", "20s"}, map[string]string{"KAFKASINK_HA": "false", "KAFKASINK_LEASE_TIMEOUT": "3s"}, leaseOptions{enabled: true, timeout: 20 * time.Second}},
	} {
		var stderr strings.Builder
		o, err := parse(tc.args, func(k string) string { return tc.env[k] }, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if o.lease != tc.want {
			t.Errorf("%q with %v: %+v, want %+v", tc.args, tc.env, o.lease, tc.want)
		}
	}
	var out kafkasinktest.LogBuffer
	code := run(context.Background(), []string{"-pg", "postgres://nobody@127.0.0.1:1/none", "-brokers", "127.0.0.1:1", "-lease-timeout", "100ms", "-log-format", "text"},
		func(string) string { return "" }, &out)
	if code != 2 || !strings.Contains(out.String(), "-lease-timeout") {
		t.Errorf("-lease-timeout 100ms: status %d, want 2 with an error naming the flag:\n%s", code, out.String())
	}
}

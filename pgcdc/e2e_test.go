package pgcdc

// The end-to-end test runs a real program, internal/cmd/e2esink (pgcdc.Run
// into an exactly-once kafkasink sink, built for this test), against
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
// The test restarts the PostgreSQL of KAFKASINK_TEST_PG once (pg_ctl
// restart -m fast, with KAFKASINK_TEST_PG_CTL on KAFKASINK_TEST_PG_DATA,
// which scripts/testenv.sh env sets): other tests connected to it at that
// moment see their connections fail. KAFKASINK_E2E_NO_PG_RESTART=1 skips
// that step.

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

	// Set by scripts/testenv.sh env for the server KAFKASINK_TEST_PG names.
	envPGData = "KAFKASINK_TEST_PG_DATA" // its data directory
	envPGCtl  = "KAFKASINK_TEST_PG_CTL"  // its pg_ctl
)

// e2eKnobs are the end-to-end test's settings beyond the environment's
// targets.
type e2eKnobs struct {
	bigTxn int // rows of the big transaction
	// The data directory and pg_ctl of the server the test restarts;
	// "" when it must not restart it.
	pgData, pgCtl string
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
		if !sinktest.Has(envPGData) || !sinktest.Has(envPGCtl) {
			t.Skipf("%s or %s is not set: the test restarts PostgreSQL with them; eval \"$(scripts/testenv.sh env)\" (env --pg VERSION for another version's server), or set %s=1", envPGData, envPGCtl, envNoPGRestart)
		}
		v := sinktest.Env(t, envPGData, envPGCtl)
		k.pgData, k.pgCtl = v[0], v[1]
	}
	return k
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
//
// After the set-up (the program started, the slot made, the workload
// running), each phase is a subtest, so a failure names the phase; a
// phase builds on the ones before, so the first failure ends the test,
// and a -run pattern that leaves a phase out is refused.
func TestEndToEndSIGKILLExactlyOnce(t *testing.T) {
	pg, brokers := realEnv(t)
	e := startE2E(t, pg, brokers, readE2EKnobs(t))
	phases := []e2ePhase{
		{"KillsAtRandomMoments", e.killAtRandomMoments},
		{"KillWhilePostgresWritesBigTxn", e.killWhilePostgresWritesBigTxn},
		{"KillWhileSinkWritesBigTxn", e.killWhileSinkWritesBigTxn},
		{"WalsenderTerminated", e.terminateWalsender},
	}
	if e.knobs.pgData != "" {
		phases = append(phases, e2ePhase{"PostgresRestarted", e.restartPostgres})
	} else {
		t.Logf("%s is set: PostgreSQL is not restarted", envNoPGRestart)
	}
	phases = append(phases,
		e2ePhase{"KillAfterRestarts", e.killAfterRestarts},
		e2ePhase{"CatchUpAndStop", e.catchUpAndStop},
		e2ePhase{"ReadBack", e.readBack})
	for _, p := range phases {
		ran := false
		ok := t.Run(p.name, func(t *testing.T) {
			ran = true
			p.run(t)
		})
		if !ran {
			t.Fatalf("phase %s did not run (a -run pattern left it out): each phase builds on the ones before; run the whole test", p.name)
		}
		if !ok {
			return
		}
	}
	t.Logf("total %v", time.Since(e.began).Round(time.Millisecond))
}

// e2ePhase is one step of the end-to-end test.
type e2ePhase struct {
	name string
	run  func(t *testing.T)
}

// startE2E builds the program, creates the table, starts the program and
// waits for its slot, then starts the checkpoint watcher, the slot sampler
// and the workload.
func startE2E(t *testing.T, pg string, brokers []string, knobs e2eKnobs) *e2e {
	began := time.Now()
	bin := program(t) // built before any timer starts

	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	e := &e2e{owner: t, pg: pg, brokers: brokers, knobs: knobs, bin: bin, rnd: rnd, began: began,
		name: fmt.Sprintf("pgcdc_e2e_%06d", rnd.IntN(1e6)), m: &model{}}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", sinktest.EnvPG, err)
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
	t.Cleanup(adm.Close)
	e.kadmin = kadm.NewClient(adm)

	e.p = e.start(t)
	// Changes before the slot exists are not in it: wait for the slot and
	// the checkpoint topic the sink creates.
	for deadline := time.Now().Add(90 * time.Second); e.confirmed(t) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || e.p.exited() {
			t.Fatalf("no replication slot after 90s:\n%s", e.p.tail())
		}
	}
	e.slotStart = e.confirmed(t)
	e.watcher = newCkptWatcher(t, brokers, e.ckptTopic(), e.name)
	e.samples = startSampler(t, pg, e.name, e.watcher)
	t.Cleanup(e.samples.stop)

	wdb, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	e.w = &workload{pg: pg, table: e.name, m: e.m, rnd: rand.New(rand.NewPCG(rnd.Uint64(), 1)), db: wdb, seq: &e.seq, done: make(chan struct{})}
	go e.w.run()
	t.Cleanup(func() {
		if !e.w.stopped.Load() {
			e.w.stopped.Store(true)
			<-e.w.done
		}
		e.w.db.Close(context.Background())
	})
	return e
}

// killSample checks the slot right after a kill, when nothing can move
// it: the moment a restart resumes from.
func (e *e2e) killSample(t *testing.T) {
	t.Helper()
	e.samples.add(e.confirmed(t), e.watcher, 2*time.Second)
}

// killAndRestart SIGKILLs the running program, samples the slot and
// starts the next run.
func (e *e2e) killAndRestart(t *testing.T, why string) {
	t.Helper()
	e.kill(t, e.p, why)
	e.kills++
	e.killSample(t)
	e.p = e.start(t)
}

// killAfter sleeps d, then kills and restarts the program.
func (e *e2e) killAfter(t *testing.T, d time.Duration, why string) {
	t.Helper()
	time.Sleep(d)
	e.killAndRestart(t, why)
}

// killAtRandomMoments kills the program at random moments, one early in
// start-up (fencing, reading the checkpoint, slot still held by the old
// walsender).
func (e *e2e) killAtRandomMoments(t *testing.T) {
	e.killAfter(t, time.Duration(100+e.rnd.IntN(400))*time.Millisecond, "during start-up")
	for i := range 4 {
		d := time.Duration(800+e.rnd.IntN(2500)) * time.Millisecond
		e.killAfter(t, d, fmt.Sprintf("at a random moment %d (after %v)", i+1, d))
	}
}

// bigBase is the first id of the big transaction's rows, above the
// workload's.
const bigBase = 1 << 40

// killWhilePostgresWritesBigTxn commits the big transaction: fresh ids
// above the workload's, in ten statements, so the program can be killed
// while PostgreSQL writes (and, beyond logical_decoding_work_mem, streams)
// it.
func (e *e2e) killWhilePostgresWritesBigTxn(t *testing.T) {
	big := e.knobs.bigTxn
	bigStart := e.seq.Add(int64(big)) - int64(big) + 1
	bigErr := make(chan error, 1)
	halfway := make(chan struct{})
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		bdb, err := pgx.Connect(bctx, e.pg)
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
	e.kill(t, e.p, "while PostgreSQL writes the big transaction")
	e.kills++
	select {
	case err := <-bigErr:
		bigErr <- err
		t.Log("(the big transaction had already committed at that kill)")
	default:
	}
	e.killSample(t)
	e.p = e.start(t)
	if err := <-bigErr; err != nil {
		t.Fatalf("big transaction: %v", err)
	}
	for i := range big {
		e.m.add("insert", bigBase+int64(i), bigStart+int64(i))
	}
	t.Logf("big transaction of %d rows committed after %v", big, time.Since(e.began).Round(time.Millisecond))
}

// killWhileSinkWritesBigTxn kills the program while the sink is part way
// through the big transaction: its checkpoint is inside it (no workload
// transaction has 100 events). Then once more at a random moment.
func (e *e2e) killWhileSinkWritesBigTxn(t *testing.T) {
	big := e.knobs.bigTxn
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if ck := e.watcher.current(); ck.Index >= 100 && ck.Index < uint64(big-1) {
			e.killAndRestart(t, fmt.Sprintf("while the sink writes the big transaction (checkpoint %s of %d events)", ck, big))
			break
		}
		if ck := e.watcher.current(); ck.Index == uint64(big-1) || time.Now().After(deadline) || e.p.exited() {
			t.Fatalf("never saw a checkpoint inside the big transaction (latest %s): the kill could not land inside it:\n%s", ck, e.p.tail())
		}
	}
	e.killAfter(t, time.Duration(500+e.rnd.IntN(1500))*time.Millisecond, "at a random moment after the big transaction")
}

// terminateWalsender terminates the walsender under a running program:
// it reconnects.
func (e *e2e) terminateWalsender(t *testing.T) {
	time.Sleep(time.Duration(1000+e.rnd.IntN(1000)) * time.Millisecond)
	var terminated bool
	if err := e.db.QueryRow(context.Background(), `SELECT coalesce(bool_or(pg_terminate_backend(active_pid)), false) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, e.name).Scan(&terminated); err != nil {
		t.Fatal(err)
	}
	if !terminated {
		t.Fatalf("no walsender to terminate: is the program streaming?\n%s", e.p.tail())
	}
	waitOutput(t, e.p, "msg=\"replication started\"", 2, "a new replication connection after the walsender was terminated")
	t.Log("walsender terminated; the program reconnected")
}

// restartPostgres restarts PostgreSQL under a running program. The
// workload pauses so no COMMIT is in flight when the connections break.
func (e *e2e) restartPostgres(t *testing.T) {
	time.Sleep(time.Duration(1000+e.rnd.IntN(1000)) * time.Millisecond)
	e.w.pause.Lock()
	// A failure below must not leave the workload paused: the test's
	// cleanup waits for it to stop.
	paused := true
	resume := func() {
		if paused {
			paused = false
			e.w.pause.Unlock()
		}
	}
	defer resume()
	// Restarting another server than the one streamed from would
	// prove nothing: the two variables must name KAFKASINK_TEST_PG's.
	var dataDir string
	if err := e.w.db.QueryRow(context.Background(), "SHOW data_directory").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	if dataDir != e.knobs.pgData {
		t.Fatalf("%s=%s, but the server of %s keeps its data in %s: eval \"$(scripts/testenv.sh env)\" (env --pg VERSION for another version's server) sets them together", envPGData, e.knobs.pgData, sinktest.EnvPG, dataDir)
	}
	logf, err := os.OpenFile(filepath.Join(t.TempDir(), "pg_ctl.log"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	restartStart := time.Now()
	// -l: the new postmaster must not write to a pipe of ours; the log
	// beside the data directory is where scripts/testenv.sh keeps it.
	cmd := exec.Command("runuser", "-u", "postgres", "--", "setsid", e.knobs.pgCtl,
		"-D", e.knobs.pgData, "-l", filepath.Join(filepath.Dir(e.knobs.pgData), "postgres.log"),
		"restart", "-m", "fast", "-w", "-t", "60")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
	err = cmd.Run()
	logf.Close()
	if err != nil {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("pg_ctl restart: %v\n%s", err, b)
	}
	t.Logf("PostgreSQL restarted in %v", time.Since(restartStart).Round(time.Millisecond))
	e.reconnect(t)
	e.w.db.Close(context.Background())
	if e.w.db, err = pgx.Connect(context.Background(), e.pg); err != nil {
		t.Fatal(err)
	}
	resume()
	waitOutput(t, e.p, "msg=\"replication started\"", 3, "a new replication connection after PostgreSQL restarted")
}

// killAfterRestarts kills the program once more at a random moment, then
// stops the workload.
func (e *e2e) killAfterRestarts(t *testing.T) {
	time.Sleep(time.Duration(1000+e.rnd.IntN(1000)) * time.Millisecond)
	e.killAfter(t, time.Duration(e.rnd.IntN(1000))*time.Millisecond, "at a random moment after the restarts")
	time.Sleep(time.Second)
	e.w.stopped.Store(true)
	<-e.w.done
	if e.w.err != nil {
		t.Fatalf("workload: %v", e.w.err)
	}
}

// catchUpAndStop lets the last run, which is not killed, catch up, and
// stops it with SIGTERM. It has caught up when the slot confirmed the WAL
// written after the workload stopped and the topic stopped growing.
func (e *e2e) catchUpAndStop(t *testing.T) {
	end := e.queryLSN(t, "SELECT pg_current_wal_lsn()::text")
	var last int64 = -1
	stable := 0
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if e.p.exited() {
			t.Fatalf("the program exited while catching up:\n%s", e.p.tail())
		}
		n := endOffsets(t, e.kadmin, e.topic())
		if n == last && e.confirmed(t) >= end {
			stable++
		} else {
			stable = 0
		}
		last = n
		if stable >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up after 10 minutes: slot at %s, want %s:\n%s", e.confirmed(t), end, e.p.tail())
		}
	}
	if code := e.stop(t, e.p); code != 0 {
		t.Fatalf("SIGTERM: exit status %d, want 0:\n%s", code, e.p.tail())
	}
	e.samples.stop()
	t.Logf("%d kills, %d runs, %d workload transactions, %d expected events; caught up %v after start",
		e.kills, e.runs, e.w.txns.Load(), e.m.len(), time.Since(e.began).Round(time.Millisecond))
	if e.kills < 6 {
		t.Fatalf("only %d kills", e.kills)
	}
}

// readBack reads the topic as read_committed and checks it against the
// changes made, the slot samples against it, the checkpoint topic, and
// the topic as kcat and Kafka's console consumer see it.
func (e *e2e) readBack(t *testing.T) {
	readStart := time.Now()
	raw := sinktest.ReadCommitted(t, e.brokers, e.topic())
	recs := decodeRecords(t, raw)
	t.Logf("read_committed reader: %d records in %v", len(recs), time.Since(readStart).Round(time.Millisecond))
	// The big transaction keeps its order: one key per row, but its
	// positions must be exactly 0..big-1 at one commit LSN.
	checkBigTxn(t, recs, bigBase, e.knobs.bigTxn)
	checkChanges(t, recs, e.m.all())
	if all := sinktest.ReadUncommitted(t, e.brokers, e.topic()); len(all) > len(recs) {
		t.Logf("the log holds %d records of transactions the kills left unfinished, invisible to read_committed", len(all)-len(recs))
	}

	e.samples.mu.Lock()
	t.Logf("%d samples of the slot's confirmed position against the committed checkpoint (%d skipped: the checkpoint topic's end was hidden)", len(e.samples.samples), e.samples.skipped)
	checkConfirmed(t, e.samples.samples, recs, e.slotStart)
	e.samples.mu.Unlock()
	e.watcher.mu.Lock()
	if e.watcher.decline != nil {
		t.Errorf("checkpoint topic: %v", e.watcher.decline)
	}
	e.watcher.mu.Unlock()

	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	sinktest.CheckExternalReaders(t, e.brokers, e.topic(), ids)
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

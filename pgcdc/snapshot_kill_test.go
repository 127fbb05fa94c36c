package pgcdc

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	ossignal "os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// A parallel snapshot SIGKILLed: the test binary runs itself as the
// pipeline (TestParallelSnapshotChild), which the test kills at random
// moments while it reads a table with three workers into real Kafka, and
// changes rows between the kills. Each run resumes every range after its
// last delivered key, in a newer state of the table; at the end every row
// was read exactly once and the topic holds each row's current state.

// snapChildEnv names the variable that makes TestParallelSnapshotChild the
// pipeline.
const snapChildEnv = "KAFKASINK_PARSNAP_CHILD"

// TestParallelSnapshotChild is the pipeline the kill test runs; it skips
// unless that test started it.
func TestParallelSnapshotChild(t *testing.T) {
	spec := os.Getenv(snapChildEnv)
	if spec == "" {
		t.Skip("run by TestParallelSnapshotResumesAfterSIGKILL")
	}
	var name, pg, brokers string
	fmt.Sscan(spec, &name, &pg, &brokers)
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: strings.Split(brokers, ","), SinkID: name, Topics: kafkasink.Topics{Prefix: "t", Partitions: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	cfg := Config{
		ConnString: pg, Slot: name, Publication: name, CreateSlot: true,
		Snapshot: true, SnapshotWorkers: 3, SnapshotChunkRows: 300,
		BatchMaxWait: 20 * time.Millisecond, StandbyInterval: time.Second, HeartbeatInterval: -1,
		ReconnectBackoff: 50 * time.Millisecond, ReconnectMax: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if err := Run(ctx, cfg, sink); ctx.Err() == nil {
		t.Fatal(err)
	}
}

var (
	snapComplete = regexp.MustCompile(`msg="snapshot complete"`)
	snapRunning  = regexp.MustCompile(`msg="(snapshot started|resuming snapshot)"`)
)

func TestParallelSnapshotResumesAfterSIGKILL(t *testing.T) {
	const kills, rows = 10, 400000
	if testing.Short() {
		t.Skip("kills a pipeline 10 times: not in -short")
	}
	_, brokers := realEnv(t)
	e := newPGEnv(t)
	table := e.createTable("")
	e.fillTable(table, rows)
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + table)
	seq := int64(1 << 20)
	changed := 0
	resumes := 0
	killed := 0
	// Each run is killed at a random moment after its snapshot began
	// (its start-up, slower under -race and load, is not what is
	// tested), and runs are killed until half of them resumed a
	// snapshot, up to twice the kills.
	for i := 0; ; i++ {
		last := killed >= kills && resumes >= kills/2 || killed >= 2*kills
		cmd := exec.Command(os.Args[0], "-test.run=^TestParallelSnapshotChild$", "-test.count=1")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
			snapChildEnv + "=" + strings.Join([]string{e.name, e.conn, strings.Join(brokers, ",")}, " ")}
		out := &sinktest.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		if last {
			// The last run finishes.
			select {
			case <-waitMatch(out, snapComplete, done):
			case <-done:
				t.Fatalf("the last run exited:\n%s", out.String())
			case <-time.After(3 * time.Minute):
				t.Fatalf("the last run did not finish the snapshot:\n%s", out.String())
			}
			time.Sleep(500 * time.Millisecond) // the changes after it
			cmd.Process.Signal(syscall.SIGTERM)
			<-done
			break
		}
		select {
		case <-waitMatch(out, snapRunning, done):
		case <-done:
			t.Fatalf("run %d exited before its snapshot began:\n%s", i, out.String())
		case <-time.After(2 * time.Minute):
			t.Fatalf("run %d did not begin its snapshot:\n%s", i, out.String())
		}
		time.Sleep(time.Duration(50+rand.IntN(350)) * time.Millisecond)
		if snapComplete.MatchString(out.String()) {
			t.Fatalf("the snapshot ended after %d kills: make the table larger", killed)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		killed++
		if strings.Contains(out.String(), "resuming snapshot") {
			resumes++
		}
		// Rows change while nothing runs: read in their new state
		// by the resumed ranges, or streamed after having been read.
		for range 5 {
			seq++
			e.exec(fmt.Sprintf("UPDATE %s SET seq = %d WHERE id = %d", table, seq, 1+rand.IntN(rows)))
			changed++
		}
	}
	checkKilledSnapshot(t, e, brokers, table, rows)
	t.Logf("%d SIGKILLs, %d runs resumed the snapshot, %d rows changed between them", killed, resumes, changed)
	if resumes < kills/2 {
		t.Errorf("only %d of %d runs resumed a snapshot: the kills came too early to test resuming", resumes, killed)
	}
}

// checkKilledSnapshot reads the topic read_committed: every event once,
// every row read exactly once, and each row's last record its current
// state.
func checkKilledSnapshot(t *testing.T, e *pgEnv, brokers []string, table string, rows int) {
	t.Helper()
	recs := decodeRecords(t, sinktest.ReadCommitted(t, brokers, "t.public."+table))
	ids := map[string]bool{}
	readsOf := map[int64]int{}
	last := map[int64]record{}
	for _, r := range recs {
		if ids[r.ID] {
			t.Fatalf("event %s delivered twice", r.ID)
		}
		ids[r.ID] = true
		c := r.change()
		if r.Op == "read" {
			readsOf[c.id]++
		}
		if l, ok := last[c.id]; !ok || l.Position.Compare(r.Position) < 0 {
			last[c.id] = r
		}
	}
	seqs := map[int64]int64{}
	e.mu.Lock()
	rs, err := e.db.Query(context.Background(), "SELECT id, seq FROM "+table)
	if err != nil {
		e.mu.Unlock()
		t.Fatal(err)
	}
	for rs.Next() {
		var id, seq int64
		rs.Scan(&id, &seq)
		seqs[id] = seq
	}
	rs.Close()
	e.mu.Unlock()
	bad := 0
	for id := int64(1); id <= int64(rows); id++ {
		if readsOf[id] != 1 || last[id].change().seq != seqs[id] {
			if bad++; bad <= 10 {
				t.Errorf("row %d: read %d times, last record seq %d, table seq %d", id, readsOf[id], last[id].change().seq, seqs[id])
			}
		}
	}
	if len(readsOf) != rows {
		t.Errorf("%d rows read, want %d", len(readsOf), rows)
	}
	t.Logf("%d records read_committed: %d rows read once each", len(recs), rows-bad)
}

// waitMatch returns a channel closed once out matches re; it stops
// looking when stop is closed.
func waitMatch(out *sinktest.SyncBuffer, re *regexp.Regexp, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for !re.MatchString(out.String()) {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		close(ch)
	}()
	return ch
}

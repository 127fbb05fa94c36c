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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The backfill SIGKILLed: the test binary runs itself as the pipeline
// (TestBackfillChild), which the test kills at random moments while a
// backfill, asked for by a signal, runs and a writer changes the table.
// Each run resumes the backfill at the last chunk the checkpoint holds;
// at the end the load test's checks hold.

// childEnv names the variables that make TestBackfillChild the pipeline.
const childEnv = "KAFKASINK_BACKFILL_CHILD"

// TestBackfillChild is the pipeline the kill test runs; it skips unless
// that test started it. It prints each backfill it has ("backfill id=...
// rows=..."), then "backfills=0" once it has none, every 20ms.
func TestBackfillChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("run by TestBackfillResumesAfterSIGKILL")
	}
	var name, pg, role, brokers string
	fmt.Sscan(spec, &name, &pg, &role, &brokers)
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: strings.Split(brokers, ","), SinkID: name, Topics: kafkasink.Topics{Prefix: "t", Partitions: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	ctrl, mon := &Backfills{}, &Monitor{}
	cfg := Config{
		ConnString: pg, Slot: name, Publication: name, CreateSlot: true,
		BatchMaxWait: 20 * time.Millisecond, StandbyInterval: time.Second, HeartbeatInterval: -1,
		ReconnectBackoff: 50 * time.Millisecond, ReconnectMax: time.Second,
		BackfillChunkRows: 50, SignalPrefix: "kafkasink.signal", Backfills: ctrl, Monitor: mon,
		Logger: slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo})),
		ConfigureConn: func(_ context.Context, c *pgconn.Config) error {
			c.User, c.Password = role, "ro"
			return nil
		},
	}
	go func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			if mon.Stats().State != RunStreaming {
				continue
			}
			list := ctrl.List()
			for _, b := range list {
				fmt.Printf("backfill id=%s rows=%d\n", b.ID, b.Rows)
			}
			if len(list) == 0 {
				fmt.Println("backfills=0")
			}
		}
	}()
	if err := Run(ctx, cfg, sink); ctx.Err() == nil {
		t.Fatal(err)
	}
}

// child is one run of TestBackfillChild.
type child struct {
	cmd  *exec.Cmd
	out  *sinktest.SyncBuffer
	done chan struct{}
}

func (l *bfLoad) startChild(t *testing.T) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBackfillChild$", "-test.count=1")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		childEnv + "=" + strings.Join([]string{l.e.name, l.e.conn, l.role, strings.Join(l.e.brokers, ",")}, " ")}
	c := &child{cmd: cmd, out: &sinktest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	return c
}

// wait waits until the child's output matches re, and returns the first
// match.
func (c *child) wait(t *testing.T, re *regexp.Regexp, what string) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m := re.FindStringSubmatch(c.out.String()); m != nil {
			return m
		}
		select {
		case <-c.done:
			t.Fatalf("the pipeline exited waiting for %s:\n%s", what, c.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s:\n%s", what, c.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
		t.Fatalf("the pipeline exited before its kill:\n%s", c.out.String())
	default:
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

var (
	childResumed  = regexp.MustCompile(`msg="backfill resumed from the checkpoint" .*backfill=(\w+) .*rows=(\d+)`)
	childAccepted = regexp.MustCompile(`msg="backfill accepted" .*backfill=(\w+)`)
	childComplete = regexp.MustCompile(`msg="backfill complete" .*backfill=(\w+)`)
	childTookUp   = regexp.MustCompile(`msg="backfill (accepted|resumed from the checkpoint)"`)
)

// lastMatch returns the last match of re in s, nil when none.
func lastMatch(re *regexp.Regexp, s string) []string {
	all := re.FindAllStringSubmatch(s, -1)
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

func TestBackfillResumesAfterSIGKILL(t *testing.T) {
	const kills = 20
	l := newBFLoad(t, 30000, "")
	stopW := make(chan struct{})
	waitW := l.writer(t, stopW)
	defer func() {
		select {
		case <-stopW:
		default:
			close(stopW)
			waitW()
		}
	}()
	streaming := regexp.MustCompile(`backfills=0|backfill id=`)
	var (
		resumedID string
		resumed   []int64
		retaken   int
		killed    int
		c         *child
	)
	// Under load the first runs may all die before the Write that
	// records the backfill; kill on until most of the kills fell on a
	// recorded backfill, at most twice as often.
	for ; killed < kills || (len(resumed) < kills/2 && killed < 2*kills); killed++ {
		c = l.startChild(t)
		c.wait(t, streaming, "streaming")
		if killed == 0 {
			l.e.exec("SELECT pg_logical_emit_message(true, 'kafkasink.signal', $1)",
				fmt.Sprintf(`{"type":"execute-snapshot","data":{"data-collections":["%s"]}}`, l.table))
		}
		// The kill falls at a random moment after the run took the
		// backfill up (its start-up is not what is tested): on an
		// idle machine kills soon after streaming all came before it.
		c.wait(t, childTookUp, "the backfill taken up")
		if m := childResumed.FindStringSubmatch(c.out.String()); m != nil {
			rows, _ := strconv.ParseInt(m[2], 10, 64)
			if resumedID != "" && m[1] != resumedID {
				t.Fatalf("run %d resumed backfill %s, earlier runs %s", killed, m[1], resumedID)
			}
			resumedID = m[1]
			resumed = append(resumed, rows)
		} else if resumedID != "" {
			t.Fatalf("run %d resumed no backfill, earlier runs resumed %s", killed, resumedID)
		}
		time.Sleep(time.Duration(20+rand.IntN(200)) * time.Millisecond)
		if childComplete.MatchString(c.out.String()) {
			t.Fatalf("the backfill ended after %d kills: make it longer", killed)
		}
		c.kill(t)
		if killed > 0 && resumedID == "" && childAccepted.MatchString(c.out.String()) {
			// Killed before the Write that recorded the backfill:
			// the server sends the signal again, and it is taken
			// again.
			retaken++
		}
	}
	// The last run finishes the backfill.
	c = l.startChild(t)
	done := c.wait(t, childComplete, "the backfill's end")
	id := done[1]
	close(stopW)
	waitW()
	marker := l.nextID.Add(1)
	l.e.exec("INSERT INTO "+l.table+" VALUES ($1, $2, 'marker', NULL)", marker, l.seq.Add(1))
	deadline := time.Now().Add(time.Minute)
	for !slices.ContainsFunc(l.read(t), func(r bfRecord) bool { return r.id == marker }) {
		if time.Now().After(deadline) {
			t.Fatalf("the marker row is not in Kafka:\n%s", c.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ch := l.check(t, id)
	if ch.reads != ch.backfilled {
		t.Errorf("%d read records, %d of them of backfill %s: a backfill not recorded delivered rows", ch.reads, ch.backfilled, id)
	}
	if id != resumedID || !slices.IsSorted(resumed) || len(resumed) < kills/2 {
		t.Errorf("backfill %s ended; runs resumed %s at rows %v: want the same backfill, resumed by most runs, at growing rows", id, resumedID, resumed)
	}
	t.Logf("%d SIGKILLs (%d before the backfill was recorded); resumed at rows %v; %d records, %d rows of backfill %s, %d rows in the table, %d changes held ahead by a chunk, %d writer transactions",
		killed, retaken, resumed, ch.records, ch.backfilled, id, ch.rows, ch.heldAhead, l.txns.Load())
}

package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// TestFailoverSlotKill fails over, five times at random moments, from a
// primary whose slot is a failover slot to a standby that keeps a
// synchronised copy of it (sync_replication_slots, and the primary's
// synchronized_standby_slots naming the standby): under load, the
// primary is SIGKILLed and the standby promoted. The Run, given a
// connection string naming both servers (target_session_attrs =
// read-write), reconnects to the promoted standby and resumes from the
// synchronised slot; a read_committed reader must find each row of the
// new primary's table exactly once. Each round is a pair of its own.
func TestFailoverSlotKill(t *testing.T) {
	requirePG(t, pgFailoverSlots)
	t.Parallel()
	for round := 1; round <= 5; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) { failoverRound(t) })
	}
}

func failoverRound(t *testing.T) {
	pr := newPairRun(t, pgtest.PairOptions{FailoverSlots: true})
	cfg := pr.config(pr.pair.MultiHostConnString("kafkasink"))
	cfg.FailoverStandby = pr.pair.Standby.ConnString("kafkasink")
	_, r := start(t, cfg, pr.sink)
	pr.waitStreaming(r)
	if !pr.mon.Stats().FailoverSlot {
		t.Fatalf("Monitor: FailoverSlot false on a PostgreSQL %d primary, want true", pr.pair.Major)
	}
	waitFor(t, time.Minute, "the slot synchronised to the standby (Monitor's StandbySync)", r, func() bool {
		pr.pair.Primary.Exec("SELECT pg_log_standby_snapshot()")
		time.Sleep(200 * time.Millisecond)
		return pr.mon.Stats().StandbySync.Synced
	})
	stopW := make(chan struct{})
	waitW := pr.writer(stopW)
	moment := time.Duration(200+rand.IntN(2000)) * time.Millisecond
	time.Sleep(moment)
	// The standby's copy as the primary dies: read before the kill, as
	// an operator's check that a failover now is safe would read it
	// (the copy a synchronisation cycle is replacing can be missing
	// for a moment).
	pr.pair.Standby.WaitSynced(pr.name)
	synced := pr.pair.Standby.Query("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1 AND synced", pr.name)
	atKill := pr.sink.Checkpoint().Position
	pr.pair.Primary.Kill()
	pr.pair.Standby.Promote()
	pr.setTarget(pr.pair.Standby)
	time.Sleep(time.Duration(300+rand.IntN(1000)) * time.Millisecond)
	close(stopW)
	waitW()

	want := pr.settle(r, pr.pair.Standby)
	records, lost, dup := pr.check(want, 0)
	st := pr.mon.Stats()
	t.Logf("PostgreSQL %d: primary SIGKILLed %v into the load (checkpoint %s, the standby's synchronised slot at %s); %d rows on the new primary (writer: %d commits acknowledged, %d failed), %d records read_committed, %d lost, %d duplicated; Run reconnected %d times",
		pr.pair.Major, moment, atKill, synced, len(want), pr.acked, pr.failed, records, lost, dup, st.Reconnects)
	if st.Reconnects == 0 {
		t.Errorf("Run did not reconnect after the primary was killed")
	}
}

// TestFailoverPreflight checks the pre-flight and the Monitor where a
// failover would not be safe: a primary without
// synchronized_standby_slots and a standby without
// sync_replication_slots are each named in a warning, and the Monitor
// says the standby holds no copy of the slot. It also checks
// NoFailoverSlot, which leaves the slot as it is, and that a Run without
// it makes an existing slot a failover slot.
func TestFailoverPreflight(t *testing.T) {
	requirePG(t, pgFailoverSlots)
	t.Parallel()
	pr := newPairRun(t, pgtest.PairOptions{})
	isFailover := func() string {
		return pr.pair.Primary.Query("SELECT failover::text FROM pg_replication_slots WHERE slot_name = $1", pr.name)
	}

	cfg := pr.config(pr.pair.Primary.ConnString("kafkasink"))
	cfg.NoFailoverSlot = true
	stop, r := start(t, cfg, pr.sink)
	pr.waitStreaming(r)
	if got := isFailover(); got != "false" || pr.mon.Stats().FailoverSlot {
		t.Errorf("with NoFailoverSlot: the slot's failover = %s, Monitor's FailoverSlot %v; want false, false", got, pr.mon.Stats().FailoverSlot)
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	logs := newLogRecorder(t)
	cfg = pr.config(pr.pair.MultiHostConnString("kafkasink"))
	cfg.FailoverStandby = pr.pair.Standby.ConnString("kafkasink")
	cfg.Logger = slog.New(logs)
	_, r = start(t, cfg, pr.sink)
	pr.waitStreaming(r)
	if got := isFailover(); got != "true" || !pr.mon.Stats().FailoverSlot {
		t.Errorf("by default: the slot's failover = %s, Monitor's FailoverSlot %v; want true, true", got, pr.mon.Stats().FailoverSlot)
	}
	waitFor(t, 30*time.Second, "the Monitor's first reading of the standby", r, func() bool { return !pr.mon.Stats().StandbySync.Checked.IsZero() })
	if st := pr.mon.Stats().StandbySync; st.Synced || !strings.Contains(st.Problem, "no copy of the slot") {
		t.Errorf("StandbySync %+v, want not synced, saying the standby has no copy of the slot", st)
	}
	for _, want := range []string{"the primary's synchronized_standby_slots is empty", "Config.FailoverStandby: sync_replication_slots is off", "Config.FailoverStandby: its physical slot \"standby1\" is not in the primary's synchronized_standby_slots"} {
		if len(logs.find(want)) != 1 {
			t.Errorf("no warning %q; warnings: %v", want, logs.warnings())
		}
	}
}

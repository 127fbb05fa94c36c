package pgcdc

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// TestStandbyDecodingPromote runs the pipeline on a hot standby while a
// writer loads the primary: the slot is created on the standby, and the
// initial snapshot reads the snapshot it exports there (rows written
// before the Run). At a random moment the primary is killed (SIGKILL) and
// the standby promoted (pg_ctl promote); the writer goes on against it,
// and the same Run, never restarted, goes on too. A read_committed reader
// must find each row of the promoted standby's table exactly once.
func TestStandbyDecodingPromote(t *testing.T) {
	requirePG(t, pgStandbyDecoding)
	t.Parallel()
	pr := newPairRun(t, pgtest.PairOptions{})
	// Rows before the Run: the initial snapshot's, read on the standby.
	pr.pair.Primary.Exec("INSERT INTO " + pr.name + " SELECT g, g * 10, 'before' FROM generate_series(1, 200) g")
	pr.nextID = 201
	pr.pair.WaitReplayed()
	cfg := pr.config(pr.pair.Standby.ConnString("kafkasink"))
	cfg.Snapshot = true
	_, r := start(t, cfg, pr.sink)
	pr.waitStreaming(r)
	stopW := make(chan struct{})
	waitW := pr.writer(stopW)

	moment := time.Duration(300+rand.IntN(1500)) * time.Millisecond
	time.Sleep(moment)
	pr.pair.Primary.Kill()
	pr.pair.Standby.Promote()
	pr.setTarget(pr.pair.Standby)
	time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
	close(stopW)
	waitW()

	want := pr.settle(r, pr.pair.Standby)
	records, lost, dup := pr.check(want, 201)
	st := pr.mon.Stats()
	t.Logf("PostgreSQL %d: primary killed and standby promoted %v after streaming began; %d rows on the promoted standby (writer: %d commits acknowledged, %d failed), %d records read_committed, %d lost, %d duplicated; Run reconnected %d times, last error: %s",
		pr.pair.Major, moment, len(want), pr.acked, pr.failed, records, lost, dup, st.Reconnects, st.LastError)
	if st.SnapshotRows != 200 {
		t.Errorf("the snapshot on the standby read %d rows, want 200", st.SnapshotRows)
	}
}

// TestStandbyRefused checks what Run refuses on a standby: before
// PostgreSQL 16, decoding there at all; from 16 on, a standby with
// hot_standby_feedback off. Each is a *kafkasink.ConfigError naming the
// way out, before a slot exists.
func TestStandbyRefused(t *testing.T) {
	t.Parallel()
	pr := newPairRun(t, pgtest.PairOptions{})
	want := "hot_standby_feedback = off"
	if pr.pair.Major < 16 {
		want = "PostgreSQL 16 can"
	} else {
		pr.pair.Standby.Exec("ALTER SYSTEM SET hot_standby_feedback = off")
		pr.pair.Standby.Exec("SELECT pg_reload_conf()")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, pr.config(pr.pair.Standby.ConnString("kafkasink")), pr.sink)
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run on a standby of PostgreSQL %d: %v, want a *kafkasink.ConfigError saying %q", pr.pair.Major, err, want)
	}
	if n := pr.pair.Standby.Query("SELECT count(*) FROM pg_replication_slots"); n != "0" {
		t.Errorf("%s slots on the standby after the refusal, want none", n)
	}
	t.Logf("PostgreSQL %d: %v", pr.pair.Major, err)
}

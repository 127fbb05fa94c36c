package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// TestPair checks the fixture against the test environment's PostgreSQL
// version: a change on the primary reaches the standby; with replication
// paused it does not until resumed; a killed primary starts again; the
// promoted standby takes writes; the multi-host URL finds it.
func TestPair(t *testing.T) {
	t.Parallel()
	p := pgtest.StartPair(t, pgtest.PairOptions{})
	p.Primary.Exec("CREATE TABLE pair (id int PRIMARY KEY); INSERT INTO pair VALUES (1)")
	p.WaitReplayed()
	if got := p.Standby.Query("SELECT count(*)::text FROM pair"); got != "1" {
		t.Fatalf("standby has %s rows, want 1", got)
	}
	if got := p.Standby.Query("SELECT pg_is_in_recovery()::text"); got != "true" {
		t.Fatalf("standby in recovery: %s", got)
	}
	if got := p.Standby.Query("SELECT current_setting('hot_standby_feedback')"); got != "on" {
		t.Fatalf("standby hot_standby_feedback = %s, want on", got)
	}

	p.PauseReplication()
	p.Primary.Exec("INSERT INTO pair VALUES (2)")
	if got := p.Standby.Query("SELECT count(*)::text FROM pair"); got != "1" {
		t.Fatalf("replication paused, standby has %s rows, want 1", got)
	}
	p.ResumeReplication()
	p.WaitReplayed()
	if got := p.Standby.Query("SELECT count(*)::text FROM pair"); got != "2" {
		t.Fatalf("replication resumed, standby has %s rows, want 2", got)
	}

	p.Primary.Kill()
	p.Primary.Start()
	p.WaitStreaming()
	p.Primary.Exec("INSERT INTO pair VALUES (3)")
	p.WaitReplayed()

	p.Primary.Kill()
	p.Standby.Promote()
	p.Standby.Exec("INSERT INTO pair VALUES (4)")
	if got := p.Standby.Query("SELECT count(*)::text FROM pair"); got != "4" {
		t.Fatalf("promoted standby has %s rows, want 4", got)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, p.MultiHostConnString("kafkasink"))
	if err != nil {
		t.Fatalf("multi-host URL after the failover: %v", err)
	}
	defer c.Close(ctx)
	var port int
	if err := c.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil || port != p.Standby.Port {
		t.Fatalf("multi-host URL connected to port %d (%v), want the promoted standby's %d", port, err, p.Standby.Port)
	}
}

// TestPairFailoverSlots checks the 17+ options: the standby synchronises
// a failover slot of the primary, and commits wait for the synchronous
// standby.
func TestPairFailoverSlots(t *testing.T) {
	t.Parallel()
	p := pgtest.StartPair(t, pgtest.PairOptions{FailoverSlots: true, Synchronous: true})
	if got := p.Standby.Query("SELECT current_setting('sync_replication_slots')"); got != "on" {
		t.Fatalf("standby sync_replication_slots = %s, want on", got)
	}
	if got := p.Primary.Query("SELECT current_setting('synchronized_standby_slots')"); got != pgtest.StandbySlot {
		t.Fatalf("primary synchronized_standby_slots = %q, want %s", got, pgtest.StandbySlot)
	}
	if got := p.Primary.Query("SELECT sync_state FROM pg_stat_replication"); got != "sync" {
		t.Fatalf("standby's sync_state = %q, want sync", got)
	}
	p.Primary.Exec("SELECT pg_create_logical_replication_slot('pairsync', 'pgoutput', false, false, true)")
	p.Standby.WaitSynced("pairsync")
}

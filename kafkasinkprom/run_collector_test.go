package kafkasinkprom_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkprom"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// The Run collector of a Monitor no Run used yet passes the Prometheus
// client's lint and says "not started".
func TestRunCollectorNotStarted(t *testing.T) {
	c := kafkasinkprom.NewRunCollector(&pgcdc.Monitor{}, "shop")
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	want := `
# HELP kafkasink_pgcdc_state 1 for the state Run is in (not started, connecting, snapshotting, streaming, waiting to reconnect, stopped), 0 for the others.
# TYPE kafkasink_pgcdc_state gauge
kafkasink_pgcdc_state{slot="shop",state="connecting"} 0
kafkasink_pgcdc_state{slot="shop",state="not started"} 1
kafkasink_pgcdc_state{slot="shop",state="snapshotting"} 0
kafkasink_pgcdc_state{slot="shop",state="stopped"} 0
kafkasink_pgcdc_state{slot="shop",state="streaming"} 0
kafkasink_pgcdc_state{slot="shop",state="waiting to reconnect"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "kafkasink_pgcdc_state"); err != nil {
		t.Fatal(err)
	}
}

// The Run collector follows a real Run: PostgreSQL (KAFKASINK_TEST_PG,
// from scripts/testenv.sh) into a fake Kafka cluster, a snapshot of 3 rows
// and one streamed insert, then a backfill paused after its first chunk
// of 2 rows, whose Write is held meanwhile.
func TestRunCollectorFollowsRun(t *testing.T) {
	pg := os.Getenv("KAFKASINK_TEST_PG")
	if pg == "" {
		t.Skip("KAFKASINK_TEST_PG not set: this test needs the real PostgreSQL; run scripts/testenv.sh up and eval \"$(scripts/testenv.sh env)\" (see the README)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	name := fmt.Sprintf("kafkasinkprom_%d", rand.Uint32())
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE " + name + " (id int PRIMARY KEY)")
	defer func() {
		bg := context.Background()
		// The walsender may take a moment to let the slot go.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			var left int
			db.QueryRow(bg, "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", name).Scan(&left)
			if err := db.QueryRow(bg, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&left); err != nil || left == 0 {
				break
			}
		}
		db.Exec(bg, "DROP PUBLICATION IF EXISTS "+name)
		db.Exec(bg, "DROP TABLE IF EXISTS "+name)
	}()
	exec("INSERT INTO " + name + " SELECT generate_series(1, 3)")

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: cluster.ListenAddrs(), SinkID: name})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())

	mon, bf := &pgcdc.Monitor{}, &pgcdc.Backfills{}
	held := &heldSink{Sink: sink, release: make(chan struct{})}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- pgcdc.Run(runCtx, pgcdc.Config{ConnString: pg, Slot: name, Publication: name, Tables: []string{"public." + name},
			CreateSlot: true, CreatePublication: true, Snapshot: true, SnapshotWorkers: 2, Monitor: mon, StandbyInterval: 200 * time.Millisecond,
			Backfills: bf, BackfillChunkRows: 2}, held)
	}()
	waitFor := func(what string, cond func(pgcdc.RunStats) bool) {
		t.Helper()
		for !cond(mon.Stats()) {
			select {
			case err := <-done:
				t.Fatalf("Run returned while waiting for %s: %v", what, err)
			case <-ctx.Done():
				t.Fatalf("%s: not within the test's minute: %+v", what, mon.Stats())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitFor("streaming", func(st pgcdc.RunStats) bool { return st.State == pgcdc.RunStreaming })
	exec("INSERT INTO " + name + " VALUES (4)")
	waitFor("the insert written", func(st pgcdc.RunStats) bool { return st.Events == 4 })

	c := kafkasinkprom.NewRunCollector(mon, name)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := fmt.Sprintf(`
# HELP kafkasink_pgcdc_events_total Events written.
# TYPE kafkasink_pgcdc_events_total counter
kafkasink_pgcdc_events_total{slot=%[1]q} 4
# HELP kafkasink_pgcdc_snapshot_rows_total Snapshot rows written.
# TYPE kafkasink_pgcdc_snapshot_rows_total counter
kafkasink_pgcdc_snapshot_rows_total{slot=%[1]q} 3
# HELP kafkasink_pgcdc_snapshot_table_done 1 when the snapshot read the table to its end, else 0.
# TYPE kafkasink_pgcdc_snapshot_table_done gauge
kafkasink_pgcdc_snapshot_table_done{slot=%[1]q,table="public.%[1]s"} 1
# HELP kafkasink_pgcdc_snapshot_table_rows_total Snapshot rows written by this Run, by table.
# TYPE kafkasink_pgcdc_snapshot_table_rows_total counter
kafkasink_pgcdc_snapshot_table_rows_total{slot=%[1]q,table="public.%[1]s"} 3
# HELP kafkasink_pgcdc_snapshot_table_rows_left Estimate of the rows the snapshot has still to read of the table (from pg_class.reltuples); -1 when unknown.
# TYPE kafkasink_pgcdc_snapshot_table_rows_left gauge
kafkasink_pgcdc_snapshot_table_rows_left{slot=%[1]q,table="public.%[1]s"} 0
# HELP kafkasink_pgcdc_snapshot_table_seconds_left Estimate of the time the snapshot needs for the rest of the table, at its rate so far; 0 when unknown or done.
# TYPE kafkasink_pgcdc_snapshot_table_seconds_left gauge
kafkasink_pgcdc_snapshot_table_seconds_left{slot=%[1]q,table="public.%[1]s"} 0
# HELP kafkasink_pgcdc_snapshot_range_rows_total Snapshot rows written by this Run from one key range of the table.
# TYPE kafkasink_pgcdc_snapshot_range_rows_total counter
kafkasink_pgcdc_snapshot_range_rows_total{range="0",slot=%[1]q,table="public.%[1]s"} 3
# HELP kafkasink_pgcdc_snapshot_range_done 1 when the snapshot read the key range to its end, else 0.
# TYPE kafkasink_pgcdc_snapshot_range_done gauge
kafkasink_pgcdc_snapshot_range_done{range="0",slot=%[1]q,table="public.%[1]s"} 1
`, name)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafkasink_pgcdc_events_total", "kafkasink_pgcdc_snapshot_rows_total",
		"kafkasink_pgcdc_snapshot_table_done", "kafkasink_pgcdc_snapshot_table_rows_total", "kafkasink_pgcdc_snapshot_table_rows_left",
		"kafkasink_pgcdc_snapshot_table_seconds_left", "kafkasink_pgcdc_snapshot_range_rows_total", "kafkasink_pgcdc_snapshot_range_done"); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := make(map[string]float64)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if g := m.GetGauge(); g != nil && len(m.GetLabel()) == 1 {
				values[f.GetName()] = g.GetValue()
			}
		}
	}
	if values["kafkasink_pgcdc_last_commit_timestamp_seconds"] < float64(time.Now().Add(-time.Minute).Unix()) || values["kafkasink_pgcdc_server_wal_end_lsn"] == 0 {
		t.Errorf("gauges %v: want the insert's commit time and the server's WAL end", values)
	}

	exec("ANALYZE " + name) // the estimate of the rows left: 4 less those read
	held.hold.Store(true)
	st, err := bf.Request(ctx, pgcdc.BackfillRequest{Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := bf.Pause(ctx, st.ID); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf(`
# HELP kafkasink_pgcdc_backfill_chunks_total Chunks an unfinished backfill read, across restarts.
# TYPE kafkasink_pgcdc_backfill_chunks_total counter
kafkasink_pgcdc_backfill_chunks_total{backfill=%[2]q,slot=%[1]q,table="public.%[1]s"} 1
# HELP kafkasink_pgcdc_backfill_last_key_info 1, with the key of the last row the backfill read as a JSON array of its columns' text (last_key; empty before the first chunk).
# TYPE kafkasink_pgcdc_backfill_last_key_info gauge
kafkasink_pgcdc_backfill_last_key_info{backfill=%[2]q,last_key="[\"2\"]",slot=%[1]q,table="public.%[1]s"} 1
# HELP kafkasink_pgcdc_backfill_paused 1 when the unfinished backfill is paused, else 0.
# TYPE kafkasink_pgcdc_backfill_paused gauge
kafkasink_pgcdc_backfill_paused{backfill=%[2]q,slot=%[1]q,table="public.%[1]s"} 1
# HELP kafkasink_pgcdc_backfill_rows_left Estimate of the rows an unfinished backfill has still to read (from pg_class.reltuples); -1 when unknown.
# TYPE kafkasink_pgcdc_backfill_rows_left gauge
kafkasink_pgcdc_backfill_rows_left{backfill=%[2]q,slot=%[1]q,table="public.%[1]s"} 2
# HELP kafkasink_pgcdc_backfill_rows_total Rows an unfinished backfill delivered, across restarts.
# TYPE kafkasink_pgcdc_backfill_rows_total counter
kafkasink_pgcdc_backfill_rows_total{backfill=%[2]q,slot=%[1]q,table="public.%[1]s"} 2
`, name, st.ID)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafkasink_pgcdc_backfill_chunks_total", "kafkasink_pgcdc_backfill_last_key_info",
		"kafkasink_pgcdc_backfill_paused", "kafkasink_pgcdc_backfill_rows_left", "kafkasink_pgcdc_backfill_rows_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint with a backfill: %v %v", problems, err)
	}
	if rate := rateOf(t, reg); rate <= 0 {
		t.Errorf("kafkasink_pgcdc_backfill_rows_per_second %v, want the rate of the first chunk", rate)
	}
	close(held.release)
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// heldSink holds the Writes of read events while hold is set, until
// release closes.
type heldSink struct {
	*kafkasink.Sink
	hold    atomic.Bool
	release chan struct{}
}

func (s *heldSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if s.hold.Load() && slices.ContainsFunc(b.Events, func(e kafkasink.Event) bool { return e.Op == kafkasink.OpRead }) {
		select {
		case <-s.release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return s.Sink.Write(ctx, b)
}

// rateOf returns the one backfill rate reg gathers.
func rateOf(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "kafkasink_pgcdc_backfill_rows_per_second" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no single kafkasink_pgcdc_backfill_rows_per_second series")
	return 0
}

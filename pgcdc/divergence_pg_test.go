package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// failover is a primary and its standby (pgtest.StartPair), a table on
// them streamed by Run into the real Kafka broker, and what Run reported.
type failover struct {
	t       *testing.T
	pair    *pgtest.Pair
	name    string // sink id, topic prefix, slot and publication
	brokers []string
	sink    *recSink
	events  *sourceEvents
}

// sourceEvents records what Run passes to Config.OnSourceEvent.
type sourceEvents struct {
	mu  sync.Mutex
	all []SourceEvent
}

func (s *sourceEvents) add(ev SourceEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, ev)
}

// kinds returns the kinds reported so far, in order.
func (s *sourceEvents) kinds() []SourceEventKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SourceEventKind
	for _, ev := range s.all {
		if ev.Kind != SourceWALRetained {
			out = append(out, ev.Kind)
		}
	}
	return out
}

// last returns the last event of kind k.
func (s *sourceEvents) last(k SourceEventKind) (SourceEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.all) - 1; i >= 0; i-- {
		if s.all[i].Kind == k {
			return s.all[i], true
		}
	}
	return SourceEvent{}, false
}

// newFailover starts the pair and an exactly-once sink on the real
// broker, and creates the table div (ids 1 to 5) on the primary.
func newFailover(t *testing.T, opts pgtest.PairOptions) *failover {
	t.Helper()
	brokers := sinktest.RealBrokers(t, sinktest.EnvBrokers)
	f := &failover{t: t, pair: pgtest.StartPair(t, opts), brokers: brokers, events: &sourceEvents{}}
	f.name = strings.NewReplacer("-", "_", ".", "_").Replace(kafkasinktest.UniqueName(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := kafkasink.New(ctx, kafkasink.Config{Brokers: brokers, SinkID: f.name, CheckpointTopic: f.name + ".ckpt",
		Topics: kafkasink.Topics{Prefix: f.name, Partitions: 1}})
	if err != nil {
		t.Fatalf("kafkasink.New: %v", err)
	}
	t.Cleanup(func() {
		s.Close(context.Background())
		kafkasinktest.DeleteTopics(context.Background(), brokers, f.name)
	})
	f.sink = &recSink{Sink: s, tr: newTracker()}
	f.pair.Primary.Exec("CREATE TABLE div (id int PRIMARY KEY, seq bigint NOT NULL, note text); " +
		"INSERT INTO div SELECT i, 1, 'before' FROM generate_series(1, 5) i")
	return f
}

// config returns Run's Config for server; on the primary it takes the
// initial snapshot, on the promoted standby only a gap's way out may.
func (f *failover) config(server *pgtest.Server, gap SlotGap) Config {
	return Config{
		ConnString: server.ConnString("kafkasink"), Slot: f.name, Publication: f.name, Tables: []string{"public.div"},
		CreateSlot: true, CreatePublication: true, Snapshot: server == f.pair.Primary, SlotGap: gap,
		BatchMaxWait: 20 * time.Millisecond, StandbyInterval: time.Second, HeartbeatInterval: -1,
		ReconnectBackoff: 50 * time.Millisecond, ReconnectMax: time.Second,
		Logger: testLogger(f.t), OnSourceEvent: f.events.add,
	}
}

// waitDelivered waits until the sink has delivered n events in all.
func (f *failover) waitDelivered(r *run, n int) {
	f.t.Helper()
	waitFor(f.t, time.Minute, fmt.Sprintf("%d events delivered", n), r, func() bool { return f.sink.tr.delivered() >= n })
	if got := f.sink.tr.delivered(); got != n {
		f.t.Fatalf("%d events delivered, want %d", got, n)
	}
}

// topic reads the table's topic as a read_committed consumer, in order.
func (f *failover) topic() []change {
	f.t.Helper()
	var out []change
	for _, r := range decodeRecords(f.t, sinktest.ReadCommitted(f.t, f.brokers, f.name+".public.div")) {
		out = append(out, r.change())
	}
	return out
}

// switchpoint reads where the promoted standby's history left timeline
// 1, from its history file: the test's own reading, not pgcdc's.
func (f *failover) switchpoint() kafkasink.LSN {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.pair.Standby.DataDir(), "pg_wal", "00000002.history"))
	if err != nil {
		f.t.Fatal(err)
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 || fields[0] != "1" {
		f.t.Fatalf("timeline 2's history file: %q", b)
	}
	lsn, err := kafkasink.ParseLSN(fields[1])
	if err != nil {
		f.t.Fatal(err)
	}
	return lsn
}

// runUntilError runs Run on cfg and returns the error it stops with.
func (f *failover) runUntilError(cfg Config) error {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, cfg, f.sink)
	if ctx.Err() != nil {
		f.t.Fatalf("Run did not stop by itself within a minute: %v", err)
	}
	return err
}

// passWAL makes the server's WAL pass lsn: the ways out of a divergence
// need a slot beginning after the checkpoint (see planTimeline).
func passWAL(t *testing.T, s *pgtest.Server, lsn kafkasink.LSN) {
	t.Helper()
	for i := 0; s.Query("SELECT pg_current_wal_lsn() > $1::text::pg_lsn", lsn.String()) != "true"; i++ {
		if i == 10 {
			t.Fatalf("the server's WAL did not pass %s after %d WAL switches", lsn, i)
		}
		s.Exec("CREATE TABLE IF NOT EXISTS walpush (n int); INSERT INTO walpush VALUES (1); SELECT pg_switch_wal()")
	}
}

// TestTimelineDiverged is the divergence of issue 27: replication to an
// asynchronous standby is broken, the primary takes changes that Run
// delivers to Kafka, then the primary stops and the standby, which never
// received them, is promoted. Run must refuse it, naming the timelines
// and the range, before anything is written; then each way out of
// Config.SlotGap goes on as documented.
//
// No slot exists on the promoted standby (before PostgreSQL 16 none can be
// made on a standby, and a failover slot is only synchronised up to what
// the standby received): the way out creates it on the new primary, which
// is what an operator does on every version.
func TestTimelineDiverged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	for _, way := range []SlotGap{SlotGapResnapshot, SlotGapAccept} {
		t.Run(way.String(), func(t *testing.T) { diverge(t, way) })
	}
}

func diverge(t *testing.T, way SlotGap) {
	f := newFailover(t, pgtest.PairOptions{})
	p := f.pair
	stop, r := start(t, f.config(p.Primary, SlotGapRefuse), f.sink)
	f.waitDelivered(r, 5)
	p.Primary.Exec("UPDATE div SET seq = 2 WHERE id = 1")
	f.waitDelivered(r, 6)
	p.WaitReplayed()
	// From PostgreSQL 16 the new primary has a slot, made on the standby
	// before the break: the ways out drop it (resnapshot) or stream from
	// it (accept). Before 16 it has none and they create it.
	standbySlot := p.Major >= 16
	if standbySlot {
		createStandbySlot(t, p, f.name)
	}
	slots := p.Standby.Query("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.name)

	p.PauseReplication()
	// Some 200 kB of WAL on timeline 1 only, so that the new timeline's
	// first change below commits below the checkpoint.
	p.Primary.Exec("INSERT INTO div SELECT i, 1, (SELECT string_agg(md5(i::text || g::text), '') FROM generate_series(1, 3000) g) FROM generate_series(6, 7) i")
	p.Primary.Exec("UPDATE div SET seq = 3, note = 'diverged' WHERE id = 2")
	p.Primary.Exec("DELETE FROM div WHERE id = 3")
	f.waitDelivered(r, 10)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	ck := f.sink.Checkpoint().Position.LSN
	p.Primary.Stop()
	p.Standby.Promote()
	sw := f.switchpoint()
	if ck < sw {
		t.Fatalf("the checkpoint %s is before the switchpoint %s: the standby had the changes, nothing diverged", ck, sw)
	}
	// A change only the new timeline has, committed below the checkpoint:
	// neither way out can deliver it after the checkpoint, and a
	// re-snapshot reads it.
	p.Standby.Exec("UPDATE div SET seq = 10, note = 'new timeline' WHERE id = 4")
	if end := p.Standby.Query("SELECT pg_current_wal_lsn()::text"); p.Standby.Query("SELECT $1::text::pg_lsn < $2::text::pg_lsn", end, ck.String()) != "true" {
		t.Fatalf("the new timeline's update ends at %s, not below the checkpoint %s", end, ck)
	}
	before := f.topic()

	// Refused by default, naming the range; nothing written, no slot made.
	err := f.runUntilError(f.config(p.Standby, SlotGapRefuse))
	var se *SourceError
	if !errors.As(err, &se) || se.Kind != SourceTimelineDiverged {
		t.Fatalf("Run on the promoted standby: %v, want a *SourceError of kind timeline_diverged", err)
	}
	if se.From != sw || se.To != ck || se.Timeline == nil || se.Timeline.From != 1 || se.Timeline.To != 2 || se.Timeline.Switchpoint != sw {
		t.Errorf("refusal's range %s..%s, timelines %+v; want %s..%s from timeline 1 to 2", se.From, se.To, se.Timeline, sw, ck)
	}
	for _, part := range []string{"on timeline 1", "promoted to timeline 2", fmt.Sprintf("left timeline 1 at %s", sw),
		fmt.Sprintf("from %s up to %s", sw, ck), "-slot-gap=resnapshot", "-slot-gap=accept"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("refusal %q does not say %q", err, part)
		}
	}
	if got := f.topic(); len(got) != len(before) {
		t.Errorf("the refusal wrote: %d records, %d before it", len(got), len(before))
	}
	if got := p.Standby.Query("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.name); got != slots {
		t.Errorf("the refusal left %s slots on the new primary, %s before it", got, slots)
	}
	if ev, ok := f.events.last(SourceTimelineDiverged); !ok || ev.Err == nil || ev.Action != SlotGapRefuse {
		t.Errorf("reported %+v (found %v), want the refused divergence", ev, ok)
	}

	// The way out.
	passWAL(t, p.Standby, ck)
	stop, r = start(t, f.config(p.Standby, way), f.sink)
	switch way {
	case SlotGapResnapshot:
		f.waitDelivered(r, 10+5) // the snapshot reads 1, 2, 3, 4, 5 again
	case SlotGapAccept:
		waitFor(t, time.Minute, "the accepted gap", r, func() bool {
			ev, ok := f.events.last(SourceTimelineDiverged)
			return ok && ev.Action == SlotGapAccept
		})
	}
	p.Standby.Exec("INSERT INTO div VALUES (8, 1, 'after')")
	delivered := map[SlotGap]int{SlotGapResnapshot: 16, SlotGapAccept: 11}[way]
	f.waitDelivered(r, delivered)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after the way out: %v", err)
	}
	checkDivergedTopic(t, f.topic(), way)
	// The stream begins at the checkpoint from the standby's slot kept by
	// acceptance, else after it, from the slot the way out created.
	begins := ck
	if way == SlotGapResnapshot || !standbySlot {
		begins = 0
	}
	checkDivergedCursor(t, f, way, sw, ck, begins)
}

// checkDivergedTopic checks what a read_committed reader sees: the
// records of both timelines, the diverged ones kept, then what the way
// out delivers.
func checkDivergedTopic(t *testing.T, got []change, way SlotGap) {
	t.Helper()
	want := []change{
		{"read", 1, 1}, {"read", 2, 1}, {"read", 3, 1}, {"read", 4, 1}, {"read", 5, 1},
		{"update", 1, 2},
		// Timeline 1 only: the new primary never had these.
		{"insert", 6, 1}, {"insert", 7, 1}, {"update", 2, 3}, {"delete", 3, -1},
	}
	if way == SlotGapResnapshot {
		// The new primary's rows: 3 is back, 2 as before the
		// divergence, 4 as the new timeline changed it; 6 and 7 get no
		// delete.
		want = append(want, change{"read", 1, 2}, change{"read", 2, 1}, change{"read", 3, 1}, change{"read", 4, 10}, change{"read", 5, 1})
	}
	// With acceptance, the new timeline's update of 4, committed below
	// the checkpoint (and, before 16, before the slot was created), is in
	// the accepted gap.
	want = append(want, change{"insert", 8, 1})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("topic:\n got %v\nwant %v", got, want)
	}
}

// checkDivergedCursor checks the gap the checkpoint's cursor records.
// begins is where the stream begins, 0 for a slot created beyond ck.
func checkDivergedCursor(t *testing.T, f *failover, way SlotGap, sw, ck, begins kafkasink.LSN) {
	t.Helper()
	cur, err := parseRunCursor(f.sink.Checkpoint().Cursor)
	if err != nil {
		t.Fatal(err)
	}
	checkCursorTimeline(t, f, 2)
	if len(cur.Gaps) != 1 {
		t.Fatalf("cursor gaps %+v, want one", cur.Gaps)
	}
	g := cur.Gaps[0]
	tl := g.Timeline
	to := kafkasink.LSN(g.To)
	if g.Cause != "timeline_diverged" || g.Action != way.String() || kafkasink.LSN(g.From) != sw || (begins == 0) != (to > ck) || begins != 0 && to != begins ||
		tl == nil || tl.From != 1 || tl.To != 2 || kafkasink.LSN(tl.Switchpoint) != sw || kafkasink.LSN(tl.Checkpoint) != ck {
		t.Errorf("gap record %+v (timeline %+v), want timeline_diverged, %s, from %s, to %s (0: beyond %s), timelines 1 to 2", g, tl, way, sw, begins, ck)
	}
}

// TestTimelineChangedWithoutDivergence promotes a synchronous standby,
// which has every change in Kafka: Run reports the new timeline and goes
// on, without loss or duplicates. From PostgreSQL 16 the slot was made on
// the standby before the failover and Run goes on with the default
// SlotGapRefuse; before 16 no slot can be made on a standby, so the
// missing slot is a gap of its own, accepted (SlotGapAccept), and the
// timeline change must not be mistaken for a divergence.
func TestTimelineChangedWithoutDivergence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	f := newFailover(t, pgtest.PairOptions{Synchronous: true})
	p := f.pair
	stop, r := start(t, f.config(p.Primary, SlotGapRefuse), f.sink)
	f.waitDelivered(r, 5)
	p.WaitReplayed()
	standbySlot := p.Major >= 16
	if standbySlot {
		createStandbySlot(t, p, f.name)
	}
	p.Primary.Exec("UPDATE div SET seq = 2 WHERE id = 1")
	p.Primary.Exec("INSERT INTO div VALUES (6, 1, 'replicated')")
	f.waitDelivered(r, 7)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	ck := f.sink.Checkpoint().Position.LSN
	p.Primary.Stop()
	p.Standby.Promote()
	sw := f.switchpoint()

	gap := SlotGapRefuse
	if !standbySlot {
		gap = SlotGapAccept
		passWAL(t, p.Standby, ck)
	}
	stop, r = start(t, f.config(p.Standby, gap), f.sink)
	waitFor(t, time.Minute, "the timeline change", r, func() bool { _, ok := f.events.last(SourceTimelineChanged); return ok })
	p.Standby.Exec("INSERT INTO div VALUES (7, 1, 'after')")
	f.waitDelivered(r, 8)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after the failover: %v", err)
	}
	ev, _ := f.events.last(SourceTimelineChanged)
	if tl := ev.Timeline; ev.Err != nil || tl == nil || tl.Diverged || tl.From != 1 || tl.To != 2 || tl.Switchpoint != sw || tl.Checkpoint != ck || ck >= sw {
		t.Errorf("timeline change %+v (%+v), want 1 to 2 at %s, checkpoint %s before it", ev, ev.Timeline, sw, ck)
	}
	want := []SourceEventKind{SourceTimelineChanged}
	if !standbySlot {
		want = append(want, SourceSlotMissing)
	}
	if got := f.events.kinds(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	checkCursorTimeline(t, f, 2)
	wantTopic := []change{{"read", 1, 1}, {"read", 2, 1}, {"read", 3, 1}, {"read", 4, 1}, {"read", 5, 1},
		{"update", 1, 2}, {"insert", 6, 1}, {"insert", 7, 1}}
	if got := f.topic(); fmt.Sprint(got) != fmt.Sprint(wantTopic) {
		t.Errorf("topic:\n got %v\nwant %v", got, wantTopic)
	}
}

// createStandbySlot creates the logical slot on the standby (16+). Its
// creation waits for a running-transactions record from the primary,
// which pg_log_standby_snapshot writes at once.
func createStandbySlot(t *testing.T, p *pgtest.Pair, slot string) {
	t.Helper()
	conn := p.Standby.Connect("kafkasink")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("creating slot %s on the standby: %v", slot, err)
			}
			return
		case <-time.After(100 * time.Millisecond):
			p.Primary.Exec("SELECT pg_log_standby_snapshot()")
		}
	}
}

// TestTimelineStreamedThroughPromotion decodes on a standby (16+) and
// promotes it while Run streams: the stream runs on across the
// promotion, so changes after the switchpoint are recorded under the old
// timeline. After a reconnect Run must see that it streamed them from
// this very server's slot, report the timeline change and go on, not
// refuse them as diverged.
func TestTimelineStreamedThroughPromotion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	f := newFailover(t, pgtest.PairOptions{})
	p := f.pair
	if p.Major < 16 {
		t.Skipf("PostgreSQL %d cannot decode on a standby: that needs PostgreSQL 16", p.Major)
	}
	p.Primary.Exec("CREATE PUBLICATION " + f.name + " FOR TABLE div")
	p.WaitReplayed()
	createStandbySlot(t, p, f.name)
	stop, r := start(t, f.config(p.Standby, SlotGapRefuse), f.sink)
	waitFor(t, time.Minute, "streaming from the standby", r, func() bool {
		return p.Standby.Query("SELECT active FROM pg_replication_slots WHERE slot_name = $1", f.name) == "true"
	})
	p.Primary.Exec("UPDATE div SET seq = 2 WHERE id = 1")
	f.waitDelivered(r, 1)
	p.WaitReplayed()
	p.Primary.Stop()
	p.Standby.Promote()
	p.Standby.Exec("UPDATE div SET seq = 3 WHERE id = 1")
	f.waitDelivered(r, 2)
	sw, ck := f.switchpoint(), f.sink.Checkpoint().Position.LSN
	if ck < sw {
		t.Fatalf("the checkpoint %s is before the switchpoint %s: nothing was streamed after the promotion", ck, sw)
	}
	// Wait until the slot has what Run recorded, then cut the stream.
	waitFor(t, time.Minute, "the slot confirming the checkpoint", r, func() bool {
		cur, err := parseRunCursor(f.sink.Checkpoint().Cursor)
		return err == nil && p.Standby.Query("SELECT confirmed_flush_lsn = $2::text::pg_lsn FROM pg_replication_slots WHERE slot_name = $1",
			f.name, kafkasink.LSN(cur.Confirmed).String()) == "true"
	})
	p.Standby.Exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '" + f.name + "'")
	waitFor(t, time.Minute, "the timeline change", r, func() bool { _, ok := f.events.last(SourceTimelineChanged); return ok })
	p.Standby.Exec("UPDATE div SET seq = 4 WHERE id = 1")
	f.waitDelivered(r, 3)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	ev, _ := f.events.last(SourceTimelineChanged)
	if tl := ev.Timeline; tl == nil || tl.Diverged || !tl.StreamedThrough || tl.From != 1 || tl.To != 2 || tl.Switchpoint != sw || tl.Checkpoint != ck {
		t.Errorf("timeline change %+v, want streamed through from 1 to 2 at %s, checkpoint %s", ev.Timeline, sw, ck)
	}
	if got := f.events.kinds(); fmt.Sprint(got) != fmt.Sprint([]SourceEventKind{SourceTimelineChanged}) {
		t.Errorf("reported %v, want only the timeline change", got)
	}
	checkCursorTimeline(t, f, 2)
	want := []change{{"update", 1, 2}, {"update", 1, 3}, {"update", 1, 4}}
	if got := f.topic(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("topic:\n got %v\nwant %v", got, want)
	}
}

// checkCursorTimeline checks the timeline the checkpoint's cursor records.
func checkCursorTimeline(t *testing.T, f *failover, want int32) {
	t.Helper()
	cur, err := parseRunCursor(f.sink.Checkpoint().Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Source == nil || cur.Source.Timeline != want {
		t.Errorf("cursor source %+v, want timeline %d", cur.Source, want)
	}
}

package pgcdc

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// The window decides which rows of a chunk to drop. A real server hides
// an emitted transaction from a snapshot only between its commit record
// and its leaving the proc array, a moment (longer while its commit waits
// for a synchronous standby), which a test cannot aim at; these cases
// give the snapshot's lists directly. (cmd/kafkasink's
// TestBackfillCommandUnderLoad met the moment about once in 20 runs,
// with the newest transaction above the snapshot's xmax.)
func TestBackfillWindowPlan(t *testing.T) {
	const table = "public.t"
	keyCols := []string{"id"}
	row := func(id int64) kafkasink.Row { return kafkasink.Row{{Name: "id", Value: id}, {Name: "v", Value: "x"}} }
	w := newWindow()
	// Transaction 90 is emitted before the backfill of t begins.
	w.observe(&kafkasink.Event{XID: 90, Op: kafkasink.OpInsert, Schema: "public", Table: "t", After: row(9)}, table, keyCols)
	w.track(table)
	// 100 updates key 1; 101 moves key 2 to 3; 102 deletes 4 and
	// changes another table; 103 has a key whose value was an
	// unchanged TOAST; 104 truncates; 105 touches another table only.
	w.observe(&kafkasink.Event{XID: 100, Op: kafkasink.OpUpdate, After: row(1)}, table, keyCols)
	w.observe(&kafkasink.Event{XID: 101, Op: kafkasink.OpUpdate, Before: row(2), After: row(3)}, table, keyCols)
	w.observe(&kafkasink.Event{XID: 102, Op: kafkasink.OpDelete, Before: kafkasink.Row{{Name: "id", Value: int64(4)}}}, table, keyCols)
	w.observe(&kafkasink.Event{XID: 102, Op: kafkasink.OpInsert, After: row(5)}, "public.other", keyCols)
	w.observe(&kafkasink.Event{XID: 103, Op: kafkasink.OpUpdate, After: kafkasink.Row{{Name: "id", Unchanged: true}}}, table, keyCols)
	w.observe(&kafkasink.Event{XID: 104, Op: kafkasink.OpTruncate}, table, keyCols)
	w.txn(105)

	const xmax = 7<<32 | 1000 // above every transaction of the cases
	for _, c := range []struct {
		name      string
		xip       []uint64
		committed []uint64
		drop      []string
		all       bool
		retry     string // a part of the reason, "" for none
	}{
		{name: "nothing in progress", xip: nil},
		{name: "in progress, not yet streamed", xip: []uint64{200, 201}},
		{name: "emitted, in progress for the snapshot", xip: []uint64{100, 200}, drop: []string{"[1]"}},
		{name: "a key change drops both keys", xip: []uint64{101}, drop: []string{"[2]", "[3]"}},
		{name: "a delete; the other table's key is not this table's", xip: []uint64{102}, drop: []string{"[4]"}},
		{name: "the epoch above the 32-bit id is ignored", xip: []uint64{7<<32 | 100}, drop: []string{"[1]"}},
		{name: "a truncate drops every row", xip: []uint64{104}, all: true},
		{name: "another table only", xip: []uint64{105}},
		{name: "a key the stream did not carry", xip: []uint64{103}, retry: "did not carry"},
		{name: "emitted before the backfill began", xip: []uint64{90}, retry: "before the backfill"},
		{name: "committed, unknown to the window", xip: []uint64{300}, committed: []uint64{300}, retry: "has committed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			committed := make(map[uint64]bool)
			for _, x := range c.committed {
				committed[x] = true
			}
			p := w.plan(table, c.xip, xmax, committed)
			if c.retry != "" || p.retry != "" {
				if !strings.Contains(p.retry, c.retry) || c.retry == "" {
					t.Fatalf("retry %q, want one saying %q", p.retry, c.retry)
				}
				return
			}
			if got := slices.Sorted(maps.Keys(p.drop)); !slices.Equal(got, c.drop) || p.all != c.all {
				t.Fatalf("drop %v all %v, want %v all %v", got, p.all, c.drop, c.all)
			}
		})
	}

	// A chunk's xmin forgets what no later snapshot can see in
	// progress: then an emitted transaction is unknown again.
	w.forget(102)
	if p := w.plan(table, []uint64{101}, xmax, map[uint64]bool{101: true}); p.retry == "" {
		t.Fatalf("transaction 101, below the xmin forgotten, planned %+v, want a retry", p)
	}
	if p := w.plan(table, []uint64{102}, xmax, nil); !slices.Equal(slices.Collect(maps.Keys(p.drop)), []string{"[4]"}) {
		t.Fatalf("transaction 102, at the xmin, planned %+v, want key 4 dropped", p)
	}
	// An emitted transaction at or above the snapshot's xmax is as
	// invisible to it as one listed in progress, in any epoch.
	w = newWindow()
	w.track(table)
	w.observe(&kafkasink.Event{XID: 200, Op: kafkasink.OpUpdate, After: row(7)}, table, keyCols)
	for _, c := range []struct {
		xmax uint64
		drop []string
	}{{200, []string{"[7]"}}, {3<<32 | 199, []string{"[7]"}}, {201, nil}} {
		if p := w.plan(table, nil, c.xmax, nil); p.retry != "" || !slices.Equal(slices.Sorted(maps.Keys(p.drop)), c.drop) {
			t.Errorf("transaction 200, snapshot xmax %d: planned %+v, want %v dropped", c.xmax, p, c.drop)
		}
	}
	// The ids wrap around: 2^32-5 precedes 3.
	w = newWindow()
	w.txn(1<<32 - 5)
	w.txn(3)
	w.forget(3)
	if _, ok := w.txns[1<<32-5]; ok || w.txns[3] == nil {
		t.Fatalf("forgetting below 3 across the wraparound left %v", w.order)
	}
}

// A call waits for Run, bounded by its context, and is withdrawn when the
// context ends first.
func TestBackfillsWaitForRun(t *testing.T) {
	var b Backfills
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Request(ctx, BackfillRequest{Table: "t"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Request without a Run: %v, want the context's deadline", err)
	}
	if n := len(b.take()); n != 0 {
		t.Fatalf("%d calls still waiting after their context ended", n)
	}
}

func TestParseSignal(t *testing.T) {
	for _, c := range []struct {
		json  string
		want  signalAction
		error string // a part of the error, "" for none
	}{
		{json: `{"type":"execute-snapshot","data":{"data-collections":["public.orders","b"],"type":"INCREMENTAL","additional-conditions":[{"data-collection":"public.orders","filter":"region = 'eu'"}]}}`,
			want: signalAction{kind: cmdRequest, reqs: []BackfillRequest{{Table: "public.orders", Where: "region = 'eu'"}, {Table: "b"}}}},
		// The signal table holds data as text.
		{json: `{"id":"x1","type":"execute-snapshot","data":"{\"data-collections\":[\"a\"]}"}`,
			want: signalAction{kind: cmdRequest, reqs: []BackfillRequest{{Table: "a"}}}},
		{json: `{"type":"stop-snapshot","data":{"data-collections":["a"],"type":"incremental"}}`, want: signalAction{kind: cmdCancel, tables: []string{"a"}}},
		{json: `{"type":"stop-snapshot"}`, want: signalAction{kind: cmdCancel}},
		{json: `{"type":"pause-snapshot"}`, want: signalAction{kind: cmdPause}},
		{json: `{"type":"resume-snapshot","data":{}}`, want: signalAction{kind: cmdResume}},
		{json: `{"type":"execute-snapshot",`, error: "not a signal"},
		{json: `{"type":"execute-snapshot","data":{"data-collections":["a"]}} x`, error: "not a signal"},
		{json: `{"type":"execute-snapshot","data":{"data-collections":["a"],"type":"blocking"}}`, error: `snapshot type "blocking" is not supported`},
		{json: `{"type":"execute-snapshot","data":{"data-collections":["a"],"surrogate-key":"k"}}`, error: `"surrogate-key" is not supported`},
		{json: `{"type":"execute-snapshot","data":{"data-collections":["a"],"additional-condition":"x > 1"}}`, error: `"additional-condition" is Debezium's form before 2.1`},
		{json: `{"type":"execute-snapshot","data":{"data-collections":["a"],"filter":"x"}}`, error: `unknown field "filter"`},
		{json: `{"type":"execute-snapshot","data":{"data-collections":["a"],"additional-conditions":[{"data-collection":"b","filter":"x"}]}}`, error: `names "b", which is not among`},
		{json: `{"type":"execute-snapshot","data":{}}`, error: `needs "data-collections"`},
		{json: `{"type":"execute-snapshot"}`, error: `needs data`},
		{json: `{"type":"log","data":{"message":"hi"}}`, error: `type "log" is not supported`},
		{json: `{"data":{}}`, error: `no "type"`},
	} {
		got, err := parseSignal([]byte(c.json))
		var be *BackfillError
		switch {
		case c.error != "" && (err == nil || !strings.Contains(err.Error(), c.error) || !errors.As(err, &be)):
			t.Errorf("%s: error %v, want a *BackfillError saying %q", c.json, err, c.error)
		case c.error == "" && err != nil:
			t.Errorf("%s: %v", c.json, err)
		case c.error == "" && (got.kind != c.want.kind || !slices.Equal(got.reqs, c.want.reqs) || !slices.Equal(got.tables, c.want.tables)):
			t.Errorf("%s: %+v, want %+v", c.json, got, c.want)
		}
	}
}

func TestCheckWhere(t *testing.T) {
	for _, c := range []struct {
		where string
		error string // a part of the error, "" for none
	}{
		{where: ""},
		{where: "region = 'eu'"},
		{where: "(a > 1 OR b < 2) AND c IS NOT NULL"},
		{where: `note = 'it''s (not'`},
		{where: `note = E'a\'b)'`},
		{where: `"odd)name" = 1`},
		{where: `note = $x$ ) $x$ AND n = $$(($$`},
		{where: "n = $1"}, // a parameter: PostgreSQL refuses it
		{where: "true) OR (true", error: "closes a parenthesis it did not open"},
		{where: "(true", error: "leaves a parenthesis open"},
		{where: "a = 1; DELETE FROM t", error: "semicolon"},
		{where: "a = 1 -- x", error: "comment"},
		{where: "a = 1 /* x", error: "comment"},
		{where: "a = 'open", error: "ends inside a quoted"},
		{where: `"open = 1`, error: "ends inside a quoted"},
		{where: "a = $q$ open", error: "ends inside a dollar-quoted"},
	} {
		err := checkWhere(c.where)
		if c.error == "" && err != nil || c.error != "" && (err == nil || !strings.Contains(err.Error(), c.error)) {
			t.Errorf("%q: %v, want %q", c.where, err, c.error)
		}
	}
}

// A cursor with an unfinished backfill is version 2, which an earlier
// pgcdc refuses instead of forgetting the backfill; one without stays 1.
func TestBackfillCursorVersion(t *testing.T) {
	plain, err := cursor{cursorFields: cursorFields{Confirmed: 1, LastSignal: signalPos{Commit: 5, Message: 4}}}.marshal()
	if err != nil {
		t.Fatal(err)
	}
	bf := backfillCursor{ID: "r1", Table: "public.t", Where: "a > 1", KeyColumns: []string{"id"}, LastKey: []string{"7"}, Rows: 3, Chunks: 1, By: "api"}
	with, err := cursor{cursorFields: cursorFields{Confirmed: 1, Backfills: backfillList{bf}}}.marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		raw     []byte
		version int
	}{{plain, 1}, {with, 2}} {
		back, err := parseRunCursor(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		if back.Version != c.version {
			t.Errorf("%s: version %d, want %d", c.raw, back.Version, c.version)
		}
	}
	back, _ := parseRunCursor(with)
	if len(back.Backfills) != 1 || back.Backfills[0].Table != "public.t" || !slices.Equal(back.Backfills[0].LastKey, []string{"7"}) || back.Backfills[0].Where != "a > 1" {
		t.Fatalf("round trip lost the backfill: %s -> %+v", with, back.Backfills)
	}
}

// Run refuses a negative BackfillChunkRows and a SignalPrefix that is the
// heartbeats', naming each.
func TestBackfillConfig(t *testing.T) {
	cfg := Config{ConnString: "postgres://localhost/db", Slot: "s", Publication: "p", BackfillChunkRows: -1, SignalPrefix: heartbeatPrefix}.withDefaults()
	err := cfg.validate()
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 || !strings.Contains(err.Error(), "Config.BackfillChunkRows -1 is negative") ||
		!strings.Contains(err.Error(), `Config.SignalPrefix "kafkasink.heartbeat" is the heartbeats' prefix`) {
		t.Fatalf("validate: %v, want the two problems named", err)
	}
	if d := (Config{}).withDefaults(); d.BackfillChunkRows != DefaultBackfillChunkRows || d.SignalPrefix != "" {
		t.Fatalf("defaults: %d rows, prefix %q", d.BackfillChunkRows, d.SignalPrefix)
	}
}

package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// memSink keeps what Run writes, in memory: the events and the last
// checkpoint.
type memSink struct {
	mu     sync.Mutex
	events []kafkasink.Event
	ck     kafkasink.Checkpoint
}

func (s *memSink) Write(_ context.Context, b kafkasink.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, b.Events...)
	if n := len(b.Events); n > 0 {
		s.ck.Position = b.Events[n-1].Position
	}
	s.ck.Cursor = b.Cursor
	return nil
}

func (s *memSink) Checkpoint() kafkasink.Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ck
}

// seen is, per event, "op table columns" of its rows, in order.
func (s *memSink) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		row := e.After
		if row == nil {
			row = e.Before
		}
		var cols, rel []string
		for _, c := range row {
			cols = append(cols, c.Name)
		}
		for _, c := range e.Relation.Columns {
			rel = append(rel, c.Name)
		}
		if !slices.Equal(cols, rel) {
			cols = append(cols, fmt.Sprintf("(relation %v)", rel))
		}
		out = append(out, fmt.Sprintf("%s %s %s", e.Op, e.Table, strings.Join(cols, ",")))
	}
	return out
}

// TestCaptureFilterRealPG: against real PostgreSQL, the include and
// exclude lists choose the tables the snapshot reads, the stream
// delivers and a backfill may read, by whole-identifier, case-insensitive regular expressions, and
// leave the excluded columns out of the rows and the Relation; the events
// of a transaction that touched an excluded table are numbered without it.
func TestCaptureFilterRealPG(t *testing.T) {
	e := newPGEnv(t)
	keep, skip := e.name+"_keep", e.name+"_skip"
	for _, n := range []string{keep, skip} {
		e.exec("CREATE TABLE " + n + " (id int PRIMARY KEY, secret text, note text)")
		e.exec("INSERT INTO " + n + " VALUES (1, 's', 'a')")
	}
	cfg := e.config(keep, skip)
	cfg.Snapshot = true
	// Upper case and a pattern: matched whole and case-insensitively.
	cfg.TableIncludeList = []string{"PUBLIC\\." + strings.ToUpper(e.name) + "_K.*"}
	cfg.ColumnExcludeList = []string{"public\\.pgcdc_.*\\.SECRET"}
	cfg.Backfills = new(Backfills)
	sink := &memSink{}
	_, r := start(t, cfg, sink)
	waitFor(t, 20*time.Second, "the snapshot", r, func() bool { return len(sink.seen()) == 1 })
	var be *BackfillError
	if _, err := request(t, cfg.Backfills, "public."+skip, ""); !errors.As(err, &be) || !strings.Contains(err.Error(), "include and exclude lists") {
		t.Errorf("a backfill of the excluded table: %v; want a *BackfillError naming the include and exclude lists", err)
	}
	e.exec("BEGIN; INSERT INTO " + skip + " VALUES (2, 's', 'b'); INSERT INTO " + keep + " VALUES (2, 's', 'b'); UPDATE " + keep + " SET note = 'c' WHERE id = 1; COMMIT")
	e.exec("DELETE FROM " + skip + " WHERE id = 1")
	e.exec("DELETE FROM " + keep + " WHERE id = 2")
	waitFor(t, 20*time.Second, "the stream", r, func() bool { return len(sink.seen()) == 4 })
	time.Sleep(300 * time.Millisecond) // a wrongly delivered later event would show
	// The delete's old row is its key (REPLICA IDENTITY DEFAULT).
	want := []string{"read " + keep + " id,note", "insert " + keep + " id,note", "update " + keep + " id,note", "delete " + keep + " id,(relation [id note])"}
	if got := sink.seen(); !slices.Equal(got, want) {
		t.Fatalf("delivered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	sink.mu.Lock()
	insert, update := sink.events[1], sink.events[2]
	sink.mu.Unlock()
	if insert.Position.Index != 0 || update.Position.Index != 1 || insert.Txn.Order != 1 || update.Txn.Order != 2 {
		t.Errorf("the transaction's captured events have indexes %d, %d and orders %d, %d; want 0, 1 and 1, 2 (the excluded table's insert counts nowhere)",
			insert.Position.Index, update.Position.Index, insert.Txn.Order, update.Txn.Order)
	}
}

// TestCaptureFilterKeyColumnRealPG: a column list that leaves out a key
// column stops Run with a configuration error naming the column.
func TestCaptureFilterKeyColumnRealPG(t *testing.T) {
	e := newPGEnv(t)
	tbl := e.createTable("_t")
	e.exec("INSERT INTO " + tbl + " VALUES (1, 1, 'a')")
	cfg := e.config(tbl)
	cfg.Snapshot = true
	cfg.ColumnIncludeList = []string{".*\\.seq", ".*\\.note"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, cfg, &memSink{})
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "leaves out public."+tbl+".id, a key column") {
		t.Fatalf("Run = %v; want a *kafkasink.ConfigError naming the key column public.%s.id", err, tbl)
	}
}

// TestCaptureFilterValidate: Validate refuses both lists of a kind, and an
// item Go's regular expressions do not accept, naming the list.
func TestCaptureFilterValidate(t *testing.T) {
	cfg := Config{ConnString: "postgres://u@h/db", Slot: "s", Publication: "p",
		TableIncludeList: []string{"public.a"}, TableExcludeList: []string{"public.b"},
		ColumnExcludeList: []string{"public.a.(?=x)"}}
	err := cfg.Validate()
	for _, want := range []string{
		"Config.TableIncludeList and Config.TableExcludeList are both set",
		`Config.ColumnExcludeList item "public.a.(?=x)" is not a regular expression Go accepts`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want it to say %q", err, want)
		}
	}
}

// TestCaptureFilterMatching pins Debezium's matching rules: whole
// identifier, case-insensitive, schema lists and table lists together.
func TestCaptureFilterMatching(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           Config
		schema, table string
		want          bool
	}{
		{"include matches whole", Config{TableIncludeList: []string{"public.orders"}}, "public", "orders_archive", false},
		{"include case-insensitive", Config{TableIncludeList: []string{"PUBLIC.Orders"}}, "public", "orders", true},
		{"an unescaped dot matches any character, as in Debezium", Config{TableIncludeList: []string{"public.orders"}}, "publicXorders", "", true},
		{"exclude", Config{TableExcludeList: []string{"public\\.audit_.*"}}, "public", "audit_log", false},
		{"exclude other", Config{TableExcludeList: []string{"public\\.audit_.*"}}, "public", "orders", true},
		{"schema include", Config{SchemaIncludeList: []string{"inventory"}}, "public", "orders", false},
		{"schema and table", Config{SchemaIncludeList: []string{"inv.*"}, TableExcludeList: []string{"inventory.geom"}}, "inventory", "orders", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, problems := newCaptureFilter(&tc.cfg)
			if problems != nil {
				t.Fatal(problems)
			}
			if tc.table == "" { // tc.schema is the whole "schema.table"
				if got := passes(tc.schema, f.tableIn, f.tableEx); got != tc.want {
					t.Fatalf("%q passes = %v, want %v", tc.schema, got, tc.want)
				}
				return
			}
			if got := f.table(tc.schema, tc.table); got != tc.want {
				t.Fatalf("table(%q, %q) = %v, want %v", tc.schema, tc.table, got, tc.want)
			}
		})
	}
}

package pgoutput

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

var (
	ordersR = pgoutputmsg.Relation(0, 16390, "shop", "orders", 'd', pgoutputmsg.Key("id", pgtype.Int8OID))
	userKey = []string{"id"}
)

// checkEvents compares the events with want, whose Relation is left nil:
// every event must carry a Relation, listing every column its row images
// name, which TestEventRelation checks against the catalog. Event.Txn is
// compared where want sets it (TestDecodeTransaction; TestDecodeTxnPlace
// checks it further).
func checkEvents(t *testing.T, got, want []kafkasink.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d events, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g := got[i]
		if g.Relation == nil {
			t.Errorf("event %d has no Relation", i)
		}
		for _, c := range slices.Concat(g.Before, g.After) {
			if _, ok := g.Relation.Column(c.Name); !ok {
				t.Errorf("event %d: column %q is not in its Relation", i, c.Name)
			}
		}
		g.Relation = nil
		if want[i].Txn == (kafkasink.TxnPlace{}) {
			g.Txn = kafkasink.TxnPlace{}
		}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
}

func TestDecodeTransaction(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run("v"+string(rune('0'+version)), func(t *testing.T) {
			t.Parallel()
			d, rec := newTestDecoder(t, DecoderConfig{ProtocolVersion: version})
			feed(t, d,
				wal{0x100, pgoutputmsg.Begin(0x500, t0, 700)},
				wal{0x100, usersR},
				wal{0x110, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Text("ann"), pgoutputmsg.Text("10.50"))},
				wal{0x120, pgoutputmsg.Update(0, 16384, 0, nil, pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Text("anne"), pgoutputmsg.Null()))},
				wal{0x130, pgoutputmsg.Delete(0, 16384, 'K', pgoutputmsg.Text("1"), pgoutputmsg.Null(), pgoutputmsg.Null())},
				wal{0x140, ordersR},
				wal{0x140, pgoutputmsg.Truncate(0, 3, 16384, 16390)}, // CASCADE and RESTART IDENTITY
				wal{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
			)
			want := []kafkasink.Event{
				ev(kafkasink.OpInsert, "public", "users", 0x500, 0, 0x110, 700, userKey, nil,
					row("id", int32(1), "name", "ann", "balance", kafkasink.Decimal("10.50"))),
				ev(kafkasink.OpUpdate, "public", "users", 0x500, 1, 0x120, 700, userKey, nil,
					row("id", int32(1), "name", "anne", "balance", nil)),
				ev(kafkasink.OpDelete, "public", "users", 0x500, 2, 0x130, 700, userKey, row("id", int32(1)), nil),
				ev(kafkasink.OpTruncate, "public", "users", 0x500, 3, 0x140, 700, userKey, nil, nil),
				ev(kafkasink.OpTruncate, "shop", "orders", 0x500, 4, 0x140, 700, userKey, nil, nil),
			}
			for i := 3; i < 5; i++ {
				want[i].Truncate = kafkasink.TruncateOptions{Cascade: true, RestartIdentity: true}
			}
			// Every event counts (no DecoderConfig.Counted); the last
			// carries the whole transaction.
			for i, tableOrder := range []int{1, 2, 3, 4, 1} {
				want[i].Txn = kafkasink.TxnPlace{Order: i + 1, TableOrder: tableOrder, First: i == 0}
			}
			want[4].Txn.End = &kafkasink.TxnSummary{CommitEnd: 0x530, Events: 5,
				Tables: []kafkasink.TableEvents{{Schema: "public", Table: "users", Events: 4}, {Schema: "shop", Table: "orders", Events: 1}}}
			checkEvents(t, rec.events, want)
			wantTxn := []Txn{{XID: 700, CommitLSN: 0x500, EndLSN: 0x530, Commit: t0, Events: 5}}
			if !reflect.DeepEqual(rec.txns, wantTxn) {
				t.Errorf("txns = %+v, want %+v", rec.txns, wantTxn)
			}
			if d.InTransaction() {
				t.Error("InTransaction after commit")
			}
		})
	}
}

func TestKeyChange(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	feed(t, d,
		wal{0x100, pgoutputmsg.Begin(0x500, t0, 7)},
		wal{0x100, usersR},
		// Key changed: delete of the old key, then insert of the new row.
		wal{0x110, pgoutputmsg.Update(0, 16384, 'K', pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Null(), pgoutputmsg.Null()),
			pgoutputmsg.Tuple(pgoutputmsg.Text("2"), pgoutputmsg.Text("bob"), pgoutputmsg.Text("1")))},
		// Key sent because it is stored out of line, but unchanged: an update.
		wal{0x120, pgoutputmsg.Update(0, 16384, 'K', pgoutputmsg.Tuple(pgoutputmsg.Text("3"), pgoutputmsg.Null(), pgoutputmsg.Null()),
			pgoutputmsg.Tuple(pgoutputmsg.Text("3"), pgoutputmsg.Text("cy"), pgoutputmsg.Text("2")))},
		wal{0x130, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("4"), pgoutputmsg.Text("dee"), pgoutputmsg.Text("3"))},
		wal{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
	)
	// Each half of the key change names the other's row
	// (Source.KeyChange), for the encoders' old/new key headers.
	del := ev(kafkasink.OpDelete, "public", "users", 0x500, 0, 0x110, 7, userKey, row("id", int32(1)), nil)
	ins := ev(kafkasink.OpInsert, "public", "users", 0x500, 1, 0x110, 7, userKey, nil,
		row("id", int32(2), "name", "bob", "balance", kafkasink.Decimal("1")))
	del.Source.KeyChange, ins.Source.KeyChange = ins.After, del.Before
	checkEvents(t, rec.events, []kafkasink.Event{
		del, ins,
		ev(kafkasink.OpUpdate, "public", "users", 0x500, 2, 0x120, 7, userKey, row("id", int32(3)),
			row("id", int32(3), "name", "cy", "balance", kafkasink.Decimal("2"))),
		ev(kafkasink.OpInsert, "public", "users", 0x500, 3, 0x130, 7, userKey, nil,
			row("id", int32(4), "name", "dee", "balance", kafkasink.Decimal("3"))),
	})
	if rec.txns[0].Events != 4 {
		t.Errorf("Txn.Events = %d, want 4", rec.txns[0].Events)
	}
}

func TestUnchangedToast(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	feed(t, d,
		wal{0x100, pgoutputmsg.Begin(0x500, t0, 7)},
		wal{0x100, usersR},
		wal{0x110, pgoutputmsg.Update(0, 16384, 0, nil, pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Toast(), pgoutputmsg.Text("5")))},
		wal{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
	)
	checkEvents(t, rec.events, []kafkasink.Event{
		ev(kafkasink.OpUpdate, "public", "users", 0x500, 0, 0x110, 7, userKey, nil,
			row("id", int32(1), "name", unchanged, "balance", kafkasink.Decimal("5"))),
	})
}

// fullR is a REPLICA IDENTITY FULL table: the server flags every column.
var fullR = pgoutputmsg.Relation(0, 16400, "public", "docs", 'f',
	pgoutputmsg.Key("id", pgtype.Int4OID), pgoutputmsg.Key("body", pgtype.TextOID), pgoutputmsg.Key("rev", pgtype.Int2OID))

func TestReplicaIdentityFull(t *testing.T) {
	t.Parallel()
	msgs := []wal{
		{0x100, pgoutputmsg.Begin(0x500, t0, 9)},
		{0x100, fullR},
		// Body unchanged and TOASTed: the old row supplies it.
		{0x110, pgoutputmsg.Update(0, 16400, 'O', pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Text("long"), pgoutputmsg.Text("1")),
			pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Toast(), pgoutputmsg.Text("2")))},
		// Key change from 1 to 5.
		{0x120, pgoutputmsg.Update(0, 16400, 'O', pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Text("long"), pgoutputmsg.Text("2")),
			pgoutputmsg.Tuple(pgoutputmsg.Text("5"), pgoutputmsg.Text("long"), pgoutputmsg.Text("2")))},
		{0x130, pgoutputmsg.Delete(0, 16400, 'O', pgoutputmsg.Text("5"), pgoutputmsg.Text("long"), pgoutputmsg.Text("2"))},
		{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
	}
	old1 := row("id", int32(1), "body", "long", "rev", int16(1))
	old2 := row("id", int32(1), "body", "long", "rev", int16(2))
	new5 := row("id", int32(5), "body", "long", "rev", int16(2))

	t.Run("KeyColumns", func(t *testing.T) {
		t.Parallel()
		d, rec := newTestDecoder(t, DecoderConfig{KeyColumns: kafkasink.TableKeys{"public.docs": {"id"}}})
		feed(t, d, msgs...)
		// The delete and insert a key change becomes each carry the other's
		// row (Source.KeyChange).
		del := ev(kafkasink.OpDelete, "public", "docs", 0x500, 1, 0x120, 9, userKey, old2, nil)
		ins := ev(kafkasink.OpInsert, "public", "docs", 0x500, 2, 0x120, 9, userKey, nil, new5)
		del.Source.KeyChange, ins.Source.KeyChange = ins.After, del.Before
		checkEvents(t, rec.events, []kafkasink.Event{
			ev(kafkasink.OpUpdate, "public", "docs", 0x500, 0, 0x110, 9, userKey, old1, old2),
			del,
			ins,
			ev(kafkasink.OpDelete, "public", "docs", 0x500, 3, 0x130, 9, userKey, new5, nil),
		})
	})
	t.Run("no key", func(t *testing.T) {
		t.Parallel()
		d, rec := newTestDecoder(t, DecoderConfig{})
		feed(t, d, msgs...)
		// Without a key there is no key change to detect.
		checkEvents(t, rec.events, []kafkasink.Event{
			ev(kafkasink.OpUpdate, "public", "docs", 0x500, 0, 0x110, 9, nil, old1, old2),
			ev(kafkasink.OpUpdate, "public", "docs", 0x500, 1, 0x120, 9, nil, old2, new5),
			ev(kafkasink.OpDelete, "public", "docs", 0x500, 2, 0x130, 9, nil, new5, nil),
		})
	})
	t.Run("unknown key column", func(t *testing.T) {
		t.Parallel()
		d, _ := newTestDecoder(t, DecoderConfig{KeyColumns: kafkasink.TableKeys{"public.docs": {"nope"}}})
		err := d.Decode(0x100, fullR)
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), `key column "nope"`) {
			t.Fatalf("err = %v, want DecodeError naming the key column", err)
		}
	})
}

func TestRelationChangeMidTransaction(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	v2 := pgoutputmsg.Relation(0, 16384, "public", "users", 'd',
		pgoutputmsg.Key("id", pgtype.Int4OID), pgoutputmsg.Col("name", pgtype.TextOID),
		pgoutputmsg.Col("balance", pgtype.NumericOID), pgoutputmsg.Col("active", pgtype.BoolOID))
	feed(t, d,
		wal{0x100, pgoutputmsg.Begin(0x500, t0, 7)},
		wal{0x100, usersR},
		wal{0x110, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Text("a"), pgoutputmsg.Text("1"))},
		wal{0x120, v2},
		wal{0x120, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("2"), pgoutputmsg.Text("b"), pgoutputmsg.Text("2"), pgoutputmsg.Text("t"))},
		wal{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
	)
	checkEvents(t, rec.events, []kafkasink.Event{
		ev(kafkasink.OpInsert, "public", "users", 0x500, 0, 0x110, 7, userKey, nil,
			row("id", int32(1), "name", "a", "balance", kafkasink.Decimal("1"))),
		ev(kafkasink.OpInsert, "public", "users", 0x500, 1, 0x120, 7, userKey, nil,
			row("id", int32(2), "name", "b", "balance", kafkasink.Decimal("2"), "active", true)),
	})
	// A tuple for the old shape no longer matches.
	err := d.Decode(0x600, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("3"), pgoutputmsg.Text("c"), pgoutputmsg.Text("3")))
	if err == nil || !strings.Contains(err.Error(), "change outside a transaction") {
		t.Fatalf("err = %v", err)
	}
}

func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestStreamedTransaction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, rec := newTestDecoder(t, DecoderConfig{SpoolDir: dir})
	const top, sub1, sub2 = 800, 801, 802
	usersStreamed := pgoutputmsg.Relation(top, 16384, "public", "users", 'd',
		pgoutputmsg.Key("id", pgtype.Int4OID), pgoutputmsg.Col("name", pgtype.TextOID), pgoutputmsg.Col("balance", pgtype.NumericOID))
	// The relation changes in the middle of the stream: an added column.
	usersV2 := pgoutputmsg.Relation(sub2, 16384, "public", "users", 'd',
		pgoutputmsg.Key("id", pgtype.Int4OID), pgoutputmsg.Col("name", pgtype.TextOID),
		pgoutputmsg.Col("balance", pgtype.NumericOID), pgoutputmsg.Col("tags", pgtype.TextArrayOID))
	feed(t, d,
		wal{0x100, pgoutputmsg.StreamStart(top, true)},
		wal{0x100, pgoutputmsg.Origin("upstream")},
		wal{0x100, usersStreamed},
		wal{0x110, pgoutputmsg.Insert(top, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Text("a"), pgoutputmsg.Text("1"))},
		wal{0x120, pgoutputmsg.Insert(sub1, 16384, pgoutputmsg.Text("2"), pgoutputmsg.Text("rolled back"), pgoutputmsg.Text("2"))},
		wal{0x125, pgoutputmsg.Logical(sub1, true, 0x125, "app", "rolled back")},
		wal{0x130, pgoutputmsg.Logical(top, true, 0x130, "app", "kept")},
		wal{0x130, pgoutputmsg.StreamStop()},
	)
	if len(spoolFiles(t, dir)) != 1 {
		t.Fatalf("spool files = %v, want one", spoolFiles(t, dir))
	}
	if d.InTransaction() {
		t.Error("InTransaction between stream blocks")
	}
	// An ordinary transaction commits between the stream blocks and is
	// delivered at once.
	feed(t, d,
		wal{0x200, pgoutputmsg.Begin(0x210, t0, 900)},
		wal{0x200, ordersR},
		wal{0x205, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("77"))},
		wal{0x210, pgoutputmsg.Commit(0x210, 0x218, t0)},
	)
	checkEvents(t, rec.events, []kafkasink.Event{
		ev(kafkasink.OpInsert, "shop", "orders", 0x210, 0, 0x205, 900, userKey, nil, row("id", int64(77))),
	})
	feed(t, d,
		wal{0x300, pgoutputmsg.StreamStart(top, false)},
		wal{0x300, usersV2},
		wal{0x310, pgoutputmsg.Update(sub2, 16384, 0, nil,
			pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Text("b"), pgoutputmsg.Text("1"), pgoutputmsg.Text(`{x,"y z",NULL}`)))},
		wal{0x320, pgoutputmsg.Delete(top, 16384, 'K', pgoutputmsg.Text("1"), pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null())},
		wal{0x330, pgoutputmsg.Truncate(sub2, 0, 16390)},
		wal{0x330, pgoutputmsg.StreamStop()},
		wal{0x400, pgoutputmsg.StreamAbort(top, sub1)},
		wal{0x500, pgoutputmsg.StreamCommit(top, 0x500, 0x540, t0)},
	)
	streamed := []kafkasink.Event{
		ev(kafkasink.OpInsert, "public", "users", 0x500, 0, 0x110, top, userKey, nil,
			row("id", int32(1), "name", "a", "balance", kafkasink.Decimal("1"))),
		ev(kafkasink.OpUpdate, "public", "users", 0x500, 1, 0x310, top, userKey, nil,
			row("id", int32(1), "name", "b", "balance", kafkasink.Decimal("1"), "tags", []any{"x", "y z", nil})),
		ev(kafkasink.OpDelete, "public", "users", 0x500, 2, 0x320, top, userKey, row("id", int32(1)), nil),
		ev(kafkasink.OpTruncate, "shop", "orders", 0x500, 3, 0x330, top, userKey, nil, nil),
	}
	// The streamed transaction commits after the ordinary one, whose
	// commit record ended at 0x218 (Source.PrevCommitEnd).
	for i := range streamed {
		streamed[i].Source.PrevCommitEnd = 0x218
	}
	checkEvents(t, rec.events[1:], streamed)
	wantTxns := []Txn{
		{XID: 900, CommitLSN: 0x210, EndLSN: 0x218, Commit: t0, Events: 1},
		{XID: top, CommitLSN: 0x500, EndLSN: 0x540, Commit: t0, Origin: "upstream", Events: 4, Streamed: true},
	}
	if !reflect.DeepEqual(rec.txns, wantTxns) {
		t.Errorf("txns = %+v\nwant %+v", rec.txns, wantTxns)
	}
	wantMsgs := []Message{{LSN: 0x130, Transactional: true, XID: top, Prefix: "app", Content: []byte("kept")}}
	if !reflect.DeepEqual(rec.msgs, wantMsgs) {
		t.Errorf("messages = %+v, want %+v", rec.msgs, wantMsgs)
	}
	if f := spoolFiles(t, dir); len(f) != 0 {
		t.Errorf("spool files left after commit: %v", f)
	}
	// The streamed Relation message took effect at commit.
	feed(t, d,
		wal{0x600, pgoutputmsg.Begin(0x610, t0, 901)},
		wal{0x600, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("9"), pgoutputmsg.Text("z"), pgoutputmsg.Text("9"), pgoutputmsg.Null())},
		wal{0x610, pgoutputmsg.Commit(0x610, 0x618, t0)},
	)
}

func TestStreamAbort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, rec := newTestDecoder(t, DecoderConfig{SpoolDir: dir})
	feed(t, d,
		wal{0x100, pgoutputmsg.StreamStart(50, true)},
		wal{0x100, pgoutputmsg.Relation(50, 16390, "shop", "orders", 'd', pgoutputmsg.Key("id", pgtype.Int8OID))},
		wal{0x110, pgoutputmsg.Insert(50, 16390, pgoutputmsg.Text("1"))},
		wal{0x120, pgoutputmsg.StreamStop()},
		wal{0x130, pgoutputmsg.StreamStart(60, true)},
		wal{0x130, pgoutputmsg.Insert(60, 16390, pgoutputmsg.Text("2"))},
		wal{0x140, pgoutputmsg.StreamStop()},
	)
	if n := len(spoolFiles(t, dir)); n != 2 {
		t.Fatalf("%d spool files, want 2", n)
	}
	feed(t, d, wal{0x200, pgoutputmsg.StreamAbort(50, 50)})
	if n := len(spoolFiles(t, dir)); n != 1 {
		t.Fatalf("%d spool files after abort, want 1", n)
	}
	// Aborting a transaction never streamed is harmless.
	feed(t, d, wal{0x210, pgoutputmsg.StreamAbort(51, 51)})
	if len(rec.events) != 0 || len(rec.txns) != 0 {
		t.Fatalf("aborted transaction delivered: %+v %+v", rec.events, rec.txns)
	}
	// Transaction 60 never got the Relation message: that one was spooled
	// in the aborted transaction 50 and died with it.
	err := d.Decode(0x300, pgoutputmsg.StreamCommit(60, 0x300, 0x310, t0))
	if err == nil || !strings.Contains(err.Error(), "unknown relation OID 16390") {
		t.Fatalf("err = %v, want unknown relation", err)
	}
	if n := len(spoolFiles(t, dir)); n != 0 {
		t.Fatalf("%d spool files after failed commit, want 0", n)
	}
}

func TestSpoolCleanup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(d *Decoder) error
	}{
		{"Close", (*Decoder).Close},
		{"Reset", (*Decoder).Reset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d, _ := newTestDecoder(t, DecoderConfig{SpoolDir: dir})
			feed(t, d,
				wal{0x100, pgoutputmsg.StreamStart(50, true)},
				wal{0x110, pgoutputmsg.Insert(50, 16390, pgoutputmsg.Text("1"))},
				wal{0x120, pgoutputmsg.StreamStop()},
				wal{0x130, pgoutputmsg.StreamStart(60, true)}, // left open in a stream block
				wal{0x140, pgoutputmsg.Insert(60, 16390, pgoutputmsg.Text("2"))},
			)
			if n := len(spoolFiles(t, dir)); n != 2 {
				t.Fatalf("%d spool files, want 2", n)
			}
			if err := tc.end(d); err != nil {
				t.Fatal(err)
			}
			if f := spoolFiles(t, dir); len(f) != 0 {
				t.Fatalf("spool files left: %v", f)
			}
			if err := tc.end(d); err != nil {
				t.Fatalf("second %s: %v", tc.name, err)
			}
			err := d.Decode(0x200, pgoutputmsg.Begin(0x300, t0, 1))
			if tc.name == "Close" && !errors.Is(err, ErrDecoderClosed) {
				t.Fatalf("Decode after Close = %v, want ErrDecoderClosed", err)
			}
			if tc.name == "Reset" && err != nil {
				t.Fatalf("Decode after Reset = %v", err)
			}
		})
	}
}

// The spool holds at most SpoolMaxBytes, over every streamed transaction
// not yet committed: one that would pass it stops decoding with a
// *kafkasink.ConfigError naming it, and an aborted one gives its bytes back.
func TestSpoolMaxBytes(t *testing.T) {
	t.Parallel()
	record := int64(spoolHeaderLen + len(pgoutputmsg.Insert(50, 16390, pgoutputmsg.Text("1"))))
	spoolTwo := func(xid uint32, at kafkasink.LSN) []wal {
		return []wal{{at, pgoutputmsg.StreamStart(xid, true)}, {at + 0x10, pgoutputmsg.Insert(xid, 16390, pgoutputmsg.Text("1"))},
			{at + 0x20, pgoutputmsg.Insert(xid, 16390, pgoutputmsg.Text("2"))}, {at + 0x30, pgoutputmsg.StreamStop()}}
	}

	d, _ := newTestDecoder(t, DecoderConfig{SpoolMaxBytes: 3 * record})
	feed(t, d, spoolTwo(50, 0x100)...)
	feed(t, d, wal{0x200, pgoutputmsg.StreamStart(60, true)}, wal{0x210, pgoutputmsg.Insert(60, 16390, pgoutputmsg.Text("3"))})
	err := d.Decode(0x220, pgoutputmsg.Insert(60, 16390, pgoutputmsg.Text("4")))
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || !kafkasink.IsFatal(err) || !containsAll(err.Error(), "streamed transaction 60", fmt.Sprintf("SpoolMaxBytes allows (%d bytes; %d are spooled", 3*record, 3*record), "-spool-max-bytes") {
		t.Fatalf("Decode past SpoolMaxBytes = %v, want a fatal *kafkasink.ConfigError naming transaction 60 and the bound", err)
	}

	// An aborted transaction's bytes are free again.
	d, _ = newTestDecoder(t, DecoderConfig{SpoolMaxBytes: 3 * record})
	feed(t, d, spoolTwo(50, 0x100)...)
	feed(t, d, wal{0x180, pgoutputmsg.StreamAbort(50, 50)})
	feed(t, d, spoolTwo(60, 0x200)...)
}

func TestStreamRestartsFromFirstSegment(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	r := pgoutputmsg.Relation(50, 16390, "shop", "orders", 'd', pgoutputmsg.Key("id", pgtype.Int8OID))
	feed(t, d,
		wal{0x100, pgoutputmsg.StreamStart(50, true)},
		wal{0x100, r},
		wal{0x110, pgoutputmsg.Insert(50, 16390, pgoutputmsg.Text("1"))},
		wal{0x120, pgoutputmsg.StreamStop()},
		// The server starts the transaction over: the first spool is stale.
		wal{0x100, pgoutputmsg.StreamStart(50, true)},
		wal{0x100, r},
		wal{0x110, pgoutputmsg.Insert(50, 16390, pgoutputmsg.Text("1"))},
		wal{0x120, pgoutputmsg.StreamStop()},
		wal{0x200, pgoutputmsg.StreamCommit(50, 0x200, 0x210, t0)},
	)
	checkEvents(t, rec.events, []kafkasink.Event{
		ev(kafkasink.OpInsert, "shop", "orders", 0x200, 0, 0x110, 50, userKey, nil, row("id", int64(1))),
	})
}

func TestLogicalMessages(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{ProtocolVersion: 1})
	hb := pgoutputmsg.Logical(0, false, 0x90, "kafkasink.heartbeat", "tick")
	feed(t, d,
		wal{0x90, hb},
		wal{0x100, pgoutputmsg.Begin(0x500, t0, 7)},
		wal{0x100, pgoutputmsg.Origin("node2")},
		wal{0x110, pgoutputmsg.Logical(0, true, 0x110, "app", "")},
		wal{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
	)
	// Content is a copy: the caller may reuse its buffer.
	copy(hb[len(hb)-4:], "XXXX")
	want := []Message{
		{LSN: 0x90, Prefix: "kafkasink.heartbeat", Content: []byte("tick")},
		{LSN: 0x110, Transactional: true, XID: 7, Prefix: "app", Content: []byte{}},
	}
	if !reflect.DeepEqual(rec.msgs, want) {
		t.Errorf("messages = %+v, want %+v", rec.msgs, want)
	}
	if len(rec.events) != 0 {
		t.Errorf("messages became events: %+v", rec.events)
	}
	if len(rec.txns) != 1 || rec.txns[0].Origin != "node2" || rec.txns[0].Events != 0 {
		t.Errorf("txns = %+v", rec.txns)
	}
}

func TestCallbackErrorsReturnedUnchanged(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		cfg  DecoderConfig
		msgs []wal
	}{
		{"OnEvent", DecoderConfig{OnEvent: func(kafkasink.Event) error { return boom }},
			[]wal{{1, pgoutputmsg.Begin(9, t0, 1)}, {2, ordersR}, {3, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("1"))}, {9, pgoutputmsg.Commit(9, 10, t0)}}},
		{"OnCommit", DecoderConfig{OnCommit: func(Txn) error { return boom }},
			[]wal{{1, pgoutputmsg.Begin(9, t0, 1)}, {9, pgoutputmsg.Commit(9, 10, t0)}}},
		{"OnMessage", DecoderConfig{OnMessage: func(Message) error { return boom }},
			[]wal{{1, pgoutputmsg.Logical(0, false, 1, "p", "c")}}},
		{"OnEvent streamed", DecoderConfig{OnEvent: func(kafkasink.Event) error { return boom }},
			[]wal{{1, pgoutputmsg.StreamStart(5, true)}, {2, pgoutputmsg.Relation(5, 16390, "shop", "orders", 'd', pgoutputmsg.Key("id", pgtype.Int8OID))},
				{3, pgoutputmsg.Insert(5, 16390, pgoutputmsg.Text("1"))}, {4, pgoutputmsg.StreamStop()}, {9, pgoutputmsg.StreamCommit(5, 9, 10, t0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			if cfg.OnEvent == nil {
				cfg.OnEvent = func(kafkasink.Event) error { return nil }
			}
			cfg.SpoolDir = t.TempDir()
			d, err := NewDecoder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for _, m := range tc.msgs {
				if err = d.Decode(m.lsn, m.data); err != nil {
					break
				}
			}
			if err != boom {
				t.Fatalf("err = %v, want the callback's error itself", err)
			}
			// The error sticks until Reset.
			if err := d.Decode(20, pgoutputmsg.Logical(0, false, 20, "p", "")); err != boom {
				t.Fatalf("next Decode = %v, want the same error", err)
			}
			if err := d.Reset(); err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(20, pgoutputmsg.Begin(30, t0, 2)); err != nil {
				t.Fatalf("Decode after Reset = %v", err)
			}
		})
	}
}

func TestNewDecoderConfigErrors(t *testing.T) {
	t.Parallel()
	_, err := NewDecoder(DecoderConfig{ProtocolVersion: 3})
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("err = %v, want a ConfigError with two problems", err)
	}
}

func TestMalformed(t *testing.T) {
	t.Parallel()
	open := []wal{{1, pgoutputmsg.Begin(0x500, t0, 7)}, {2, usersR}}
	stream := []wal{{1, pgoutputmsg.StreamStart(5, true)}}
	for _, tc := range []struct {
		name    string
		version int
		before  []wal
		msg     []byte
		want    string
	}{
		{"empty", 2, nil, []byte{}, "empty message"},
		{"unknown type", 2, nil, []byte{'Z', 1, 2}, "unknown message type 'Z'"},
		{"two-phase message", 2, nil, []byte{'P', 1, 2}, "unknown message type 'P'"},
		{"begin too short", 2, nil, pgoutputmsg.Begin(1, t0, 1)[:15], "message too short: commit time needs 8 bytes, 6 left"},
		{"trailing bytes", 2, nil, append(pgoutputmsg.Begin(1, t0, 1), 0), "1 unexpected bytes after the message"},
		{"commit without begin", 2, nil, pgoutputmsg.Commit(1, 2, t0), "commit without begin"},
		{"commit LSN mismatch", 2, open, pgoutputmsg.Commit(0x501, 0x530, t0), "commit LSN 0/501 differs from the final LSN 0/500"},
		{"nested begin", 2, open, pgoutputmsg.Begin(0x600, t0, 8), "transaction 8 begins while transaction 7 is open"},
		{"origin outside", 2, nil, pgoutputmsg.Origin("x"), "origin outside a transaction"},
		{"insert outside", 2, nil, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1")), "change outside a transaction"},
		{"unknown relation", 2, open, pgoutputmsg.Insert(0, 99, pgoutputmsg.Text("1")), "unknown relation OID 99"},
		{"truncate unknown relation", 2, open, pgoutputmsg.Truncate(0, 0, 16384, 99), "unknown relation OID 99"},
		{"column count", 2, open, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1")), "tuple has 1 columns, relation public.users (OID 16384) has 3"},
		{"bad int", 2, open, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("x"), pgoutputmsg.Text("a"), pgoutputmsg.Text("1")),
			`column "id" of public.users (OID 16384): value of type int4 does not parse: invalid syntax`},
		{"int out of range", 2, open, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("2147483648"), pgoutputmsg.Text("a"), pgoutputmsg.Text("1")), "value out of range"},
		{"bad numeric", 2, open, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Text("a"), pgoutputmsg.Text("1e5")), `column "balance"`},
		{"unknown tuple kind", 2, open, []byte{'I', 0, 0, 0x40, 0, 'N', 0, 1, 'x'}, "new tuple column 0 has unknown kind 'x'"},
		{"column runs past end", 2, open, []byte{'I', 0, 0, 0x40, 0, 'N', 0, 1, 't', 0, 0, 0, 9, 'a'}, "new tuple column 0 is 9 bytes long, 1 left"},
		{"huge column length", 2, open, []byte{'I', 0, 0, 0x40, 0, 'N', 0, 1, 't', 0xff, 0xff, 0xff, 0xff}, "4294967295 bytes long"},
		{"insert without N", 2, open, []byte{'I', 0, 0, 0x40, 0, 'K', 0, 0}, `new tuple marker is 'K', want 'N'`},
		{"update bad marker", 2, open, []byte{'U', 0, 0, 0x40, 0, 'X'}, "tuple marker must be K, O or N"},
		{"update old without new", 2, open,
			append(pgoutputmsg.Message('U').Uint32(16384).Uint8('K').Tuple(pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Null(), pgoutputmsg.Null())).Bytes(), 'X'),
			`new tuple marker is 'X', want 'N'`},
		{"delete bad marker", 2, open, []byte{'D', 0, 0, 0x40, 0, 'N', 0, 0}, "old tuple marker must be K or O"},
		{"delete too short", 2, open, []byte{'D', 0, 0, 0x40, 0}, "old tuple marker needs 1 bytes, 0 left"},
		{"truncate count", 2, open, []byte{'T', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x40, 0}, "relation count 4294967295 needs"},
		{"relation name unterminated", 2, nil, []byte{'R', 0, 0, 0, 1, 'p', 0, 'x'}, "relation name is not NUL-terminated"},
		{"relation columns missing", 2, nil, pgoutputmsg.Relation(0, 1, "s", "t", 'd', pgoutputmsg.Key("a", 23))[:20], "message too short"},
		{"relation bad identity", 2, nil, pgoutputmsg.Relation(0, 1, "s", "t", 'x'), "unknown replica identity 'x'"},
		{"message bad flags", 2, nil, []byte{'M', 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "flags 2: want 0 or 1"},
		{"message content too long", 2, nil, []byte{'M', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}, "content needs 5 bytes, 0 left"},
		{"transactional message outside", 2, nil, pgoutputmsg.Logical(0, true, 1, "p", ""), "transactional message outside a transaction"},
		{"stream in v1", 1, nil, pgoutputmsg.StreamStart(5, true), "stream messages need protocol version 2"},
		{"stream stop outside", 2, nil, pgoutputmsg.StreamStop(), "stream stop outside a stream"},
		{"stream continues without first", 2, nil, pgoutputmsg.StreamStart(5, false), "first segment was never received"},
		{"nested stream", 2, stream, pgoutputmsg.StreamStart(6, true), "stream of transaction 6 starts inside the stream of transaction 5"},
		{"stream in transaction", 2, open, pgoutputmsg.StreamStart(6, true), "starts while transaction 7 is open"},
		{"stream commit inside stream", 2, stream, pgoutputmsg.StreamCommit(5, 1, 2, t0), "inside the stream of transaction 5"},
		{"stream commit never streamed", 2, nil, pgoutputmsg.StreamCommit(5, 1, 2, t0), "which was never streamed"},
		{"begin inside stream", 2, stream, pgoutputmsg.Begin(1, t0, 1), "transaction 1 begins inside the stream of transaction 5"},
		{"commit inside stream", 2, stream, pgoutputmsg.Commit(1, 2, t0), "commit inside the stream of transaction 5"},
		{"in-stream insert without xid", 2, stream, pgoutputmsg.Insert(0, 16384), "message too short"},
		{"first segment flag", 2, nil, []byte{'S', 0, 0, 0, 5, 7}, "first segment flag 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, _ := newTestDecoder(t, DecoderConfig{ProtocolVersion: tc.version})
			feed(t, d, tc.before...)
			err := d.Decode(0x777, tc.msg)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v (%T), want a *DecodeError", err, err)
			}
			if de.LSN != 0x777 {
				t.Errorf("DecodeError.LSN = %s, want 0/777", de.LSN)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
			if again := d.Decode(0x778, pgoutputmsg.Begin(1, t0, 1)); again != err {
				t.Errorf("Decode after error = %v, want the same error", again)
			}
		})
	}
}

// TestChangeInStreamNeedsSpool pins that streamed changes are decoded only at
// commit, and that a DecodeError then names the spooled change's own LSN.
func TestChangeInStreamNeedsSpool(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	feed(t, d,
		wal{1, pgoutputmsg.StreamStart(5, true)},
		wal{2, pgoutputmsg.Insert(5, 16384, pgoutputmsg.Text("1"))}, // relation unknown: found only at commit
		wal{3, pgoutputmsg.StreamStop()},
	)
	if len(rec.events) != 0 {
		t.Fatal("streamed change delivered before commit")
	}
	err := d.Decode(9, pgoutputmsg.StreamCommit(5, 9, 10, t0))
	var de *DecodeError
	if !errors.As(err, &de) || de.LSN != 2 || !strings.Contains(err.Error(), "unknown relation OID 16384") {
		t.Fatalf("err = %v, want the spooled change's DecodeError at 0/2", err)
	}
}

func TestEventKeyIsNotAliased(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	feed(t, d,
		wal{1, pgoutputmsg.Begin(9, t0, 1)},
		wal{2, usersR},
		wal{3, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Null(), pgoutputmsg.Null())},
		wal{4, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("2"), pgoutputmsg.Null(), pgoutputmsg.Null())},
		wal{9, pgoutputmsg.Commit(9, 10, t0)}, // delivers the last event
	)
	k := append(rec.events[0].Key, "extra")
	k[0] = "changed"
	if got := rec.events[1].Key; !reflect.DeepEqual(got, []string{"id"}) {
		t.Fatalf("appending to one event's Key changed another's: %v", got)
	}
}

func TestBinaryTuple(t *testing.T) {
	t.Parallel()
	m := pgtype.NewMap()
	encode := func(oid uint32, v any) pgoutputmsg.Value {
		t.Helper()
		b, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatalf("encode %d: %v", oid, err)
		}
		return pgoutputmsg.Binary(b)
	}
	var num pgtype.Numeric
	if err := num.Scan("12345678901234567890.000001"); err != nil {
		t.Fatal(err)
	}
	cols := []pgoutputmsg.Column{
		pgoutputmsg.Key("i4", pgtype.Int4OID), pgoutputmsg.Col("num", pgtype.NumericOID), pgoutputmsg.Col("tz", pgtype.TimestamptzOID),
		pgoutputmsg.Col("ts", pgtype.TimestampOID), pgoutputmsg.Col("d", pgtype.DateOID), pgoutputmsg.Col("u", pgtype.UUIDOID),
		pgoutputmsg.Col("arr", pgtype.Int8ArrayOID), pgoutputmsg.Col("jb", pgtype.JSONBOID), pgoutputmsg.Col("by", pgtype.ByteaOID),
		pgoutputmsg.Col("f8", pgtype.Float8OID), pgoutputmsg.Col("txt", pgtype.TextOID), pgoutputmsg.Col("mood", 50000),
	}
	ts := time.Date(2024, 2, 29, 23, 59, 58, 500000000, time.UTC)
	d, rec := newTestDecoder(t, DecoderConfig{})
	feed(t, d,
		wal{1, pgoutputmsg.Begin(9, t0, 1)},
		wal{2, pgoutputmsg.Relation(0, 1, "s", "t", 'd', cols...)},
		wal{2, pgoutputmsg.Type(0, 50000, "public", "mood")},
		wal{3, pgoutputmsg.Insert(0, 1,
			encode(pgtype.Int4OID, int32(-5)),
			encode(pgtype.NumericOID, num),
			encode(pgtype.TimestamptzOID, ts.In(time.FixedZone("", 3600))),
			encode(pgtype.TimestampOID, ts),
			encode(pgtype.DateOID, ts),
			encode(pgtype.UUIDOID, [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}),
			encode(pgtype.Int8ArrayOID, []any{int64(1), nil, int64(3)}),
			pgoutputmsg.Binary(append([]byte{1}, `{"b":1,"a":2.50}`...)),
			encode(pgtype.ByteaOID, []byte{0, 1, 0xff}),
			encode(pgtype.Float8OID, math.Inf(1)),
			encode(pgtype.TextOID, "héllo"),
			pgoutputmsg.Binary([]byte{0xde, 0xad}),
		)},
		wal{9, pgoutputmsg.Commit(9, 10, t0)},
	)
	want := row("i4", int32(-5), "num", kafkasink.Decimal("12345678901234567890.000001"), "tz", ts,
		"ts", "2024-02-29T23:59:58.5", "d", "2024-02-29", "u", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"arr", []any{int64(1), nil, int64(3)}, "jb", json.RawMessage(`{"b":1,"a":2.50}`), "by", []byte{0, 1, 0xff},
		"f8", math.Inf(1), "txt", "héllo", "mood", []byte{0xde, 0xad})
	if len(rec.events) != 1 {
		t.Fatalf("%d events, want 1", len(rec.events))
	}
	got := rec.events[0].After
	for i := range want {
		if i >= len(got) || !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("column %d: got %#v, want %#v", i, got[min(i, len(got)-1)], want[i])
		}
	}
	// A binary value that does not decode for its type is an error.
	feed(t, d, wal{11, pgoutputmsg.Begin(19, t0, 2)})
	err := d.Decode(12, pgoutputmsg.Insert(0, 1,
		pgoutputmsg.Binary([]byte{1, 2}), pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null(),
		pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null(), pgoutputmsg.Null()))
	if err == nil || !strings.Contains(err.Error(), `column "i4"`) {
		t.Fatalf("err = %v, want a DecodeError for column i4", err)
	}
}

func TestDecodeReusesNoInput(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	ins := pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Text("abc"), pgoutputmsg.Text("2"))
	feed(t, d, wal{1, pgoutputmsg.Begin(9, t0, 1)}, wal{2, usersR}, wal{3, ins})
	for i := range ins {
		ins[i] = 0
	}
	feed(t, d, wal{9, pgoutputmsg.Commit(9, 10, t0)}) // delivers the event
	if !bytes.Equal([]byte(rec.events[0].After[1].Value.(string)), []byte("abc")) {
		t.Fatal("event aliases the input buffer")
	}
}

// frame joins messages for FuzzDecode: each is preceded by its length in two
// bytes, so one fuzz input is a whole conversation with the decoder.
func frame(msgs ...[]byte) []byte {
	var out []byte
	for _, m := range msgs {
		out = binary.BigEndian.AppendUint16(out, uint16(len(m)))
		out = append(out, m...)
	}
	return out
}

// fuzzR describes relation 1 with a column of every converted type, so that
// fuzzed tuples reach the value parsers.
var fuzzR = pgoutputmsg.Relation(0, 1, "s", "t", 'd',
	pgoutputmsg.Key("b", pgtype.BoolOID), pgoutputmsg.Col("i2", pgtype.Int2OID), pgoutputmsg.Col("i4", pgtype.Int4OID),
	pgoutputmsg.Col("i8", pgtype.Int8OID), pgoutputmsg.Col("o", pgtype.OIDOID), pgoutputmsg.Col("f4", pgtype.Float4OID),
	pgoutputmsg.Col("f8", pgtype.Float8OID), pgoutputmsg.Col("n", pgtype.NumericOID), pgoutputmsg.Col("t", pgtype.TextOID),
	pgoutputmsg.Col("u", pgtype.UUIDOID), pgoutputmsg.Col("j", pgtype.JSONBOID), pgoutputmsg.Col("by", pgtype.ByteaOID),
	pgoutputmsg.Col("d", pgtype.DateOID), pgoutputmsg.Col("ts", pgtype.TimestampOID), pgoutputmsg.Col("tz", pgtype.TimestamptzOID),
	pgoutputmsg.Col("ai", pgtype.Int4ArrayOID), pgoutputmsg.Col("at", pgtype.TextArrayOID), pgoutputmsg.Col("e", 50000))

func FuzzDecode(f *testing.F) {
	row := pgoutputmsg.Tuple(pgoutputmsg.Text("t"), pgoutputmsg.Text("1"), pgoutputmsg.Text("2"), pgoutputmsg.Text("3"),
		pgoutputmsg.Text("4"), pgoutputmsg.Text("1.5"), pgoutputmsg.Text("NaN"), pgoutputmsg.Text("1.20"), pgoutputmsg.Text("x"),
		pgoutputmsg.Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), pgoutputmsg.Text(`{"a":1}`), pgoutputmsg.Text(`\x00`), pgoutputmsg.Text("2024-01-01"),
		pgoutputmsg.Text("2024-01-01 00:00:00"), pgoutputmsg.Text("2024-01-01 00:00:00+00"), pgoutputmsg.Text("{{1,2},{3,NULL}}"),
		pgoutputmsg.Text(`{"a",b}`), pgoutputmsg.Text("happy"))
	bins := pgoutputmsg.Tuple(pgoutputmsg.Binary([]byte{1}), pgoutputmsg.Binary([]byte{0, 1}), pgoutputmsg.Binary([]byte{0, 0, 0, 2}),
		pgoutputmsg.Binary(make([]byte, 8)), pgoutputmsg.Binary([]byte{0, 0, 0, 4}), pgoutputmsg.Binary([]byte{0x3f, 0xc0, 0, 0}),
		pgoutputmsg.Binary(make([]byte, 8)), pgoutputmsg.Binary([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1}), pgoutputmsg.Binary([]byte("x")),
		pgoutputmsg.Binary(make([]byte, 16)), pgoutputmsg.Binary([]byte("\x01{}")), pgoutputmsg.Binary([]byte{9}),
		pgoutputmsg.Binary(make([]byte, 4)), pgoutputmsg.Binary(make([]byte, 8)), pgoutputmsg.Binary(make([]byte, 8)),
		pgoutputmsg.Binary([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7}),
		pgoutputmsg.Null(), pgoutputmsg.Toast())
	seeds := [][][]byte{
		{pgoutputmsg.Begin(9, t0, 1), pgoutputmsg.Insert(0, 1, row...), pgoutputmsg.Update(0, 1, 'K', row, row),
			pgoutputmsg.Delete(0, 1, 'O', row...), pgoutputmsg.Truncate(0, 0, 1), pgoutputmsg.Commit(9, 10, t0)},
		{pgoutputmsg.Begin(9, t0, 1), pgoutputmsg.Insert(0, 1, bins...), pgoutputmsg.Commit(9, 10, t0)},
		{pgoutputmsg.StreamStart(5, true), pgoutputmsg.Origin("o"), pgoutputmsg.Relation(5, 2, "s", "u", 'f', pgoutputmsg.Key("a", pgtype.TextOID)),
			pgoutputmsg.Insert(6, 2, pgoutputmsg.Text("a")), pgoutputmsg.Logical(6, true, 3, "p", "c"), pgoutputmsg.StreamStop(), pgoutputmsg.StreamAbort(5, 6),
			pgoutputmsg.StreamStart(5, false), pgoutputmsg.Insert(5, 2, pgoutputmsg.Text("b")), pgoutputmsg.StreamStop(), pgoutputmsg.StreamCommit(5, 20, 21, t0)},
		{pgoutputmsg.StreamStart(5, true), pgoutputmsg.Insert(5, 1, row...), pgoutputmsg.StreamStop(), pgoutputmsg.StreamAbort(5, 5)},
		{pgoutputmsg.Logical(0, false, 1, "kafkasink.heartbeat", ""), pgoutputmsg.Type(0, 50000, "public", "mood")},
	}
	for _, s := range seeds {
		f.Add(frame(s...), uint8(2))
	}
	f.Add(frame(pgoutputmsg.Begin(9, t0, 1), pgoutputmsg.Insert(0, 1, row...), pgoutputmsg.Commit(9, 10, t0)), uint8(1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, version uint8) {
		var last kafkasink.Position
		d, err := NewDecoder(DecoderConfig{
			ProtocolVersion: 1 + int(version%2),
			SpoolDir:        dir,
			KeyColumns:      kafkasink.TableKeys{"s.u": {"a"}},
			OnEvent: func(ev kafkasink.Event) error {
				if !ev.Op.Valid() {
					t.Fatalf("event with invalid op: %+v", ev)
				}
				if ev.Position.LSN == last.LSN && ev.Position.Index != last.Index+1 && ev.Position.Index != 0 {
					t.Fatalf("position %s follows %s", ev.Position, last)
				}
				last = ev.Position
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Decode(0, fuzzR); err != nil {
			t.Fatal(err)
		}
		lsn := kafkasink.LSN(1)
		for len(data) >= 2 {
			n := min(int(binary.BigEndian.Uint16(data)), len(data)-2)
			m := data[2 : 2+n]
			data = data[2+n:]
			if err := d.Decode(lsn, m); err != nil {
				var de *DecodeError
				if !errors.As(err, &de) && !strings.Contains(err.Error(), "spool") {
					t.Fatalf("error neither a DecodeError nor a spool failure: %v", err)
				}
				if err := d.Reset(); err != nil {
					t.Fatal(err)
				}
				if err := d.Decode(0, fuzzR); err != nil {
					t.Fatal(err)
				}
			}
			lsn++
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("spool files left after Close: %d", len(left))
		}
	})
}

func BenchmarkDecodeInsert(b *testing.B) {
	d, err := NewDecoder(DecoderConfig{OnEvent: func(kafkasink.Event) error { return nil }, SpoolDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.Decode(1, usersR); err != nil {
		b.Fatal(err)
	}
	if err := d.Decode(1, pgoutputmsg.Begin(1<<40, t0, 1)); err != nil {
		b.Fatal(err)
	}
	ins := pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("123456"), pgoutputmsg.Text("a name of some length"), pgoutputmsg.Text("1234.56"))
	b.ReportAllocs()
	b.SetBytes(int64(len(ins)))
	for i := 0; b.Loop(); i++ {
		if err := d.Decode(kafkasink.LSN(i), ins); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRepeatedRelationMessageKeepsRelation: pgoutput sends a Relation
// message again after any invalidation, not only after the table changed
// (TestEventRelation met it when another test changed a publication).
// An identical description keeps the events' *Relation; a changed one
// gives a new one.
func TestRepeatedRelationMessageKeepsRelation(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	widened := pgoutputmsg.Relation(0, 16390, "shop", "orders", 'd', pgoutputmsg.Key("id", pgtype.Int8OID), pgoutputmsg.Col("note", pgtype.TextOID))
	feed(t, d,
		wal{0x100, pgoutputmsg.Begin(0x110, t0, 1)}, wal{0x100, ordersR},
		wal{0x105, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("1"))}, wal{0x110, pgoutputmsg.Commit(0x110, 0x118, t0)},
		wal{0x200, pgoutputmsg.Begin(0x210, t0, 2)}, wal{0x200, ordersR},
		wal{0x205, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("2"))}, wal{0x210, pgoutputmsg.Commit(0x210, 0x218, t0)},
		wal{0x300, pgoutputmsg.Begin(0x310, t0, 3)}, wal{0x300, widened},
		wal{0x305, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("3"), pgoutputmsg.Text("x"))}, wal{0x310, pgoutputmsg.Commit(0x310, 0x318, t0)},
	)
	if len(rec.events) != 3 {
		t.Fatalf("%d events, want 3", len(rec.events))
	}
	if rec.events[0].Relation == nil || rec.events[0].Relation != rec.events[1].Relation {
		t.Errorf("a repeated identical Relation message gave a new *Relation (%p, %p); want the same", rec.events[0].Relation, rec.events[1].Relation)
	}
	if rec.events[2].Relation == rec.events[1].Relation || len(rec.events[2].Relation.Columns) != 2 {
		t.Errorf("the widened table's event carries the old Relation")
	}
}

// TestDecodeTxnPlace: with DecoderConfig.Counted leaving TRUNCATEs out,
// Event.Txn counts the other events only, in all and per table, while
// the first and last events are those delivered, counted or not; a
// transactional message stays in its place among the events although
// each event waits for the next change or the commit; and a streamed
// transaction is placed the same way.
func TestDecodeTxnPlace(t *testing.T) {
	t.Parallel()
	var log []string
	cfg := DecoderConfig{
		Counted: func(e *kafkasink.Event) bool { return e.Op != kafkasink.OpTruncate },
		OnEvent: func(e kafkasink.Event) error {
			end := ""
			if s := e.Txn.End; s != nil {
				end = fmt.Sprintf(" end=%s/%d%v", s.CommitEnd, s.Events, s.Tables)
			}
			log = append(log, fmt.Sprintf("%s %s.%s order=%d/%d first=%t%s", e.Op, e.Schema, e.Table, e.Txn.Order, e.Txn.TableOrder, e.Txn.First, end))
			return nil
		},
		OnMessage: func(m Message) error { log = append(log, "message "+string(m.Content)); return nil },
		OnCommit:  func(tx Txn) error { log = append(log, fmt.Sprintf("commit %d events", tx.Events)); return nil },
		SpoolDir:  t.TempDir(),
	}
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	feed(t, d,
		wal{0x100, pgoutputmsg.Begin(0x500, t0, 700)},
		wal{0x100, usersR},
		wal{0x100, ordersR},
		wal{0x105, pgoutputmsg.Truncate(0, 0, 16390)},
		wal{0x110, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Text("ann"), pgoutputmsg.Text("1"))},
		wal{0x115, pgoutputmsg.Logical(0, true, 0x115, "app", "between")},
		wal{0x120, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("7"))},
		wal{0x130, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("2"), pgoutputmsg.Text("bob"), pgoutputmsg.Text("2"))},
		wal{0x140, pgoutputmsg.Truncate(0, 0, 16384)},
		wal{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
		// Streamed: the same places, made at the replay.
		wal{0x600, pgoutputmsg.StreamStart(800, true)},
		wal{0x600, usersR},
		wal{0x610, pgoutputmsg.Insert(800, 16384, pgoutputmsg.Text("3"), pgoutputmsg.Text("cy"), pgoutputmsg.Text("3"))},
		wal{0x620, pgoutputmsg.Insert(800, 16384, pgoutputmsg.Text("4"), pgoutputmsg.Text("di"), pgoutputmsg.Text("4"))},
		wal{0x620, pgoutputmsg.StreamStop()},
		wal{0x700, pgoutputmsg.StreamCommit(800, 0x700, 0x730, t0)},
	)
	want := []string{
		"truncate shop.orders order=0/0 first=true",
		"insert public.users order=1/1 first=false",
		"message between",
		"insert shop.orders order=2/1 first=false",
		"insert public.users order=3/2 first=false",
		"truncate public.users order=0/0 first=false end=0/530/3[{public users 2} {shop orders 1}]",
		"commit 5 events",
		"insert public.users order=1/1 first=true",
		"insert public.users order=2/2 first=false end=0/730/2[{public users 2}]",
		"commit 2 events",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

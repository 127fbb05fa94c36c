package pgoutput

import (
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// TestIndexMessage: a transactional message IndexMessage picks takes the
// next index among its transaction's events, after the event before it
// and before the one after it; a message it does not pick takes none,
// and Txn.Events and Event.Txn.First count events only.
func TestIndexMessage(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{IndexMessage: func(prefix string) bool { return prefix == "outbox" }})
	feed(t, d,
		wal{0x100, pgoutputmsg.Begin(0x500, t0, 7)},
		wal{0x100, ordersR},
		wal{0x105, pgoutputmsg.Logical(0, true, 0x105, "outbox", "first")},
		wal{0x110, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("1"))},
		wal{0x115, pgoutputmsg.Logical(0, true, 0x115, "other", "not indexed")},
		wal{0x120, pgoutputmsg.Logical(0, true, 0x120, "outbox", "second")},
		wal{0x130, pgoutputmsg.Insert(0, 16390, pgoutputmsg.Text("2"))},
		wal{0x500, pgoutputmsg.Commit(0x500, 0x530, t0)},
	)
	if len(rec.events) != 2 || len(rec.msgs) != 3 {
		t.Fatalf("%d events and %d messages, want 2 and 3", len(rec.events), len(rec.msgs))
	}
	want := []kafkasink.Position{{LSN: 0x500, Index: 0}, {}, {LSN: 0x500, Index: 2}}
	for i, m := range rec.msgs {
		if m.Position != want[i] {
			t.Errorf("message %q at %s, want %s", m.Content, m.Position, want[i])
		}
	}
	for i, idx := range []uint64{1, 3} {
		e := rec.events[i]
		if e.Position != (kafkasink.Position{LSN: 0x500, Index: idx}) {
			t.Errorf("event %d at %s, want index %d", i, e.Position, idx)
		}
		if e.Txn.First != (i == 0) {
			t.Errorf("event %d: Txn.First %v", i, e.Txn.First)
		}
	}
	if len(rec.txns) != 1 || rec.txns[0].Events != 2 {
		t.Errorf("txns = %+v, want one with 2 events", rec.txns)
	}
}

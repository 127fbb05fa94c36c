package pgcdc

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// newTestSession returns a session without a connection whose handed-over
// batches collect in a buffered channel.
func newTestSession(t *testing.T, maxEvents int) *session {
	t.Helper()
	cfg := Config{BatchMaxEvents: maxEvents, BatchMaxWait: time.Hour, StandbyInterval: time.Hour}.withDefaults()
	s := &session{
		cfg: &cfg, ctx: context.Background(), log: cfg.Logger,
		cur:     &batch{},
		timer:   time.NewTimer(time.Hour),
		standby: time.NewTicker(time.Hour),
		batches: make(chan *batch, 100),
		wrote:   make(chan struct{}, 1),
		werr:    make(chan error, 1),
	}
	s.timer.Stop()
	t.Cleanup(s.standby.Stop)
	dec, err := NewDecoder(DecoderConfig{OnEvent: s.onEvent, OnCommit: s.onCommit, OnMessage: s.onMessage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dec.Close() })
	s.dec = dec
	return s
}

func xlog(walStart kafkasink.LSN, data []byte) []byte {
	b := []byte{'w'}
	b = binary.BigEndian.AppendUint64(b, uint64(walStart))
	b = binary.BigEndian.AppendUint64(b, uint64(walStart))
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, data...)
}

func keepalive(walEnd kafkasink.LSN) []byte {
	b := []byte{'k'}
	b = binary.BigEndian.AppendUint64(b, uint64(walEnd))
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, 0)
}

// TestSessionConfirmRules pins when a batch may confirm an LSN: at the end
// of a transaction, never in the middle of a split one, and at a keepalive
// or heartbeat only between transactions.
func TestSessionConfirmRules(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, 10)
	feed := func(lsn kafkasink.LSN, data []byte) {
		t.Helper()
		if err := s.handle(xlog(lsn, data)); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(walEnd kafkasink.LSN) {
		t.Helper()
		if err := s.handle(keepalive(walEnd)); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1767225600, 0)
	rel := pgoutputmsg.Relation(0, 1, "public", "items", 'd', pgoutputmsg.Key("id", pgtype.Int4OID))

	// A transaction of 25 events with a keepalive and a heartbeat inside:
	// two full batches confirm nothing.
	feed(0x100, pgoutputmsg.Begin(0x900, t0, 7))
	feed(0x100, rel)
	for i := range 25 {
		feed(kafkasink.LSN(0x200+i), pgoutputmsg.Insert(0, 1, pgoutputmsg.Text("1")))
		if i == 12 {
			kept(0x5000)
			feed(0x300, pgoutputmsg.Logical(0, false, 0x300, heartbeatPrefix, ""))
		}
	}
	feed(0x900, pgoutputmsg.Commit(0x900, 0x950, t0))
	if got := len(s.batches); got != 2 {
		t.Fatalf("%d batches handed over, want 2", got)
	}
	for i := range 2 {
		b := <-s.batches
		if len(b.events) != 10 || b.confirm != 0 {
			t.Errorf("part %d of the split transaction: %d events, confirm %s; want 10 events, confirm 0", i, len(b.events), b.confirm)
		}
	}
	if len(s.cur.events) != 5 || s.cur.confirm != 0x950 {
		t.Errorf("last part: %d events, confirm %s; want 5, the transaction's end 0/950", len(s.cur.events), s.cur.confirm)
	}

	// Between transactions, a keepalive and a heartbeat move it on.
	kept(0x1000)
	if s.cur.confirm != 0x1000 {
		t.Errorf("confirm after a keepalive between transactions = %s, want 0/1000", s.cur.confirm)
	}
	feed(0x1100, pgoutputmsg.Logical(0, false, 0x1100, heartbeatPrefix, ""))
	if s.cur.confirm != 0x1100 {
		t.Errorf("confirm after a heartbeat = %s, want 0/1100", s.cur.confirm)
	}
	feed(0x1200, pgoutputmsg.Logical(0, false, 0x1200, "other.prefix", ""))
	kept(0x1050) // never backwards
	if s.cur.confirm != 0x1100 {
		t.Errorf("confirm after another prefix and an older keepalive = %s, want 0/1100", s.cur.confirm)
	}

	// Inside a stream block nothing moves it.
	feed(0x2000, pgoutputmsg.StreamStart(9, true))
	kept(0x3000)
	feed(0x2001, pgoutputmsg.Logical(0, false, 0x2001, heartbeatPrefix, ""))
	if s.cur.confirm != 0x1100 {
		t.Errorf("confirm inside a stream block = %s, want 0/1100", s.cur.confirm)
	}
	feed(0x2002, pgoutputmsg.Relation(9, 1, "public", "items", 'd', pgoutputmsg.Key("id", pgtype.Int4OID)))
	feed(0x2003, pgoutputmsg.Truncate(9, 0, 1))
	feed(0x2004, pgoutputmsg.StreamStop())
	feed(0x2100, pgoutputmsg.StreamCommit(9, 0x2100, 0x2150, t0))
	if last := s.cur.events[len(s.cur.events)-1]; last.Op != kafkasink.OpTruncate {
		t.Errorf("last event %v, want the streamed truncate", last.Op)
	}
	if s.cur.confirm != 0x2150 {
		t.Errorf("confirm after the streamed commit = %s, want 0/2150", s.cur.confirm)
	}
}

func TestBatchMaxBytes(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, 1000)
	ev := kafkasink.Event{Op: kafkasink.OpInsert, Table: "t", After: kafkasink.Row{{Name: "v", Value: string(make([]byte, 700))}}}
	var three batch
	for range 3 {
		three.add(ev)
	}
	s.cfg.BatchMaxBytes = three.bytes // the first batch reaches it with its third event
	for range 5 {
		if err := s.onEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.batches) == 0 {
		t.Fatal("no batch handed over")
	}
	if b := <-s.batches; len(b.events) != 3 || b.bytes < s.cfg.BatchMaxBytes {
		t.Errorf("first batch: %d events of %d bytes, want 3 events reaching %d bytes", len(b.events), b.bytes, s.cfg.BatchMaxBytes)
	}
}

// TestBatchDue pins when a batch may go to the writer: with BatchMaxWait
// zero (the default) as soon as it has content, so that the writer takes
// it the moment it is free; with a positive BatchMaxWait only once the
// timer fired.
func TestBatchDue(t *testing.T) {
	t.Parallel()
	ev := kafkasink.Event{Op: kafkasink.OpInsert, Table: "t", After: kafkasink.Row{{Name: "v", Value: "x"}}}
	for _, tt := range []struct {
		wait       time.Duration
		due, armed bool
	}{
		{0, true, false},
		{time.Hour, false, true},
	} {
		s := newTestSession(t, 10)
		s.cfg.BatchMaxWait = tt.wait
		if s.cur.due || s.armed {
			t.Fatalf("BatchMaxWait %v: an empty batch is due=%v armed=%v", tt.wait, s.cur.due, s.armed)
		}
		if err := s.onEvent(ev); err != nil {
			t.Fatal(err)
		}
		if s.cur.due != tt.due || s.armed != tt.armed {
			t.Errorf("BatchMaxWait %v: after one event due=%v armed=%v, want due=%v armed=%v", tt.wait, s.cur.due, s.armed, tt.due, tt.armed)
		}
		// A confirmable LSN alone (an idle slot's keepalive) makes a
		// batch due the same way.
		s.next()
		s.advance(0x100)
		if s.cur.due != tt.due || s.armed != tt.armed {
			t.Errorf("BatchMaxWait %v: after a keepalive due=%v armed=%v, want due=%v armed=%v", tt.wait, s.cur.due, s.armed, tt.due, tt.armed)
		}
	}
}

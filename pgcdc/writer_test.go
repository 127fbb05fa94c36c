package pgcdc

import (
	"context"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestWriterRecordsConfirmedFirst pins what the writer lets the loop
// confirm: only positions the checkpoint's cursor records, a position
// without events after a cursor-only Write, at most once per tick, and
// redelivered events as such a position.
func TestWriterRecordsConfirmedFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sink := kafkasinktest.NewRecorder(kafkasink.Checkpoint{})
	// cursorOnlyWrites counts the Writes without events.
	cursorOnlyWrites := func() int {
		n := 0
		for _, b := range sink.Batches() {
			if len(b.Events) == 0 {
				n++
			}
		}
		return n
	}
	const tick = 300 * time.Millisecond
	cfg := Config{HeartbeatInterval: tick}.withDefaults()
	s := &session{cfg: &cfg, sink: sink, log: cfg.Logger, batches: make(chan *batch),
		wrote: make(chan struct{}, 1), werr: make(chan error, 1), ck: &checkpointer{cfg: &cfg, log: cfg.Logger, sink: sink}}
	done := make(chan struct{})
	go func() { defer close(done); s.writer(ctx, ctx) }()
	defer func() { close(s.batches); <-done }()

	ev := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "w", Position: kafkasink.Position{LSN: 0x100}}
	send := func(b *batch) {
		t.Helper()
		select {
		case s.batches <- b:
		case err := <-s.werr:
			t.Fatal(err)
		}
	}
	// expect waits for the writer to have taken the next batch, then
	// checks what is confirmable and what the checkpoint records.
	expect := func(written, recorded kafkasink.LSN, cursorOnly int) {
		t.Helper()
		send(&batch{}) // a batch with nothing: the previous one is done
		if got := kafkasink.LSN(s.written.Load()); got != written {
			t.Errorf("confirmable %s, want %s", got, written)
		}
		c, err := parseRunCursor(sink.Checkpoint().Cursor)
		if err != nil {
			t.Fatal(err)
		}
		if got := cursorOnlyWrites(); kafkasink.LSN(c.Confirmed) != recorded || got != cursorOnly {
			t.Errorf("checkpoint records %s after %d cursor-only Writes, want %s after %d", kafkasink.LSN(c.Confirmed), got, recorded, cursorOnly)
		}
	}

	send(&batch{events: []kafkasink.Event{ev}, confirm: 0x150})
	expect(0x150, 0x150, 0)
	// An idle position right after a Write waits for the tick.
	send(&batch{confirm: 0x200})
	expect(0x150, 0x150, 0)
	time.Sleep(tick)
	send(&batch{confirm: 0x250})
	expect(0x250, 0x250, 1)
	// Redelivered events are not written again; their position is
	// recorded like an idle one.
	time.Sleep(tick)
	send(&batch{events: []kafkasink.Event{ev}, confirm: 0x300})
	expect(0x300, 0x300, 2)
	if got := sink.Checkpoint().Position; got != ev.Position {
		t.Errorf("checkpoint position %s, want %s", got, ev.Position)
	}
}

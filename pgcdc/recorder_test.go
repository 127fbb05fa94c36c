package pgcdc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// Run's wiring without Kafka: it writes into a kafkasinktest.Recorder.

// A retryable Write error makes Run write the same batch again: every
// change reaches the sink once, in commit order.
func TestRunRewritesBatchAfterRetryableWriteError(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	rec := kafkasinktest.NewRecorder(kafkasink.Checkpoint{})
	rec.FailWrite(1, kafkasinktest.ErrRetryable)
	_, r := start(t, e.config("public."+table), rec)
	waitFor(t, 20*time.Second, "replication to start", r, e.streaming)
	for id := 1; id <= 5; id++ {
		e.exec("INSERT INTO "+table+" (id, seq, note) VALUES ($1, $2, 'row')", id, id)
	}
	waitFor(t, 20*time.Second, "five inserts in the recorder", r, func() bool { return len(rec.Events()) >= 5 })

	events := rec.Events()
	if len(events) != 5 {
		t.Fatalf("%d events recorded, want 5", len(events))
	}
	for i, ev := range events {
		if ev.Op != kafkasink.OpInsert || ev.Table != table || ev.After[0].Value != int32(i+1) {
			t.Errorf("event %d: %s of %s, after %v; want the insert of id %d", i, ev.Op, ev.Table, ev.After, i+1)
		}
	}
	kafkasinktest.AssertEvents(t, events, events) // once each, in position order
	if failed := rec.Writes() - len(rec.Batches()); failed != 1 {
		t.Fatalf("%d Writes failed, want the 1 injected (%d Writes)", failed, rec.Writes())
	}
	if got := rec.Checkpoint().Position; got != events[4].Position {
		t.Errorf("checkpoint %s, want the last event's %s", got, events[4].Position)
	}
}

// A fatal Write error stops Run with that error. The Write that fails is
// the first with events: Run also writes cursor-only checkpoints when the
// server's keepalives move past other sessions' WAL, which may come first.
func TestRunStopsOnFatalWriteError(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	rec := kafkasinktest.NewRecorder(kafkasink.Checkpoint{})
	_, r := start(t, e.config("public."+table), &failFirstEvents{Recorder: rec, err: kafkasinktest.ErrFatal})
	waitFor(t, 20*time.Second, "replication to start", r, e.streaming)
	e.exec("INSERT INTO " + table + " (id, seq, note) VALUES (1, 1, 'row')")
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run still running 20s after a fatal Write error")
	}
	if !errors.Is(r.err, kafkasink.ErrFenced) {
		t.Fatalf("Run returned %v, want the fatal Write error (ErrFenced)", r.err)
	}
	if n := len(rec.Events()); n != 0 {
		t.Errorf("%d events recorded after a failed Write", n)
	}
}

// failFirstEvents is a Recorder whose first Write with events fails with
// err.
type failFirstEvents struct {
	*kafkasinktest.Recorder
	err    error
	failed atomic.Bool
}

func (f *failFirstEvents) Write(ctx context.Context, b kafkasink.Batch) error {
	if len(b.Events) > 0 && f.failed.CompareAndSwap(false, true) {
		return f.err
	}
	return f.Recorder.Write(ctx, b)
}

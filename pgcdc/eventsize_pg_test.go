package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// TestBatchMaxBytesBoundsWrites streams rows of about 200 B from the real
// PostgreSQL with a small BatchMaxBytes, reads the topic back and checks
// each change is in it once, then measures each Write's batch: the heap a
// copy of its events, less the last, holds must be below BatchMaxBytes
// (a batch closes at the first event that reaches it). The copy is laid
// out as the decoder lays out events (rows in one block of Columns,
// boxed values), without the spare room of the batch's slice, so it
// holds no more than the batch did.
func TestBatchMaxBytesBoundsWrites(t *testing.T) {
	e := newPGEnv(t)
	table := e.createTable("")
	var mu sync.Mutex
	var batches [][]kafkasink.Event
	tr := newTracker()
	sink := &recSink{Sink: e.newSink(e.name), tr: tr, before: func(_ int, b *kafkasink.Batch) error {
		if len(b.Events) > 0 {
			mu.Lock()
			batches = append(batches, b.Events)
			mu.Unlock()
		}
		return nil
	}}
	cfg := e.config("public." + table)
	cfg.BatchMaxBytes = 256 << 10
	cfg.BatchMaxEvents = 1 << 20
	cfg.BatchMaxWait = time.Second // batches close by bytes
	stop, done := start(t, cfg, sink)
	e.monitorSlot(done, tr)

	const rows = 3000
	var m model
	e.exec(fmt.Sprintf("INSERT INTO %s SELECT g, g, repeat('x', 150) FROM generate_series(1, %d) g", table, rows))
	for id := int64(1); id <= rows; id++ {
		m.add("insert", id, id)
	}
	e.checkDelivered(done, tr, table, m.all())
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(batches) < 4 {
		t.Fatalf("%d Writes of %d changes: BatchMaxBytes %d did not split them", len(batches), rows, cfg.BatchMaxBytes)
	}
	liveHeap() // what Run left is collected before the first measure
	for i, b := range batches {
		before := liveHeap()
		c := copyEvents(b[:len(b)-1])
		held := liveHeap() - before
		runtime.KeepAlive(c)
		t.Logf("Write %d: %d events, %d B held by all but the last", i+1, len(b), held)
		if held >= cfg.BatchMaxBytes {
			t.Errorf("Write %d: its %d events but the last hold %d B, BatchMaxBytes is %d", i+1, len(b)-1, held, cfg.BatchMaxBytes)
		}
	}
}

// copyEvents copies events as the decoder makes them: the rows' columns
// in one block, each value boxed anew.
func copyEvents(events []kafkasink.Event) []kafkasink.Event {
	out := make([]kafkasink.Event, len(events))
	n := 0
	for i := range events {
		n += len(events[i].Before) + len(events[i].After)
	}
	cols := make([]kafkasink.Column, 0, n)
	row := func(r kafkasink.Row) kafkasink.Row {
		if r == nil {
			return nil
		}
		start := len(cols)
		for _, c := range r {
			c.Value = copyValue(c.Value)
			cols = append(cols, c)
		}
		return cols[start:len(cols):len(cols)]
	}
	for i, e := range events {
		e.Before, e.After = row(e.Before), row(e.After)
		out[i] = e
	}
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case string:
		return strings.Clone(v)
	case kafkasink.Decimal:
		return kafkasink.Decimal(strings.Clone(string(v)))
	case []byte:
		return append([]byte(nil), v...)
	case json.RawMessage:
		return append(json.RawMessage(nil), v...)
	case int32:
		return v + 0
	case int64:
		return v + 0
	}
	return v
}

package kafkasink_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

func TestHooksSplitTransactions(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const id = "hooks-split"
	h := &hookLog{}
	s := newSink(t, brokers, id, func(c *kafkasink.Config) {
		c.MaxTransactionRecords = 2
		c.Hooks = []kafkasink.Hook{h}
	})
	events := sinktest.Inserts("public", "hooked", 100, 1, 5)
	cursor := json.RawMessage(`{"slot":"s1"}`)
	if err := tryWrite(t, s, kafkasink.Batch{Events: events, Cursor: cursor}); err != nil {
		t.Fatalf("Write: %v", err)
	}

	batches, committed, aborted, rejected := h.snapshot()
	if len(aborted) != 0 || len(rejected) != 0 {
		t.Errorf("%d aborted, %d rejected hook calls, want none", len(aborted), len(rejected))
	}
	wantTxns := []struct {
		first, last kafkasink.Position
		records     int
	}{
		{events[0].Position, events[1].Position, 3},
		{events[2].Position, events[3].Position, 3},
		{events[4].Position, events[4].Position, 2},
	}
	if len(committed) != len(wantTxns) {
		t.Fatalf("%d OnTransactionCommitted calls, want %d: %+v", len(committed), len(wantTxns), committed)
	}
	txnBytes := 0
	for i, w := range wantTxns {
		c := committed[i]
		if c.First != w.first || c.Last != w.last || c.Records != w.records {
			t.Errorf("transaction %d: first %s last %s records %d, want %s %s %d", i, c.First, c.Last, c.Records, w.first, w.last, w.records)
		}
		if c.Bytes <= 0 || c.Duration <= 0 {
			t.Errorf("transaction %d: bytes %d duration %v, want both positive", i, c.Bytes, c.Duration)
		}
		txnBytes += c.Bytes
	}

	if len(batches) != 1 {
		t.Fatalf("%d OnBatchWritten calls, want 1", len(batches))
	}
	b := batches[0]
	if b.Events != 5 || b.Skipped != 0 || b.Written != 5 || b.Rejected != 0 || b.Records != 5 || b.Transactions != 3 {
		t.Errorf("BatchInfo %+v, want Events 5, Skipped 0, Written 5, Rejected 0, Records 5, Transactions 3", b)
	}
	if b.Bytes != txnBytes {
		t.Errorf("BatchInfo.Bytes %d, want the transactions' sum %d", b.Bytes, txnBytes)
	}
	if b.Duration <= 0 {
		t.Errorf("BatchInfo.Duration %v, want positive", b.Duration)
	}
	if b.Checkpoint.Position != events[4].Position || string(b.Checkpoint.Cursor) != string(cursor) {
		t.Errorf("BatchInfo.Checkpoint %s %s, want %s %s", b.Checkpoint.Position, b.Checkpoint.Cursor, events[4].Position, cursor)
	}

	// Each transaction carried its own checkpoint; the cursor only moves
	// with the last, because until then the source must resume before it.
	wantCk := []struct{ pos, cursor string }{
		{events[1].Position.String(), ""},
		{events[3].Position.String(), ""},
		{events[4].Position.String(), string(cursor)},
	}
	ckpts := sinkCheckpoints(t, brokers, id, len(wantCk))
	if len(ckpts) != len(wantCk) {
		t.Fatalf("%d checkpoint records for %s, want %d: %+v", len(ckpts), id, len(wantCk), ckpts)
	}
	for i, w := range wantCk {
		if ckpts[i].Position != w.pos || string(ckpts[i].Cursor) != w.cursor || ckpts[i].Mode != "exactly-once" {
			t.Errorf("checkpoint %d: position %s cursor %s mode %s, want %s %q exactly-once", i, ckpts[i].Position, ckpts[i].Cursor, ckpts[i].Mode, w.pos, w.cursor)
		}
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.hooked"), events)
}

func TestHooksIdempotentParts(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const id = "hooks-idempotent"
	h := &hookLog{}
	s := newSink(t, brokers, id, func(c *kafkasink.Config) {
		c.Mode = kafkasink.Idempotent
		c.MaxTransactionRecords = 2
		c.Hooks = []kafkasink.Hook{h}
	})
	events := sinktest.Inserts("public", "hooked", 100, 1, 5)
	write(t, s, events)

	batches, committed, aborted, _ := h.snapshot()
	if len(committed) != 0 || len(aborted) != 0 {
		t.Errorf("%d committed, %d aborted transaction hooks in Idempotent mode, want none", len(committed), len(aborted))
	}
	if len(batches) != 1 {
		t.Fatalf("%d OnBatchWritten calls, want 1", len(batches))
	}
	if b := batches[0]; b.Events != 5 || b.Written != 5 || b.Records != 5 || b.Transactions != 3 || b.Checkpoint.Position != events[4].Position {
		t.Errorf("BatchInfo %+v, want Events 5, Written 5, Records 5, Transactions 3, checkpoint %s", b, events[4].Position)
	}
	ckpts := sinkCheckpoints(t, brokers, id, 3)
	if len(ckpts) != 3 || ckpts[2].Position != events[4].Position.String() || ckpts[2].Mode != "idempotent" {
		t.Errorf("checkpoint records %+v, want 3 ending at %s in idempotent mode", ckpts, events[4].Position)
	}
}

func TestHooksAbortedTransaction(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.aborted"
	h := &hookLog{}
	s := newSink(t, brokers, "hooks-aborted", func(c *kafkasink.Config) { c.Hooks = []kafkasink.Hook{h} })
	events := sinktest.Inserts("public", "aborted", 100, 1, 3)

	// INVALID_REQUEST: a failure the sink cannot pin to a record (one the
	// broker refuses is quarantined instead: refused_test.go).
	fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.InvalidRequest, Count: 1})
	err := tryWrite(t, s, kafkasink.Batch{Events: events})
	if !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("Write: %v, want INVALID_REQUEST", err)
	}
	if fault.Hits() != 1 {
		t.Fatalf("fault hit %d times, want 1", fault.Hits())
	}
	batches, committed, aborted, _ := h.snapshot()
	if len(batches) != 0 || len(committed) != 0 {
		t.Errorf("%d batch, %d committed hook calls after a failed Write, want none", len(batches), len(committed))
	}
	if len(aborted) != 1 {
		t.Fatalf("%d OnTransactionAborted calls, want 1", len(aborted))
	}
	if a := aborted[0]; a.info.First != events[0].Position || a.info.Last != events[2].Position || a.info.Records != 4 || !errors.Is(a.err, kerr.InvalidRequest) {
		t.Errorf("aborted %+v with %v, want %s..%s, 4 records, INVALID_REQUEST", a.info, a.err, events[0].Position, events[2].Position)
	}
	if !s.Checkpoint().IsZero() {
		t.Errorf("checkpoint %s after an aborted transaction, want zero", s.Checkpoint().Position)
	}

	write(t, s, events)
	batches, committed, aborted, _ = h.snapshot()
	if len(batches) != 1 || len(committed) != 1 || len(aborted) != 1 {
		t.Errorf("after the retry: %d batch, %d committed, %d aborted hook calls, want 1, 1, 1", len(batches), len(committed), len(aborted))
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), events)
}

package kafkasink_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// hookLog implements every Hook interface and records each call. It is
// safe for concurrent use.
type hookLog struct {
	mu        sync.Mutex
	batches   []kafkasink.BatchInfo
	committed []kafkasink.TransactionInfo
	aborted   []abortedTxn
	rejected  []rejectedEvent
}

type abortedTxn struct {
	info kafkasink.TransactionInfo
	err  error
}

type rejectedEvent struct {
	r            kafkasink.Rejection
	deadLettered bool
}

func (h *hookLog) OnBatchWritten(i kafkasink.BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches = append(h.batches, i)
}

func (h *hookLog) OnTransactionCommitted(i kafkasink.TransactionInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.committed = append(h.committed, i)
}

func (h *hookLog) OnTransactionAborted(i kafkasink.TransactionInfo, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.aborted = append(h.aborted, abortedTxn{i, err})
}

func (h *hookLog) OnEventRejected(r kafkasink.Rejection, deadLettered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rejected = append(h.rejected, rejectedEvent{r, deadLettered})
}

// snapshot returns copies of everything recorded so far.
func (h *hookLog) snapshot() (batches []kafkasink.BatchInfo, committed []kafkasink.TransactionInfo, aborted []abortedTxn, rejected []rejectedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append(batches, h.batches...), append(committed, h.committed...), append(aborted, h.aborted...), append(rejected, h.rejected...)
}

// tryWrite writes b and returns Write's error.
func tryWrite(t *testing.T, s kafkasink.Sink, b kafkasink.Batch) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Write(ctx, b)
}

// storedCheckpoint is one checkpoint record as a read_committed consumer
// of the checkpoint topic sees it.
type storedCheckpoint struct {
	Position string          `json:"position"`
	Cursor   json.RawMessage `json:"cursor"`
	Mode     string          `json:"mode"`
	SinkID   string          `json:"sink_id"`
}

// sinkCheckpoints returns the committed checkpoint records of sinkID in
// the default checkpoint topic, oldest first. Other sinks of the test may
// share the topic, and a transaction of theirs that is still open holds
// back what a read_committed reader sees, even of records committed before
// the call; so it reads again until it sees at least want records, for up
// to ten seconds, and returns what it saw last.
func sinkCheckpoints(t *testing.T, brokers []string, sinkID string, want int) []storedCheckpoint {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out []storedCheckpoint
		for _, r := range sinktest.ReadCommitted(t, brokers, kafkasink.DefaultCheckpointTopic) {
			if string(r.Key) != sinkID {
				continue
			}
			var c storedCheckpoint
			if err := json.Unmarshal(r.Value, &c); err != nil {
				t.Fatalf("checkpoint record at offset %d: %v", r.Offset, err)
			}
			out = append(out, c)
		}
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// admin returns an admin client on brokers, closed at the end of the test.
func admin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates a topic for a test, failing it on any error.
func createTopic(t *testing.T, brokers []string, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfgs := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfgs[k] = &v
	}
	resp, err := admin(t, brokers).CreateTopic(context.Background(), partitions, 1, cfgs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

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

	fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.InvalidRecord, Count: 1})
	err := tryWrite(t, s, kafkasink.Batch{Events: events})
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("Write: %v, want INVALID_RECORD", err)
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
	if a := aborted[0]; a.info.First != events[0].Position || a.info.Last != events[2].Position || a.info.Records != 4 || !errors.Is(a.err, kerr.InvalidRecord) {
		t.Errorf("aborted %+v with %v, want %s..%s, 4 records, INVALID_RECORD", a.info, a.err, events[0].Position, events[2].Position)
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

package kafkasink_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

var producerModes = []struct {
	name string
	mode kafkasink.Mode
	acks kafkasink.Acks
}{
	{"idempotent", kafkasink.Idempotent, kafkasink.AcksAll},
	{"plain", kafkasink.Plain, kafkasink.AcksAll},
	{"plain acks=1", kafkasink.Plain, kafkasink.AcksLeader},
}

func TestProducerModes(t *testing.T) {
	t.Parallel()
	for _, m := range producerModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			_, brokers := sinktest.Cluster(t)
			const id = "producer"
			h := &hookLog{}
			cfg := func(c *kafkasink.Config) {
				c.Mode, c.Acks = m.mode, m.acks
				c.Hooks = []kafkasink.Hook{h}
			}
			s := newSink(t, brokers, id, cfg)
			a := sinktest.Inserts("public", "orders", 100, 1, 5)
			b := sinktest.Inserts("public", "items", 200, 1, 3)
			write(t, s, a)
			write(t, s, b)
			if got := s.Checkpoint(); got.Position != b[2].Position || got.Mode != m.mode {
				t.Fatalf("checkpoint %s mode %s, want %s %s", got.Position, got.Mode, b[2].Position, m.mode)
			}
			topics := []string{"kafkasink.public.orders", "kafkasink.public.items"}
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topics...), append(a, b...))
			ckpts := sinkCheckpoints(t, brokers, id, 2)
			if len(ckpts) != 2 || ckpts[0].Position != a[4].ID() || ckpts[1].Position != b[2].ID() || ckpts[1].Mode != m.mode.String() {
				t.Errorf("checkpoint records %+v, want %s then %s in mode %s", ckpts, a[4].ID(), b[2].ID(), m.mode)
			}

			// A new sink reads the checkpoint back and skips what it covers.
			s.Close(context.Background())
			s2 := newSink(t, brokers, id, cfg)
			if got := s2.Checkpoint(); got.Position != b[2].Position || got.Mode != m.mode {
				t.Fatalf("checkpoint after restart %s mode %s, want %s %s", got.Position, got.Mode, b[2].Position, m.mode)
			}
			write(t, s2, b)
			c := sinktest.Inserts("public", "items", 300, 4, 2)
			write(t, s2, append(append(append([]kafkasink.Event(nil), a...), b...), c...))
			batches, _, _, _ := h.snapshot()
			if len(batches) != 3 {
				t.Fatalf("%d OnBatchWritten calls, want 3 (the fully redelivered batch writes nothing)", len(batches))
			}
			if info := batches[2]; info.Events != 10 || info.Skipped != 8 || info.Written != 2 || info.Checkpoint.Position != c[1].Position {
				t.Errorf("BatchInfo %+v, want Events 10, Skipped 8, Written 2, checkpoint %s", info, c[1].Position)
			}
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topics...), append(append(a, b...), c...))
		})
	}
}

func TestProducerModesProduceFailure(t *testing.T) {
	t.Parallel()
	for _, m := range producerModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			const (
				id    = "producer-failure"
				topic = "kafkasink.public.orders"
			)
			s := newSink(t, brokers, id, func(c *kafkasink.Config) { c.Mode = m.mode })
			a := sinktest.Inserts("public", "orders", 100, 1, 5)
			b := sinktest.Inserts("public", "orders", 200, 6, 8)
			write(t, s, a)

			// Fail one partition only, the one of b's first event: the
			// records of the other partitions are written, so the retry
			// duplicates them.
			details, err := admin(t, brokers).ListTopics(context.Background(), topic)
			if err != nil {
				t.Fatal(err)
			}
			failed := int32(kafkasink.PartitionFor([]byte("6"), len(details[topic].Partitions)))
			inFailed := 0
			for _, e := range b {
				key, _ := kafkasink.AppendKey(nil, &e, nil, kafkasink.KeyText)
				if int32(kafkasink.PartitionFor(key, len(details[topic].Partitions))) == failed {
					inFailed++
				}
			}
			if inFailed == len(b) {
				t.Fatalf("all of b is in partition %d; the test needs events elsewhere", failed)
			}
			// INVALID_REQUEST: a failure the sink cannot pin to a record (one the
			// broker refuses is quarantined instead: refused_test.go).
			fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{failed}, Err: kerr.InvalidRequest, Count: 1})
			err = tryWrite(t, s, kafkasink.Batch{Events: b})
			var we *kafkasink.WriteError
			if !errors.As(err, &we) || !errors.Is(err, kerr.InvalidRequest) || we.Topic != topic || we.Partition != failed {
				t.Fatalf("Write: %v, want a *WriteError on %s[%d] with INVALID_REQUEST", err, topic, failed)
			}
			if fault.Hits() != 1 {
				t.Fatalf("fault hit %d times, want 1", fault.Hits())
			}
			if got := s.Checkpoint().Position; got != a[4].Position {
				t.Fatalf("checkpoint %s after a failed Write, want unchanged %s", got, a[4].Position)
			}
			if n := len(sinkCheckpoints(t, brokers, id, 1)); n != 1 {
				t.Fatalf("%d checkpoint records after a failed Write, want 1", n)
			}

			write(t, s, b)
			if got := s.Checkpoint().Position; got != b[7].Position {
				t.Fatalf("checkpoint %s after the retry, want %s", got, b[7].Position)
			}
			seen := make(map[string]int)
			for _, r := range sinktest.ReadCommitted(t, brokers, topic) {
				seen[sinktest.Header(r, kafkasink.HeaderID)]++
			}
			for _, e := range a {
				if seen[e.ID()] != 1 {
					t.Errorf("event %s of the batch before the failure seen %d times, want 1", e.ID(), seen[e.ID()])
				}
				delete(seen, e.ID())
			}
			dups := 0
			for _, e := range b {
				switch n := seen[e.ID()]; n {
				case 1:
				case 2:
					dups++
				default:
					t.Errorf("event %s of the failed batch seen %d times, want 1 or 2", e.ID(), n)
				}
				delete(seen, e.ID())
			}
			for id, n := range seen {
				t.Errorf("unexpected record %s (%d times)", id, n)
			}
			// At most the events of the failed Write that reached Kafka
			// are duplicated: here those outside the failed partition.
			if max := len(b) - inFailed; dups == 0 || dups > max {
				t.Errorf("%d events of the failed batch duplicated, want between 1 and %d", dups, max)
			}
		})
	}
}

// TestProducerModesRedeliveryAfterTimeout: a Write whose context ends
// while its records are still buffered in the client (a produce request
// held at the broker) fails, not fatally, and its redelivery, started before
// the held request is answered, succeeds: every event is in the topic at
// least once and the checkpoint is its last. Before, the failed Write's
// records stayed buffered ahead of the redelivery's, the client failed
// their batch by the first record's (ended) context, and the sink stopped
// with a fatal error.
func TestProducerModesRedeliveryAfterTimeout(t *testing.T) {
	t.Parallel()
	for _, m := range producerModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			const topic = "kafkasink.public.orders"
			c, brokers := sinktest.Cluster(t, kfake.SeedTopics(1, topic))
			s := newSink(t, brokers, "producer-timeout", func(c *kafkasink.Config) { c.Mode = m.mode })
			events := sinktest.Inserts("public", "orders", 100, 0, 3000)
			for i := range events {
				events[i].After = append(events[i].After, kafkasink.Column{Name: "pad", Value: strings.Repeat("x", 1000)})
			}
			batch := kafkasink.Batch{Events: events}
			release := make(chan struct{})
			pauseNext(c, kmsg.Produce, release)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := s.Write(ctx, batch)
			cancel()
			if err == nil || kafkasink.IsFatal(err) {
				t.Fatalf("Write with a held produce request, its context ending: %v, want an error that is not fatal", err)
			}
			errc := make(chan error, 1)
			go func() { errc <- tryWrite(t, s, batch) }()
			time.Sleep(500 * time.Millisecond) // the redelivery waits behind the held request
			close(release)
			if err := <-errc; err != nil {
				t.Fatalf("redelivery: %v (fatal: %t)", err, kafkasink.IsFatal(err))
			}
			if got := s.Checkpoint().Position; got != events[len(events)-1].Position {
				t.Errorf("checkpoint %s, want %s", got, events[len(events)-1].Position)
			}
			seen := make(map[string]bool)
			for _, r := range sinktest.ReadCommitted(t, brokers, topic) {
				seen[sinktest.Header(r, kafkasink.HeaderID)] = true
			}
			for _, e := range events {
				if !seen[e.Position.String()] {
					t.Fatalf("event %s is not in the topic", e.Position)
				}
			}
		})
	}
}

// gatedEncoder encodes as JSONEncoder, but before the event at gate it
// waits, up to wait, for the broker to receive a Produce request, and
// records whether it did: whether the sink sent records of the batch
// while still encoding it.
type gatedEncoder struct {
	kafkasink.JSONEncoder
	gate     kafkasink.Position
	produced <-chan struct{}
	wait     time.Duration
	sawSend  *atomic.Bool
}

func (g gatedEncoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if e.Position == g.gate {
		select {
		case <-g.produced:
			g.sawSend.Store(true)
		case <-time.After(g.wait):
		}
	}
	return g.JSONEncoder.Encode(dst, e)
}

// TestFirstPartSentWhileEncoding: in ExactlyOnce mode the first part's
// records are produced as they are encoded (in a transaction that a
// failed plan aborts), so encoding the rest of the batch overlaps with
// sending. Idempotent and Plain send nothing before the whole batch is
// encoded, because a rejected event must fail the batch before any of it
// is written; with a dead-letter topic too (sending early there was
// tried: on a quiet machine it gained at 1 KB x 10,000 events and lost
// at 1 KB x 1,000, and changed nothing at 200 B).
func TestFirstPartSentWhileEncoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		mode       kafkasink.Mode
		deadLetter string
		early      bool
	}{
		{"exactly-once", kafkasink.ExactlyOnce, "", true},
		{"idempotent with a dead-letter topic", kafkasink.Idempotent, "early.dead", false},
		{"plain with a dead-letter topic", kafkasink.Plain, "early.dead", false},
		{"idempotent", kafkasink.Idempotent, "", false},
		{"plain", kafkasink.Plain, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			events := sinktest.Inserts("public", "orders", 100, 1, 50)
			produced := make(chan struct{})
			var once sync.Once
			var sawSend atomic.Bool
			wait := 10 * time.Second
			if !tc.early {
				// Waiting for what must not happen: long enough
				// for a record sent early to have arrived.
				wait = 500 * time.Millisecond
			}
			s := newSink(t, brokers, "early", func(cfg *kafkasink.Config) {
				cfg.Mode, cfg.DeadLetterTopic = tc.mode, tc.deadLetter
				cfg.Encoder = gatedEncoder{gate: events[len(events)-1].Position, produced: produced, wait: wait, sawSend: &sawSend}
			})
			c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
				once.Do(func() { close(produced) })
				return nil, nil, false
			})
			write(t, s, events)
			if sawSend.Load() != tc.early {
				t.Errorf("records sent before the batch's last event was encoded: %t, want %t", sawSend.Load(), tc.early)
			}
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.orders"), events)
		})
	}
}

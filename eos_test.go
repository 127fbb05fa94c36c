package kafkasink_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// newSink starts a sink on brokers with test-friendly defaults and closes
// it at the end of the test.
func newSink(t *testing.T, brokers []string, id string, edit ...func(*kafkasink.Config)) kafkasink.Sink {
	t.Helper()
	s, err := startSink(t, brokers, id, edit...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func startSink(t *testing.T, brokers []string, id string, edit ...func(*kafkasink.Config)) (kafkasink.Sink, error) {
	t.Helper()
	cfg := kafkasink.Config{Brokers: brokers, SinkID: id, TransactionTimeout: 10 * time.Second}
	for _, e := range edit {
		e(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafkasink.New(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { s.Close(context.Background()) })
	}
	return s, err
}

func write(t *testing.T, s kafkasink.Sink, events []kafkasink.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Write(ctx, kafkasink.Batch{Events: events}); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func TestExactlyOnceWritesEachEventOnce(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "basic")
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	b := sinktest.Inserts("public", "items", 200, 1, 3)
	write(t, s, a)
	write(t, s, b)
	if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
	}
	recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public.orders", "kafkasink.public.items")
	sinktest.CheckExactlyOnce(t, recs, append(a, b...))

	// A new sink reads the checkpoint back.
	s.Close(context.Background())
	s2 := newSink(t, brokers, "basic")
	if got := s2.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint after restart %s, want %s", got, b[len(b)-1].Position)
	}
	if err := s.Write(context.Background(), kafkasink.Batch{Events: a}); !errors.Is(err, kafkasink.ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
}

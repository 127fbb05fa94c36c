package kafkasink_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestReadAndResetCheckpoint: ReadCheckpoint reads what the running sink
// wrote without fencing it, and finds nothing (creating nothing) where
// there is no checkpoint topic; ResetCheckpoint fences the running sink,
// moves the checkpoint backwards (which a plain write could not), and
// deletes it, each read back by a new sink.
func TestReadAndResetCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, brokers := sinktest.Cluster(t)
	cfg := kafkasink.Config{Brokers: brokers, SinkID: "reset"}

	none, err := kafkasink.ReadCheckpoint(ctx, kafkasink.Config{Brokers: brokers, SinkID: "reset", CheckpointTopic: "no-checkpoints"})
	if err != nil || !none.IsZero() {
		t.Fatalf("no checkpoint topic: %v, %v; want the zero checkpoint", none, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if topics, err := kadm.NewClient(cl).ListTopics(ctx, "no-checkpoints"); err != nil || topics.Has("no-checkpoints") {
		t.Fatalf("ReadCheckpoint created the checkpoint topic (%v)", err)
	}

	s := newSink(t, brokers, "reset")
	events := sinktest.Inserts("public", "orders", 100, 1, 5)
	if err := s.Write(ctx, kafkasink.Batch{Events: events, Cursor: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := kafkasink.ReadCheckpoint(ctx, cfg)
	if err != nil || got.Position != s.Checkpoint().Position || string(got.Cursor) != `{"a":1}` {
		t.Fatalf("ReadCheckpoint = %v, %v; want the sink's %v", got, err, s.Checkpoint())
	}
	if err := s.Write(ctx, kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 200, 1, 1)}); err != nil {
		t.Fatalf("the sink after ReadCheckpoint: %v; want it unfenced", err)
	}

	back := kafkasink.Checkpoint{Position: kafkasink.Position{LSN: 50}, Cursor: json.RawMessage(`{"b":2}`)}
	if err := kafkasink.ResetCheckpoint(ctx, cfg, back); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 300, 1, 1)}); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("the sink after ResetCheckpoint: %v; want ErrFenced", err)
	}
	s2 := newSink(t, brokers, "reset")
	if ck := s2.Checkpoint(); ck.Position != back.Position || string(ck.Cursor) != `{"b":2}` {
		t.Fatalf("a new sink after the reset reads %v, want %v", ck, back)
	}
	s2.Close(ctx)

	if err := kafkasink.ResetCheckpoint(ctx, cfg, kafkasink.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	if ck, err := kafkasink.ReadCheckpoint(ctx, cfg); err != nil || !ck.IsZero() {
		t.Fatalf("after a reset to nothing: %v, %v; want the zero checkpoint", ck, err)
	}
}

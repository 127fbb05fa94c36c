package kafkasink

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/checkpointlog"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// This file is what an operator's tool needs of the checkpoint: a read
// that fences nothing, and a reset through the exactly-once path.

// ReadCheckpoint returns the checkpoint of the sink cfg describes as the
// broker has it: the checkpoint partition read with read_committed up to
// its high watermark, as New reads it, but without claiming the
// transactional id, so it fences nothing and is safe while the sink
// runs. A transaction of the running sink that is open holds the read
// until it ends (within the transaction timeout) or ctx does. A missing
// checkpoint topic is the zero Checkpoint: nothing was delivered; the
// topic is not created. Configuration problems are one *ConfigError.
func ReadCheckpoint(ctx context.Context, cfg Config) (Checkpoint, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Checkpoint{}, err
	}
	s := &Sink{cfg: cfg, log: cfg.Logger.With("sink", cfg.SinkID)}
	s.store.Topic, s.store.sinkID, s.store.mode = cfg.CheckpointTopic, cfg.SinkID, cfg.Mode
	cl, err := kgo.NewClient(s.connOptions()...)
	if err != nil {
		return Checkpoint{}, &ConfigError{Problems: []string{"Kafka client: " + err.Error()}}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	md, err := topicadmin.Metadata(ctx, cl, cfg.CheckpointTopic)
	if err != nil {
		return Checkpoint{}, cfg.explainConnectErr(classified(ctx, err))
	}
	if md == nil {
		return Checkpoint{}, nil
	}
	n, _, err := topicadmin.Ready(ctx, cl, adm, cfg.CheckpointTopic)
	if err != nil {
		return Checkpoint{}, cfg.explainConnectErr(classified(ctx, err))
	}
	s.store.Partition.Partition = int32(PartitionFor([]byte(cfg.SinkID), n))
	ck, _, err := s.store.read(ctx, adm, s.connOptions(), Checkpoint{}, 0)
	if err != nil {
		return Checkpoint{}, classified(ctx, err)
	}
	return ck, nil
}

// ResetCheckpoint replaces the checkpoint of the sink cfg describes with
// c, whose Mode and Time it sets; the zero Checkpoint deletes it, so that
// the source starts over. It starts as New does, which in ExactlyOnce
// mode claims the transactional id and so fences every running instance
// of the sink: the caller must make sure none runs (pgcdc's lease). It
// then writes, in one transaction of that id (in the other modes, in one
// acknowledged produce), a tombstone under the sink id and then c's
// record, so that a c below the old checkpoint is not refused as a
// checkpoint that moves backwards. It returns once the broker confirmed
// the write and a read back finds c.
func ResetCheckpoint(ctx context.Context, cfg Config, c Checkpoint) (err error) {
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cerr := s.Close(cctx); err == nil {
			err = cerr
		}
	}()
	records := []*kgo.Record{{Topic: s.store.Topic, Partition: s.store.Partition.Partition, Key: []byte(s.cfg.SinkID)}}
	if !c.IsZero() {
		c.Mode, c.Time = s.cfg.Mode, time.Now().UTC()
		r, err := s.store.record(c)
		if err != nil {
			return err
		}
		records = append(records, r)
	}
	if err := checkpointlog.Write(ctx, s.cl, s.cfg.Mode == ExactlyOnce, s.cfg.CommitTimeout, records...); err != nil {
		return fmt.Errorf("kafkasink: resetting the checkpoint: %w", err)
	}
	got, _, err := s.store.read(ctx, s.adm.Load(), s.connOptions(), Checkpoint{}, 0)
	if err != nil {
		return fmt.Errorf("kafkasink: reading the reset checkpoint back: %w", err)
	}
	if !got.same(c) {
		return fmt.Errorf("%w: the checkpoint read back after the reset is %s, not %s", ErrCheckpoint, got.Position, c.Position)
	}
	return nil
}

package kafkasink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/checkpointlog"
)

// Checkpoint is the last position a sink delivered, with the source cursor
// of that batch. The zero Checkpoint means nothing was delivered yet.
type Checkpoint struct {
	Position Position        // the last delivered event's position; zero before the first
	Cursor   json.RawMessage // nil when no batch carried one
	Mode     Mode            // the mode of the sink that wrote it
	Time     time.Time       // when it was written; zero before the first write
}

// IsZero reports whether nothing has been delivered yet.
func (c Checkpoint) IsZero() bool { return c.Position.IsZero() && c.Cursor == nil }

// same reports whether c and o are the same checkpoint record: position,
// cursor (as stored, compacted), mode and time of writing. The time makes
// two cursor-only checkpoints at one position tell apart.
func (c Checkpoint) same(o Checkpoint) bool {
	return c.Position == o.Position && c.Mode == o.Mode && c.Time.Equal(o.Time) &&
		checkpointlog.SameCursor(c.Cursor, o.Cursor)
}

// checkpointStore reads and writes one sink's checkpoint: the records keyed
// by its sink id in one partition of the checkpoint topic.
type checkpointStore struct {
	checkpointlog.Partition
	sinkID string
	txnID  string // written into the value for operators; "" outside ExactlyOnce
	mode   Mode
}

// record returns the checkpoint record for c. The partition is set
// explicitly: it must be the one read back, whatever the partitioner.
func (s *checkpointStore) record(c Checkpoint) (*kgo.Record, error) {
	v, err := checkpointlog.Encode(checkpointlog.Value{
		SinkID:          s.sinkID,
		Mode:            c.Mode.String(),
		Position:        c.Position.String(),
		Cursor:          c.Cursor,
		TransactionalID: s.txnID,
		WrittenAt:       c.Time.UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("kafkasink: encoding checkpoint: the batch cursor must be valid JSON: %w", err)
	}
	return &kgo.Record{Topic: s.Topic, Partition: s.Partition.Partition, Key: []byte(s.sinkID), Value: v}, nil
}

// read reads the checkpoint partition up to its high watermark (see
// checkpointlog.Partition.Read) and returns the newest checkpoint of this
// sink, starting from known (the newest checkpoint already known, read or
// written at offset from), and the offset of the newest record of this
// sink it saw (from when it saw none), also when it fails: where the next
// read starts. A known checkpoint that is not zero and is no longer there
// is an ErrCheckpoint: the broker lost a write it had confirmed.
func (s *checkpointStore) read(ctx context.Context, adm *kadm.Client, connOpts []kgo.Opt, known Checkpoint, from int64) (Checkpoint, int64, error) {
	var knownPos string
	if !known.IsZero() {
		knownPos = known.Position.String()
	}
	cur := known
	last, err := s.Read(ctx, adm, connOpts, s.sinkID, knownPos, from, IsRetryable, func(offset int64, value []byte) (err error) {
		cur, err = s.apply(cur, offset, value) // on an error, apply returns cur
		return err
	})
	var lost *checkpointlog.LostError
	if errors.As(err, &lost) {
		return known, last, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err != nil {
		return known, last, err
	}
	return cur, last, nil
}

// apply returns the checkpoint after the record at offset of value value,
// a record of this sink read after cur. A checkpoint that moves backwards
// is an error: cur stays.
func (s *checkpointStore) apply(cur Checkpoint, offset int64, value []byte) (Checkpoint, error) {
	if value == nil {
		// A tombstone: an operator deleted the checkpoint on purpose,
		// to start over.
		return Checkpoint{}, nil
	}
	c, err := s.parse(offset, value)
	if err == nil && c.Position.Compare(cur.Position) < 0 {
		err = fmt.Errorf("%w: %s[%d] offset %d moves the checkpoint backwards, from %s to %s; two sinks may share the sink id %q: give each its own", ErrCheckpoint, s.Topic, s.Partition.Partition, offset, cur.Position, c.Position, s.sinkID)
	}
	if err != nil {
		return cur, err
	}
	return c, nil
}

// parse decodes one checkpoint value of this sink.
func (s *checkpointStore) parse(offset int64, value []byte) (Checkpoint, error) {
	v, err := checkpointlog.Decode(value)
	var c Checkpoint
	if err == nil {
		c.Position, err = ParsePosition(v.Position)
	}
	if err == nil {
		c.Mode, err = ParseMode(v.Mode)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %s[%d] offset %d: %v", ErrCheckpoint, s.Topic, s.Partition.Partition, offset, err)
	}
	c.Cursor, c.Time = v.Cursor, v.WrittenAt
	return c, nil
}

package kafkasink

import (
	"bytes"
	"context"
	"encoding/json"
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
		bytes.Equal(compactJSON(c.Cursor), compactJSON(o.Cursor))
}

// compactJSON is raw as json.Marshal stores it in a checkpoint value.
func compactJSON(raw json.RawMessage) []byte {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
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

// read reads the checkpoint partition with read_committed up to its high
// watermark and returns the newest checkpoint of this sink, starting from
// known (the newest checkpoint already known, read or written at offset
// from), and the offset of the newest record of this sink it saw (from when
// it saw none), also when it fails: where the next read starts.
//
// A known checkpoint that is not zero is the record at from, which the
// broker confirmed: the read must find it there, or a newer one of this
// sink. When it finds neither, the broker lost a write it had confirmed,
// and read returns that as an ErrCheckpoint (see lost) instead of trusting
// memory: a later commit would otherwise carry on from a checkpoint that
// is not in Kafka, and the events under it would be missing for good
// without anybody knowing.
//
// It must reach the high watermark, not stop at the last stable offset:
// another sink's open transaction on the shared partition holds the last
// stable offset back, and our own newer checkpoint may sit above it. Such a
// transaction ends within its transaction timeout, so the wait is bounded;
// ctx bounds it too. The caller must have fenced its predecessors first, so
// none of this sink's own transactions is still open.
func (s *checkpointStore) read(ctx context.Context, adm *kadm.Client, connOpts []kgo.Opt, known Checkpoint, from int64) (Checkpoint, int64, error) {
	end, err := s.End(ctx, adm)
	if err != nil {
		return known, from, err
	}
	if from >= end {
		if !known.IsZero() {
			return known, from, s.lost(known, from, end)
		}
		return known, from, nil
	}
	cur := known
	last, ours, err := s.Scan(ctx, connOpts, s.sinkID, from, end, IsRetryable, func(r *kgo.Record) error {
		c, err := s.apply(cur, r)
		if err == nil {
			cur = c
		}
		return err
	})
	switch {
	case err != nil:
		return known, last, err
	case !ours && !known.IsZero():
		return known, last, s.lost(known, last, end)
	}
	return cur, last, nil
}

// lost is the error of a read that did not find known, the checkpoint
// this sink wrote (or read) at offset from and the broker confirmed, nor any
// newer one of this sink, up to end. A read_committed reader skips the
// record only when its transaction was aborted after all, and below end it
// is gone only when the log was truncated: either way the broker lost what
// it had confirmed. We saw Kafka 4.4 do the first after a fast broker
// restart (TestBrokerRestartBetweenAndDuringWrites): its coordinator
// completed a commit without writing the commit markers to a partition
// that had no leader yet, and the next aborted transaction of the same
// producer took the committed records with it.
// Nothing the sink can do brings the events back, so it stops, and says
// what to check.
func (s *checkpointStore) lost(known Checkpoint, from, end int64) error {
	return fmt.Errorf("%w: checkpoint %s of sink id %q, which the broker confirmed at %s[%d] offset %d, is no longer there for read_committed readers (the partition ends at %d): "+
		"the broker lost a transaction it had committed (its commit markers were never written and a later abort took its records) or truncated the log (an unclean leader election); "+
		"events up to %s that Write reported delivered may be missing from the topics. Restart the sink: New reads the checkpoint the broker has, and the source must deliver again from there "+
		"(pgcdc refuses to go on if its replication slot has moved past it); check the topics for gaps and the brokers' logs for transaction marker errors",
		ErrCheckpoint, known.Position, s.sinkID, s.Topic, s.Partition.Partition, from, end, known.Position)
}

// apply returns the checkpoint after r, a record of this sink read after
// cur. A checkpoint that moves backwards is an error: cur stays.
func (s *checkpointStore) apply(cur Checkpoint, r *kgo.Record) (Checkpoint, error) {
	if r.Value == nil {
		// A tombstone: an operator deleted the checkpoint on purpose,
		// to start over.
		return Checkpoint{}, nil
	}
	c, err := s.parse(r.Offset, r.Value)
	if err == nil && c.Position.Compare(cur.Position) < 0 {
		err = fmt.Errorf("%w: %s[%d] offset %d moves the checkpoint backwards, from %s to %s; two sinks may share the sink id %q: give each its own", ErrCheckpoint, s.Topic, s.Partition.Partition, r.Offset, cur.Position, c.Position, s.sinkID)
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

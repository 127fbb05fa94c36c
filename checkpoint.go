package kafkasink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

// checkpointVersion is the format version written in every checkpoint
// value. A reader refuses versions it does not know rather than guess.
const checkpointVersion = 1

// checkpointValue is the JSON value of a checkpoint record.
type checkpointValue struct {
	Version         int             `json:"version"`
	SinkID          string          `json:"sink_id"`
	Mode            string          `json:"mode"`
	Position        string          `json:"position"`
	Cursor          json.RawMessage `json:"cursor,omitempty"`
	TransactionalID string          `json:"transactional_id,omitempty"`
	WrittenAt       time.Time       `json:"written_at"`
}

// checkpointStore reads and writes one sink's checkpoint: the records keyed
// by its sink id in one partition of the checkpoint topic.
type checkpointStore struct {
	topic     string
	sinkID    string
	txnID     string // written into the value for operators; "" outside ExactlyOnce
	mode      Mode
	partition int32
}

// record returns the checkpoint record for c. The partition is set
// explicitly: it must be the one read back, whatever the partitioner.
func (s *checkpointStore) record(c Checkpoint) (*kgo.Record, error) {
	v, err := json.Marshal(checkpointValue{
		Version:         checkpointVersion,
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
	return &kgo.Record{Topic: s.topic, Partition: s.partition, Key: []byte(s.sinkID), Value: v}, nil
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
	end, err := s.endOffset(ctx, adm)
	if err != nil {
		return known, from, err
	}
	if from >= end {
		if !known.IsZero() {
			return known, from, s.lost(known, from, end)
		}
		return known, from, nil
	}
	opts := append(append([]kgo.Opt(nil), connOpts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: {s.partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return known, from, fmt.Errorf("kafkasink: checkpoint reader: %w", err)
	}
	defer cl.Close()
	return s.scan(ctx, cl, known, from, end)
}

// endOffset returns the high watermark of the checkpoint partition.
func (s *checkpointStore) endOffset(ctx context.Context, adm *kadm.Client) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, s.topic)
	if err != nil {
		return 0, fmt.Errorf("kafkasink: reading the end of checkpoint topic %q: %w", s.topic, err)
	}
	end, ok := ends.Lookup(s.topic, s.partition)
	if !ok || end.Err != nil {
		if end.Err == nil {
			end.Err = kerr.UnknownTopicOrPartition
		}
		return 0, fmt.Errorf("kafkasink: reading the end of checkpoint topic %q partition %d: %w", s.topic, s.partition, end.Err)
	}
	return end.Offset, nil
}

// scan polls the checkpoint partition with cl from offset from up to end
// and returns the newest checkpoint of this sink, known when it finds none
// newer, and the offset of the newest record of this sink it read (from
// when none). On error it returns known, and the offset all the same.
func (s *checkpointStore) scan(ctx context.Context, cl *kgo.Client, known Checkpoint, from, end int64) (Checkpoint, int64, error) {
	cur, next := known, from
	var bad, lastFetchErr error
	ours := false // a record of this sink was read
	for next < end && bad == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return known, from, s.stalled(ctx, next, end, lastFetchErr)
		}
		for _, fe := range fetches.Errors() {
			if !IsRetryable(fe.Err) {
				return known, from, fmt.Errorf("kafkasink: reading checkpoint topic %q partition %d: %w", s.topic, s.partition, fe.Err)
			}
			lastFetchErr = fe.Err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if bad != nil || r.Attrs.IsControl() || string(r.Key) != s.sinkID {
				return
			}
			ours = true
			from = r.Offset
			cur, bad = s.apply(cur, r)
		})
	}
	if bad != nil {
		return known, from, bad
	}
	if !ours && !known.IsZero() {
		return known, from, s.lost(known, from, end)
	}
	return cur, from, nil
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
		ErrCheckpoint, known.Position, s.sinkID, s.topic, s.partition, from, end, known.Position)
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
		err = fmt.Errorf("%w: %s[%d] offset %d moves the checkpoint backwards, from %s to %s; two sinks may share the sink id %q: give each its own", ErrCheckpoint, s.topic, s.partition, r.Offset, cur.Position, c.Position, s.sinkID)
	}
	if err != nil {
		return cur, err
	}
	return c, nil
}

// parse decodes one checkpoint value of this sink.
func (s *checkpointStore) parse(offset int64, value []byte) (Checkpoint, error) {
	var v checkpointValue
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&v); err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %s[%d] offset %d: value is not checkpoint JSON: %v", ErrCheckpoint, s.topic, s.partition, offset, err)
	}
	if v.Version != checkpointVersion {
		return Checkpoint{}, fmt.Errorf("%w: %s[%d] offset %d: format version %d, this library reads version %d; upgrade kafkasink", ErrCheckpoint, s.topic, s.partition, offset, v.Version, checkpointVersion)
	}
	pos, err := ParsePosition(v.Position)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %s[%d] offset %d: %v", ErrCheckpoint, s.topic, s.partition, offset, err)
	}
	mode, err := ParseMode(v.Mode)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %s[%d] offset %d: %v", ErrCheckpoint, s.topic, s.partition, offset, err)
	}
	return Checkpoint{Position: pos, Cursor: v.Cursor, Mode: mode, Time: v.WrittenAt}, nil
}

// stalled explains why the read did not reach end, at offset next, before
// ctx ended: fetching kept failing, or an open transaction held the last
// stable offset back.
func (s *checkpointStore) stalled(ctx context.Context, next, end int64, lastFetchErr error) error {
	if lastFetchErr != nil {
		return fmt.Errorf("kafkasink: reading checkpoint topic %q partition %d at offset %d of %d: fetching kept failing (last: %v): %w", s.topic, s.partition, next, end, lastFetchErr, context.Cause(ctx))
	}
	return fmt.Errorf("kafkasink: reading checkpoint topic %q partition %d at offset %d of %d: an open transaction holds the partition's last stable offset back (another sink's, which ends within its transaction timeout, or one a restarted broker has not finished yet; kafka-transactions.sh --find-hanging lists them): %w", s.topic, s.partition, next, end, context.Cause(ctx))
}

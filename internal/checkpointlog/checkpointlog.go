// Package checkpointlog reads and writes the records of a sink's
// checkpoint log as raw values (the sink id as key, the position text,
// the cursor bytes, the offsets): the JSON value of a checkpoint record
// (Value, format Version), the end of the checkpoint partition, a read of
// the partition as a read_committed consumer sees it, from an offset up
// to that end, which notices a known checkpoint the broker lost
// (LostError), and a write of records at once, in one transaction or one
// produce. The caller turns the values into its checkpoint and decides
// what a record means for the sink (a checkpoint that moves backwards,
// one the broker lost).
package checkpointlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/committed"
)

// Version is the format version written in every checkpoint value. A
// reader refuses versions it does not know rather than guess.
const Version = 1

// Value is the JSON value of a checkpoint record.
type Value struct {
	Version         int             `json:"version"`
	SinkID          string          `json:"sink_id"`
	Mode            string          `json:"mode"`
	Position        string          `json:"position"`
	Cursor          json.RawMessage `json:"cursor,omitempty"`
	TransactionalID string          `json:"transactional_id,omitempty"`
	WrittenAt       time.Time       `json:"written_at"`
}

// Encode returns v in JSON, as format Version.
func Encode(v Value) ([]byte, error) {
	v.Version = Version
	return json.Marshal(v)
}

// Decode parses a checkpoint value of format Version.
func Decode(value []byte) (Value, error) {
	var v Value
	if err := json.NewDecoder(bytes.NewReader(value)).Decode(&v); err != nil {
		return Value{}, fmt.Errorf("value is not checkpoint JSON: %v", err)
	}
	if v.Version != Version {
		return Value{}, fmt.Errorf("format version %d, this library reads version %d; upgrade kafkasink", v.Version, Version)
	}
	return v, nil
}

// SameCursor reports whether a and b are the same cursor once stored:
// json.Marshal compacts a cursor in a checkpoint value.
func SameCursor(a, b json.RawMessage) bool {
	return bytes.Equal(compact(a), compact(b))
}

// compact is raw as json.Marshal stores it in a checkpoint value.
func compact(raw json.RawMessage) []byte {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// Partition is the partition of the checkpoint topic a sink's records
// are in.
type Partition struct {
	Topic     string
	Partition int32
}

// End returns the high watermark of the partition.
func (p Partition) End(ctx context.Context, adm *kadm.Client) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, p.Topic)
	if err != nil {
		return 0, fmt.Errorf("kafkasink: reading the end of checkpoint topic %q: %w", p.Topic, err)
	}
	end, ok := ends.Lookup(p.Topic, p.Partition)
	if !ok || end.Err != nil {
		if end.Err == nil {
			end.Err = kerr.UnknownTopicOrPartition
		}
		return 0, fmt.Errorf("kafkasink: reading the end of checkpoint topic %q partition %d: %w", p.Topic, p.Partition, end.Err)
	}
	return end.Offset, nil
}

// Write writes records at once: in one transaction of cl, committed
// within commitTimeout, when transactional, else in one acknowledged
// produce. It returns once the broker confirmed them; after a commit that
// failed, only a read back tells whether they were written.
func Write(ctx context.Context, cl *kgo.Client, transactional bool, commitTimeout time.Duration, records ...*kgo.Record) error {
	if transactional {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
	}
	produceErr := cl.ProduceSync(ctx, records...).FirstErr()
	if transactional {
		commit := kgo.TryCommit
		if produceErr != nil {
			commit = kgo.TryAbort
		}
		cctx, cancel := context.WithTimeout(ctx, commitTimeout)
		endErr := cl.EndTransaction(cctx, commit)
		cancel()
		if produceErr == nil && endErr != nil {
			return fmt.Errorf("committing: %w (read the checkpoint back to know whether it moved)", endErr)
		}
	}
	return produceErr
}

// scan reads the partition with a client of opts, read_committed, from
// offset from up to end, and calls apply for each record keyed key, in
// order, until apply fails, whose error it returns. It returns the
// offset of the last record of key it read (from when none), and whether
// it read one, also when it fails. A fetch error that retryable refuses
// ends the read; so does ctx, with an error that says why the read had
// not reached end.
func (p Partition) scan(ctx context.Context, opts []kgo.Opt, key string, from, end int64, retryable func(error) bool, apply func(*kgo.Record) error) (last int64, read bool, err error) {
	cl, err := committed.Reader(opts, p.Topic, p.Partition, from)
	if err != nil {
		return from, false, fmt.Errorf("kafkasink: checkpoint reader: %w", err)
	}
	defer cl.Close()
	last, next := from, from
	var bad, lastFetchErr error
	for next < end && bad == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return last, read, p.stalled(ctx, next, end, lastFetchErr)
		}
		for _, fe := range fetches.Errors() {
			if !retryable(fe.Err) {
				return last, read, fmt.Errorf("kafkasink: reading checkpoint topic %q partition %d: %w", p.Topic, p.Partition, fe.Err)
			}
			lastFetchErr = fe.Err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if bad != nil || r.Attrs.IsControl() || string(r.Key) != key {
				return
			}
			read, last = true, r.Offset
			bad = apply(r)
		})
	}
	return last, read, bad
}

// stalled explains why the read did not reach end, at offset next, before
// ctx ended: fetching kept failing, or an open transaction held the last
// stable offset back.
func (p Partition) stalled(ctx context.Context, next, end int64, lastFetchErr error) error {
	if lastFetchErr != nil {
		return fmt.Errorf("kafkasink: reading checkpoint topic %q partition %d at offset %d of %d: fetching kept failing (last: %v): %w", p.Topic, p.Partition, next, end, lastFetchErr, context.Cause(ctx))
	}
	return fmt.Errorf("kafkasink: reading checkpoint topic %q partition %d at offset %d of %d: an open transaction holds the partition's last stable offset back (another sink's, which ends within its transaction timeout, or one a restarted broker has not finished yet; kafka-transactions.sh --find-hanging lists them): %w", p.Topic, p.Partition, next, end, context.Cause(ctx))
}

package checkpointlog

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Read reads the partition with a client of opts, read_committed, up to
// its high watermark, and calls apply with the offset and value (nil for
// a tombstone) of each record keyed key from offset from, in order, until
// apply fails, whose error it returns. known is the position text of the
// checkpoint of key already known, read or written at offset from, or ""
// when none is. It returns the offset of the newest record of key it saw
// (from when it saw none), also when it fails: where the next read
// starts.
//
// A known checkpoint is the record at from, which the broker confirmed:
// the read must find it there, or a newer one of key. When it finds
// neither, the broker lost a write it had confirmed, and Read returns a
// *LostError instead of trusting memory: a later commit would otherwise
// carry on from a checkpoint that is not in Kafka, and the events under it
// would be missing for good without anybody knowing.
//
// It must reach the high watermark, not stop at the last stable offset:
// another sink's open transaction on the shared partition holds the last
// stable offset back, and our own newer checkpoint may sit above it. Such
// a transaction ends within its transaction timeout, so the wait is
// bounded; ctx bounds it too. The caller must have fenced its predecessors
// first, so none of its own transactions is still open.
func (p Partition) Read(ctx context.Context, adm *kadm.Client, opts []kgo.Opt, key, known string, from int64, retryable func(error) bool, apply func(offset int64, value []byte) error) (int64, error) {
	end, err := p.End(ctx, adm)
	if err != nil {
		return from, err
	}
	if from >= end {
		if known != "" {
			return from, &LostError{p, key, known, from, end}
		}
		return from, nil
	}
	last, ours, err := p.scan(ctx, opts, key, from, end, retryable, func(r *kgo.Record) error { return apply(r.Offset, r.Value) })
	switch {
	case err != nil:
		return last, err
	case !ours && known != "":
		return last, &LostError{p, key, known, last, end}
	}
	return last, nil
}

// LostError is the error of a read that did not find the known
// checkpoint, at position Known, of sink id Key, which was written (or
// read) at offset From and the broker confirmed, nor any newer one of the
// sink, up to End. A read_committed reader skips the record only when its
// transaction was aborted after all, and below End it is gone only when
// the log was truncated: either way the broker lost what it had
// confirmed. We saw Kafka 4.4 do the first after a fast broker restart
// (TestBrokerRestartBetweenAndDuringWrites): its coordinator completed a
// commit without writing the commit markers to a partition that had no
// leader yet, and the next aborted transaction of the same producer took
// the committed records with it.
// Nothing the sink can do brings the events back, so it stops, and the
// error says what to check.
type LostError struct {
	Partition
	Key, Known string
	From, End  int64
}

func (e *LostError) Error() string {
	return fmt.Sprintf("checkpoint %s of sink id %q, which the broker confirmed at %s[%d] offset %d, is no longer there for read_committed readers (the partition ends at %d): "+
		"the broker lost a transaction it had committed (its commit markers were never written and a later abort took its records) or truncated the log (an unclean leader election); "+
		"events up to %s that Write reported delivered may be missing from the topics. Restart the sink: New reads the checkpoint the broker has, and the source must deliver again from there "+
		"(pgcdc refuses to go on if its replication slot has moved past it); check the topics for gaps and the brokers' logs for transaction marker errors",
		e.Known, e.Key, e.Topic, e.Partition.Partition, e.From, e.End, e.Known)
}

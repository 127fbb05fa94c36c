// Package refusals finds, among records a produce failed, those the broker
// refuses on their own (a record over a lowered max.message.bytes,
// INVALID_RECORD, a POLICY_VIOLATION), and sends records in runs that fit
// their topics' limits.
//
// kgo sends each partition's records in batches and reports the broker's
// refusal of a batch, with its bare code, to every record of the batch and
// to every record buffered after it in that partition; the per-record
// errors of KIP-467 and the broker's error message are not passed on. So
// the refused records are found by sending the failed records again,
// each partition's in runs that fit its topic's limit with one run in
// flight per partition, and bisecting each run that fails, until each
// refused record failed on its own (Probe, Find). What becomes of the
// refused ones is the caller's.
package refusals

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/produced"
)

// codes are the broker's answers to a produce that a single record can
// earn on its own. A batch can earn them too (MESSAGE_TOO_LARGE for a
// batch over a lowered max.message.bytes): Probe tells the two apart.
var codes = []*kerr.Error{
	kerr.MessageTooLarge,
	kerr.RecordListTooLarge,
	kerr.InvalidRecord,
	kerr.InvalidTimestamp,
	kerr.PolicyViolation,
}

// Code returns the refusal code err carries, or nil.
func Code(err error) *kerr.Error {
	for _, c := range codes {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}

// TooLarge reports whether err refuses a record for its size.
func TooLarge(err error) bool {
	c := Code(err)
	return c == kerr.MessageTooLarge || c == kerr.RecordListTooLarge
}

// Explain says that the broker refused r, of size bytes of key, value
// and headers, on its own, with the broker's code and its description
// (kgo passes on no more), and how to fix it; limit is the topic's record
// limit, read again.
func Explain(r *kgo.Record, err error, size, limit int) error {
	var fix string
	switch Code(err) {
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		fix = fmt.Sprintf("the record of %d bytes of key, value and headers is over what the topic accepts now (the sink's limit, read again: %d); raise the topic's max.message.bytes (and Config.MaxRecordBytes), or use a compression that shrinks it", size, limit)
	case kerr.InvalidTimestamp:
		fix = "its timestamp is outside what the topic's message.timestamp.before.max.ms and message.timestamp.after.max.ms allow (with message.timestamp.type=CreateTime); raise them, or use LogAppendTime"
	case kerr.PolicyViolation:
		fix = "a policy on the broker refuses it; ask the broker's operator"
	default:
		fix = "the broker validates each record against the topic's configuration (a compacted topic refuses a record without a key); fix the event or the topic"
	}
	return fmt.Errorf("the broker refused the record for %s[%d] on its own: %w; %s", r.Topic, r.Partition, err, fix)
}

// Layout is what runs are made by: where each record goes, and how much
// a run may hold.
type Layout interface {
	// Partition is the partition the producing client sends r to.
	Partition(r *kgo.Record) int32
	// Limit is the most a run for topic may hold, as Size counts.
	Limit(topic string) int
	// Size is what r counts against its topic's Limit.
	Size(r *kgo.Record) int
}

// partition names one partition.
type partition struct {
	topic     string
	partition int32
}

// Queues are records waiting to be sent in runs: each partition's, in
// order, in runs of at most its topic's Limit (a record over the limit is
// a run of its own), one run per partition in each round.
type Queues struct {
	runs  map[partition][][]*kgo.Record
	order []partition // by the first record of each
}

// NewQueues queues records by the partition l sends each to.
func NewQueues(records []*kgo.Record, l Layout) *Queues {
	byPartition := make(map[partition][]*kgo.Record)
	q := &Queues{runs: make(map[partition][][]*kgo.Record)}
	for _, r := range records {
		k := partition{r.Topic, l.Partition(r)}
		if _, ok := byPartition[k]; !ok {
			q.order = append(q.order, k)
		}
		byPartition[k] = append(byPartition[k], r)
	}
	for k, rs := range byPartition {
		q.runs[k] = splitRuns(rs, l.Limit(k.topic), l.Size)
	}
	return q
}

// splitRuns splits rs, in order, into runs of at most limit by size, one
// record at least each.
func splitRuns(rs []*kgo.Record, limit int, size func(*kgo.Record) int) [][]*kgo.Record {
	var out [][]*kgo.Record
	start, sum := 0, 0
	for j, r := range rs {
		n := size(r)
		if j > start && sum+n > limit {
			out = append(out, rs[start:j:j])
			start, sum = j, 0
		}
		sum += n
	}
	if start < len(rs) {
		out = append(out, rs[start:len(rs):len(rs)])
	}
	return out
}

// queued is a run taken from its partition's queue.
type queued struct {
	k   partition
	run []*kgo.Record
}

// take takes the next run of each partition that has one, in the order
// of their first records; none when every run was taken.
func (q *Queues) take() []queued {
	var round []queued
	for _, k := range q.order {
		if runs := q.runs[k]; len(runs) > 0 {
			q.runs[k] = runs[1:]
			round = append(round, queued{k, runs[0]})
		}
	}
	return round
}

// Round takes the next run of each partition that has one, in the order
// of their first records; none when every run was taken.
func (q *Queues) Round() [][]*kgo.Record {
	round := q.take()
	runs := make([][]*kgo.Record, len(round))
	for i, t := range round {
		runs[i] = t.run
	}
	return runs
}

// Probe finds which of q's records the broker refuses on their own.
// send sends one round of runs, one per partition, and returns the
// records that failed with a refusal code; an error (a failure with
// another code, a flush that did not finish) ends the probe: it cannot be
// pinned to a record. As a partition never has more than one run in
// flight, a failure is that run's own: when exactly one record of a run
// failed, the batch the broker refused held it alone (kgo fails a
// refused batch and the batches after it in its partition, never one
// before), so it is refused; when more failed, they are split in halves,
// sent in the next rounds. k refused records among n of a partition take
// about n/run + 2k·log2(run) rounds, each one round trip.
//
// It returns the refused records with the broker's error, the records it
// sent and the rounds.
func (q *Queues) Probe(send func(round [][]*kgo.Record) (map[*kgo.Record]error, error)) (map[*kgo.Record]error, int, int, error) {
	refused := make(map[*kgo.Record]error)
	sent, rounds := 0, 0
	for {
		round := q.take()
		if len(round) == 0 {
			return refused, sent, rounds, nil
		}
		runs := make([][]*kgo.Record, len(round))
		for i, t := range round {
			runs[i] = t.run
			sent += len(t.run)
		}
		rounds++
		failed, err := send(runs)
		if err != nil {
			return nil, sent, rounds, err
		}
		for _, t := range round {
			var fs []*kgo.Record
			for _, r := range t.run {
				if failed[r] != nil {
					fs = append(fs, r)
				}
			}
			switch {
			case len(fs) == 1:
				refused[fs[0]] = failed[fs[0]]
			case len(fs) > 1:
				h := len(fs) / 2
				q.runs[t.k] = append([][]*kgo.Record{fs[:h:h], fs[h:]}, q.runs[t.k]...)
			}
		}
	}
}

// OnlyAmong reports whether every failure in all is a refusal code on
// one of records, so that the refused ones may be found among them.
func OnlyAmong(records []*kgo.Record, all []produced.Failure) bool {
	if len(all) == 0 {
		return false
	}
	in := make(map[*kgo.Record]bool, len(records))
	for _, r := range records {
		in[r] = true
	}
	for _, f := range all {
		if Code(f.Err) == nil || !in[f.Record] {
			return false
		}
	}
	return true
}

package kafkasinktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted returns every record of topics that a consumer with
// isolation.level=read_committed sees, decoded (see Decode), in offset
// order within each partition. It reads each partition from its start up to
// its last stable offset, taken when it is called: committed records are
// returned, records of aborted transactions and control records are not,
// and records after a transaction still open are not yet visible. It
// fails t when a topic cannot be read within a minute or a record cannot
// be decoded.
func ReadCommitted(t testing.TB, brokers []string, topics ...string) []Record {
	t.Helper()
	return ReadCommittedWith(t, brokers, nil, topics...)
}

// ReadCommittedRaw is ReadCommitted without decoding: the records as a
// read_committed consumer gets them, for topics of encoders no Transcode
// reads and for tests of the bytes themselves. It fails t when the topics
// cannot be read within a minute.
func ReadCommittedRaw(t testing.TB, brokers []string, topics ...string) []*kgo.Record {
	t.Helper()
	recs, err := FetchCommitted(context.Background(), brokers, topics...)
	if err != nil {
		t.Fatalf("kafkasinktest: %v", err)
	}
	return recs
}

// Transcode turns a record that an encoder outside this module wrote
// into one Decode reads: its value into kafkasink.JSONEncoder's event
// JSON and its key into the sink's text or JSON key. It must not change
// the record it is given. kafkasinkavro.Decoder's Transcode is one, for
// Avro in the Confluent wire format, and jsonschema.Decoder's another,
// for JSON Schema's.
type Transcode func(ctx context.Context, r *kgo.Record) (*kgo.Record, error)

// ReadCommittedWith is ReadCommitted for topics an encoder outside this
// module wrote: each record goes through transcode (nil: none) before
// Decode reads it, so that AssertExactlyOnce checks those topics too. It
// fails t when transcode returns an error.
func ReadCommittedWith(t testing.TB, brokers []string, transcode Transcode, topics ...string) []Record {
	t.Helper()
	ctx := context.Background()
	raw, err := FetchCommitted(ctx, brokers, topics...)
	if err != nil {
		t.Fatalf("kafkasinktest: %v", err)
	}
	out := make([]Record, 0, len(raw))
	for _, r := range raw {
		if transcode != nil {
			if r, err = transcode(ctx, r); err != nil {
				t.Fatalf("kafkasinktest: transcoding: %v", err)
			}
		}
		rec, err := Decode(r)
		if err != nil {
			t.Fatalf("kafkasinktest: %v", err)
		}
		out = append(out, rec)
	}
	return out
}

// FetchCommitted is ReadCommitted without decoding, returning its error.
//
// A partition is done when the reader passes its last stable offset. Its
// last record below that offset can be an aborted one whose abort marker
// lies above it; the reader then never sees that offset, so a partition
// that yields nothing new for five seconds is done as well. ctx bounds
// the whole read, as does a limit of one minute.
func FetchCommitted(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	return fetch(ctx, brokers, true, topics)
}

// FetchUncommitted reads every data record of topics up to their high
// watermarks, as a read_uncommitted consumer does: records of aborted and
// open transactions included. Tests use it to prove that a failure left
// records behind that read_committed consumers must not see.
func FetchUncommitted(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	return fetch(ctx, brokers, false, topics)
}

// readUpTo returns where to stop reading: the high watermarks, or for
// committed reads the last stable offsets. A broker acknowledges a commit
// before it has written the commit markers, so right after a Write the last
// stable offset can still stop short of it: wait up to three seconds for
// it to reach the high watermark, then take it as it is (a test may hold a
// transaction open on purpose).
func readUpTo(ctx context.Context, adm *kadm.Client, committed bool, topics []string) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		hw, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil || !committed {
			return hw, err
		}
		lso, err := adm.ListCommittedOffsets(ctx, topics...)
		if err != nil {
			return nil, err
		}
		caughtUp := true
		lso.Each(func(o kadm.ListedOffset) {
			if h, ok := hw.Lookup(o.Topic, o.Partition); ok && h.Offset != o.Offset {
				caughtUp = false
			}
		})
		if caughtUp || time.Now().After(deadline) {
			return lso, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fetch reads topics to their last stable offsets (committed) or high
// watermarks (uncommitted).
func fetch(ctx context.Context, brokers []string, committed bool, topics []string) ([]*kgo.Record, error) {
	const idle = 5 * time.Second
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	ends, err := readUpTo(ctx, kadm.NewClient(adm), committed, topics)
	if err != nil {
		return nil, fmt.Errorf("reading %v: listing offsets: %w", topics, err)
	}
	want := make(map[string]map[int32]int64)
	starts := make(map[string]map[int32]kgo.Offset)
	remaining := 0
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return // a topic nobody wrote to yet: nothing to see
		}
		if o.Err != nil {
			listErr = errors.Join(listErr, fmt.Errorf("%s[%d]: %w", o.Topic, o.Partition, o.Err))
			return
		}
		if o.Offset == 0 {
			return
		}
		if want[o.Topic] == nil {
			want[o.Topic] = make(map[int32]int64)
			starts[o.Topic] = make(map[int32]kgo.Offset)
		}
		want[o.Topic][o.Partition] = o.Offset
		starts[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		remaining++
	})
	if listErr != nil {
		return nil, fmt.Errorf("reading %v: listing offsets: %w", topics, listErr)
	}
	if remaining == 0 {
		return nil, nil
	}
	// No fetch session: the read is short, and franz-go (v1.22.3) races
	// closing a client whose session a fetch in flight still writes.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.DisableFetchSessions(),
		kgo.ConsumePartitions(starts),
		kgo.FetchIsolationLevel(isolation),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	for remaining > 0 {
		pctx, pcancel := context.WithTimeout(ctx, idle)
		fetches := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %v: %d partition(s) short of their last stable offsets %v: %w", topics, remaining, want, ctx.Err())
		}
		if pctx.Err() != nil && fetches.NumRecords() == 0 {
			break // idle: nothing more is readable
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) {
				continue
			}
			return nil, fmt.Errorf("fetching %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Topic][r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset == end-1 {
				remaining--
			}
		})
	}
	return out, nil
}

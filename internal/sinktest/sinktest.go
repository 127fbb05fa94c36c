// Package sinktest is the test kit of kafkasink: an in-process fake
// cluster, event generators, and a read_committed reader that returns
// exactly what a consumer would see.
package sinktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

// Cluster starts an in-process fake Kafka cluster for the test and closes
// it at the end.
func Cluster(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("starting fake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// UniqueName makes a name for the topics, sink ids and checkpoint topics of
// one test that collides neither with another test's nor with an earlier
// run's against the same long-lived broker: the clock, then the test's
// name made fit for a topic.
func UniqueName(t testing.TB) string {
	return fmt.Sprintf("t%d-%s", time.Now().UnixNano()%1e9, strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name())))
}

// Inserts returns n insert events of schema.table with ids from, from+1...,
// at commit LSN lsn with indexes 0..n-1.
func Inserts(schema, table string, lsn kafkasink.LSN, from, n int) []kafkasink.Event {
	out := make([]kafkasink.Event, n)
	for i := range out {
		id := from + i
		out[i] = kafkasink.Event{
			Op:       kafkasink.OpInsert,
			Schema:   schema,
			Table:    table,
			Position: kafkasink.Position{LSN: lsn, Index: uint64(i)},
			LSN:      lsn - kafkasink.LSN(n-i),
			XID:      uint32(lsn),
			Commit:   time.Unix(1767225600, 0).UTC(),
			Key:      []string{"id"},
			After: kafkasink.Row{
				{Name: "id", Value: int64(id)},
				{Name: "name", Value: fmt.Sprintf("row-%d", id)},
			},
		}
	}
	return out
}

// Stream returns batch b of the deterministic source: events at commit LSN
// b*16, inserts and updates of ids cycling through keys, every seventh a
// delete. Any run of the program produces the same stream.
func Stream(b, events, keys int) []kafkasink.Event {
	out := make([]kafkasink.Event, events)
	for i := range out {
		n := (b-1)*events + i
		id := int64(n%keys + 1)
		e := kafkasink.Event{
			Op: kafkasink.OpUpdate, Schema: "public", Table: "items",
			Position: kafkasink.Position{LSN: kafkasink.LSN(b * 16), Index: uint64(i)},
			LSN:      kafkasink.LSN(b*16 - events + i), XID: uint32(b), Commit: time.Unix(1767225600+int64(b), 0).UTC(),
			Key: []string{"id"},
		}
		row := kafkasink.Row{{Name: "id", Value: id}, {Name: "seq", Value: int64(n)}, {Name: "note", Value: "event " + strconv.Itoa(n)}}
		switch {
		case n < keys:
			e.Op, e.After = kafkasink.OpInsert, row
		case n%7 == 6:
			e.Op, e.Before = kafkasink.OpDelete, row[:1]
		default:
			e.After = row
		}
		out[i] = e
	}
	return out
}

// ReadCommitted reads every record of the topics that a consumer with
// isolation.level=read_committed sees: everything committed below each
// partition's last stable offset, taken when it is called. Control records
// and aborted records are not returned.
func ReadCommitted(t testing.TB, brokers []string, topics ...string) []*kgo.Record {
	t.Helper()
	recs, err := ReadCommittedErr(context.Background(), brokers, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ReadUncommitted reads every data record of the topics up to their high
// watermarks, as a read_uncommitted consumer does: records of aborted and
// open transactions included. Tests use it to prove a crash left records
// behind that read_committed readers must not see.
func ReadUncommitted(t testing.TB, brokers []string, topics ...string) []*kgo.Record {
	t.Helper()
	recs, err := read(context.Background(), brokers, false, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ReadCommittedErr is ReadCommitted returning its error.
//
// A partition is done when the reader passes its last stable offset. Its
// last record below that offset can be an aborted one whose abort marker
// lies above it; the reader then never sees that offset, so a partition
// that yields nothing new for idle is done as well.
func ReadCommittedErr(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	return read(ctx, brokers, true, topics...)
}

// readUpTo returns where to stop reading: the high watermarks, or for
// committed reads the last stable offsets. A broker acknowledges a commit
// before it has written the commit markers, so right after a Write the last
// stable offset can still stop short of it: wait a moment for it to reach
// the high watermark, then take it as it is (a test may hold a transaction
// open on purpose).
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

// read reads topics to their last stable offsets (committed) or high
// watermarks (uncommitted).
func read(ctx context.Context, brokers []string, committed bool, topics ...string) ([]*kgo.Record, error) {
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
		return nil, err
	}
	want := make(map[string]map[int32]int64)
	starts := make(map[string]map[int32]kgo.Offset)
	remaining := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset == 0 {
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
	if remaining == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
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

// Header returns the value of the record's header key, or "".
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// CheckExactlyOnce checks that records hold each event id of want exactly
// once, nothing else, and that records of one key keep the order of want.
func CheckExactlyOnce(t testing.TB, records []*kgo.Record, want []kafkasink.Event) {
	t.Helper()
	seen := make(map[string]int)
	for _, r := range records {
		seen[Header(r, kafkasink.HeaderID)]++
	}
	missing, dup := 0, 0
	for i := range want {
		id := want[i].ID()
		switch seen[id] {
		case 0:
			missing++
			if missing <= 5 {
				t.Errorf("event %s missing", id)
			}
		case 1:
		default:
			dup++
			if dup <= 5 {
				t.Errorf("event %s seen %d times", id, seen[id])
			}
		}
		delete(seen, id)
	}
	for id, n := range seen {
		t.Errorf("unexpected record with id %q (%d times)", id, n)
	}
	if missing+dup > 0 {
		t.Fatalf("%d of %d events missing, %d duplicated, among %d records", missing, len(want), dup, len(records))
	}
	// Order per key: the positions of one key's records must increase.
	last := make(map[string]kafkasink.Position)
	for _, r := range records {
		pos, err := kafkasink.ParsePosition(Header(r, kafkasink.HeaderID))
		if err != nil {
			t.Fatalf("record id: %v", err)
		}
		k := r.Topic + "\x00" + string(r.Key)
		if prev, ok := last[k]; ok && pos.Compare(prev) <= 0 {
			t.Errorf("key %q of %s: position %s after %s", r.Key, r.Topic, pos, prev)
		}
		last[k] = pos
	}
}

// Package sinktest is the root module's own test kit: the public one,
// kafkasinktest (fake cluster, readers, the exactly-once check, the real
// environment) and kafkasinktest/pgtest, in the shapes and under the
// names the root module's tests use, plus event streams, the test
// environment's variables and its external readers. The other modules'
// tests use the public kit itself: a module does not import another
// module's internal packages (imports_test.go checks it).
package sinktest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// Cluster starts an in-process fake Kafka cluster for the test, as
// kafkasinktest.NewCluster does (fencing like Kafka included), with one
// broker and kfake's default of 10 partitions unless opts say otherwise:
// the library's tests were written against those.
func Cluster(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	c := kafkasinktest.NewCluster(t, kafkasinktest.Brokers(1), kafkasinktest.Partitions(10), kafkasinktest.KfakeOptions(opts...))
	return c.Kfake(), c.Brokers()
}

// UniqueName is kafkasinktest.UniqueName.
func UniqueName(t testing.TB) string { return kafkasinktest.UniqueName(t) }

// Inserts is kafkasinktest.Inserts.
func Inserts(schema, table string, lsn kafkasink.LSN, from, n int) []kafkasink.Event {
	return kafkasinktest.Inserts(schema, table, lsn, from, n)
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

// ReadCommitted is kafkasinktest.ReadCommittedRaw: every record of the
// topics that a consumer with isolation.level=read_committed sees.
func ReadCommitted(t testing.TB, brokers []string, topics ...string) []*kgo.Record {
	t.Helper()
	return kafkasinktest.ReadCommittedRaw(t, brokers, topics...)
}

// ReadUncommitted reads every data record of the topics up to their high
// watermarks (kafkasinktest.FetchUncommitted). Tests use it to prove a
// crash left records behind that read_committed readers must not see.
func ReadUncommitted(t testing.TB, brokers []string, topics ...string) []*kgo.Record {
	t.Helper()
	recs, err := kafkasinktest.FetchUncommitted(context.Background(), brokers, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Header is kafkasinktest.Header.
func Header(r *kgo.Record, key string) string { return kafkasinktest.Header(r, key) }

// CheckExactlyOnce checks that records hold each event id of want exactly
// once, nothing else, and that records of one key keep the order of want
// (kafkasinktest.AssertExactlyOnce, on the records' headers only, so any
// encoder's records can be checked), and stops the test when they do not.
func CheckExactlyOnce(t testing.TB, records []*kgo.Record, want []kafkasink.Event) {
	t.Helper()
	got := make([]kafkasinktest.Record, len(records))
	for i, r := range records {
		var err error
		if got[i], err = kafkasinktest.DecodeHeaders(r); err != nil {
			t.Fatal(err)
		}
	}
	if !kafkasinktest.AssertExactlyOnce(t, got, want) {
		t.FailNow()
	}
}

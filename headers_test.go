package kafkasink_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/rawrecord"
)

// headerEvents are two batches (commit LSNs 100 and 200) of inserts into
// public.a and public.b, interleaved, keyed by ids unique across both: the
// first event of the second batch has the table of the last of the first,
// so a header value shared across Writes would show.
func headerEvents() [][]kafkasink.Event {
	var batches [][]kafkasink.Event
	id := 1
	for _, lsn := range []kafkasink.LSN{100, 200} {
		var batch []kafkasink.Event
		for i, table := range []string{"a", "a", "b", "a"} {
			e := sinktest.Inserts("public", table, lsn, id, 1)[0]
			e.Position.Index, e.LSN = uint64(i), lsn-kafkasink.LSN(10-i)
			batch = append(batch, e)
			id++
		}
		batches = append(batches, batch)
	}
	return batches
}

// checkHeaders checks that the records of events (read back, keyed by
// their id column) carry exactly want's headers of each.
func checkHeaders(t *testing.T, records []*kgo.Record, events []kafkasink.Event, want func(e *kafkasink.Event) []kgo.RecordHeader) {
	t.Helper()
	byKey := make(map[string]*kafkasink.Event)
	for i := range events {
		byKey[strconv.FormatInt(events[i].After[0].Value.(int64), 10)] = &events[i]
	}
	if len(records) != len(events) {
		t.Fatalf("read %d records, want %d", len(records), len(events))
	}
	for _, r := range records {
		e := byKey[string(r.Key)]
		if e == nil {
			t.Fatalf("record %s[%d]@%d has key %q, of no event", r.Topic, r.Partition, r.Offset, r.Key)
		}
		if got, want := headerText(r.Headers), headerText(want(e)); got != want {
			t.Errorf("record of event %s (%s) has headers\n\t%s\nwant\n\t%s", e.ID(), r.Topic, got, want)
		}
	}
}

func headerText(hs []kgo.RecordHeader) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(h.Key + "=" + string(h.Value) + " ")
	}
	return b.String()
}

// TestHeaderSets writes two batches with each Config.Headers and reads
// them back: every record carries exactly the headers of its set, with
// its own event's values (after the first Write, the second reuses its
// memory), and the test kit decodes the records of the sets that keep the
// id and the op, and refuses the others naming the setting.
func TestHeaderSets(t *testing.T) {
	t.Parallel()
	for _, set := range []kafkasink.HeaderSet{kafkasink.HeadersAll, kafkasink.HeadersMinimal, kafkasink.HeadersNone} {
		t.Run(set.String(), func(t *testing.T) {
			t.Parallel()
			_, brokers := sinktest.Cluster(t)
			s := newSink(t, brokers, "headers", func(c *kafkasink.Config) { c.Headers = set })
			var events []kafkasink.Event
			for _, batch := range headerEvents() {
				write(t, s, batch)
				events = append(events, batch...)
			}
			records := sinktest.ReadCommitted(t, brokers, "kafkasink.public.a", "kafkasink.public.b")
			checkHeaders(t, records, events, func(e *kafkasink.Event) []kgo.RecordHeader { return rawrecord.Headers(e, set) })

			decoded := make([]kafkasinktest.Record, len(records))
			for i, r := range records {
				d, err := kafkasinktest.Decode(r)
				if set == kafkasink.HeadersNone {
					if err == nil || !strings.Contains(err.Error(), "Config.Headers") || !strings.Contains(err.Error(), "-headers") {
						t.Fatalf("Decode of a record without headers: %v, want an error naming Config.Headers and -headers", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				decoded[i] = d
			}
			if !kafkasinktest.AssertExactlyOnce(t, decoded, events) {
				t.FailNow()
			}
		})
	}
}

// TestHeaderSetDeadLetters: a dead-lettered record carries all five
// standard headers whatever Config.Headers says, with the reason headers
// after them.
func TestHeaderSetDeadLetters(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const dlq = "kafkasink.dead-letters"
	s := newSink(t, brokers, "headers-dlq", func(c *kafkasink.Config) {
		c.Headers = kafkasink.HeadersNone
		c.DeadLetterTopic = dlq
	})
	events := sinktest.Inserts("public", "a", 100, 1, 3)
	events[1] = withColumn(events[1], "blob", make(chan int))
	write(t, s, events)

	checkHeaders(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.a"), []kafkasink.Event{events[0], events[2]},
		func(*kafkasink.Event) []kgo.RecordHeader { return nil })
	dead := sinktest.ReadCommitted(t, brokers, dlq)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	var keys []string
	for _, h := range dead[0].Headers {
		keys = append(keys, h.Key)
	}
	wantKeys := []string{kafkasink.HeaderID, kafkasink.HeaderOp, kafkasink.HeaderTable, kafkasink.HeaderLSN, kafkasink.HeaderCommitLSN,
		kafkasink.HeaderReason, kafkasink.HeaderError, kafkasink.HeaderTopic, kafkasink.HeaderValue}
	if strings.Join(keys, " ") != strings.Join(wantKeys, " ") {
		t.Fatalf("dead letter headers %v, want %v", keys, wantKeys)
	}
	if got, want := headerText(dead[0].Headers[:5]), headerText(rawrecord.Headers(&events[1], kafkasink.HeadersAll)); got != want {
		t.Errorf("dead letter standard headers\n\t%s\nwant\n\t%s", got, want)
	}
}

// TestHeaderSetDebezium: with DebeziumEncoder, the records carry the
// standard headers of the set and then Debezium's own; with HeadersNone,
// only Debezium's, as Debezium writes them.
func TestHeaderSetDebezium(t *testing.T) {
	t.Parallel()
	enc := debezium.Encoder{Name: "dbz", RunID: "run-1"}
	for _, set := range []kafkasink.HeaderSet{kafkasink.HeadersMinimal, kafkasink.HeadersNone} {
		t.Run(set.String(), func(t *testing.T) {
			t.Parallel()
			_, brokers := sinktest.Cluster(t)
			s := newSink(t, brokers, "headers-dbz", func(c *kafkasink.Config) {
				c.Headers = set
				c.Encoder = enc
			})
			events := headerEvents()[0]
			write(t, s, events)
			checkHeaders(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.a", "kafkasink.public.b"), events, func(e *kafkasink.Event) []kgo.RecordHeader {
				hs := rawrecord.Headers(e, set)
				dbz, _ := enc.AppendHeaders(nil, nil, e, nil)
				for _, h := range dbz {
					hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
				}
				return hs
			})
		})
	}
}

package kafkasink_test

import (
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestKeylessEventsHaveNullKey writes the changes of a table without a key
// (Event.Keyless) through an exactly-once sink and reads them back
// read_committed: each record, and the tombstone after the delete, has a
// null key (not an empty one, not the event id) and is in partition 0 of
// a topic of several; a truncate of it is keyed by its event id; the same
// table with key columns configured in the sink is keyed by them; and an
// event with no key columns that is not Keyless keeps its event-id key.
func TestKeylessEventsHaveNullKey(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "keyless", func(c *kafkasink.Config) {
		c.Topics = kafkasink.Topics{Prefix: "t", Partitions: 4}
		c.Encoder = debezium.Encoder{SkippedOperations: "none"}
		c.KeyColumns = map[string][]string{"public.configured": {"a"}}
	})
	row := func(a int) kafkasink.Row { return kafkasink.Row{{Name: "a", Value: a}, {Name: "b", Value: "x"}} }
	ev := func(table string, op kafkasink.Op, idx uint64, keyless bool, before, after kafkasink.Row) kafkasink.Event {
		return kafkasink.Event{Op: op, Schema: "public", Table: table, Position: kafkasink.Position{LSN: 0x100, Index: idx},
			Keyless: keyless, Before: before, After: after}
	}
	write(t, s, []kafkasink.Event{
		ev("nokey", kafkasink.OpRead, 1, true, nil, row(1)),
		ev("nokey", kafkasink.OpInsert, 2, true, nil, row(2)),
		ev("nokey", kafkasink.OpInsert, 3, true, nil, row(3)),
		ev("nokey", kafkasink.OpUpdate, 4, true, row(1), row(1)),
		ev("nokey", kafkasink.OpDelete, 5, true, row(2), nil),
		ev("nokey", kafkasink.OpTruncate, 6, true, nil, nil),
		ev("configured", kafkasink.OpInsert, 7, true, nil, row(7)),
		ev("eventid", kafkasink.OpInsert, 8, false, nil, row(8)),
	})

	recs := sinktest.ReadCommitted(t, brokers, "t.public.nokey")
	if len(recs) != 7 { // 5 changes, the delete's tombstone, the truncate
		t.Fatalf("t.public.nokey holds %d records, want 7", len(recs))
	}
	for i, r := range recs[:6] {
		if r.Key != nil || r.Partition != 0 {
			t.Errorf("record %d (value %.40q): key %q (nil: %t) in partition %d, want a null key in partition 0", i, r.Value, r.Key, r.Key == nil, r.Partition)
		}
	}
	if r := recs[6]; string(r.Key) != "0/100:6" {
		t.Errorf("truncate: key %q, want its event id 0/100:6", r.Key)
	}
	if recs[5].Value != nil {
		t.Errorf("record 5: value %.40q, want the delete's tombstone", recs[5].Value)
	}
	if r := sinktest.ReadCommitted(t, brokers, "t.public.configured"); len(r) != 1 || string(r[0].Key) != "7" {
		t.Errorf("table with configured key columns: %d records, first key %q, want one keyed 7", len(r), r[0].Key)
	}
	if r := sinktest.ReadCommitted(t, brokers, "t.public.eventid"); len(r) != 1 || string(r[0].Key) != "0/100:8" {
		t.Errorf("event without key columns, not Keyless: %d records, first key %q, want one keyed by its event id", len(r), r[0].Key)
	}
}

// TestKeylessEventOnCompactedTopicIsRejected: a keyless event (null key)
// bound for a compacted topic is rejected as no_key, with an error naming
// the table, the topic and the fix, and dead-lettered when the sink has a
// dead-letter topic; the Write's other events, keyed ones on the same
// topic included, are delivered. Without the check, the real broker refuses
// the record with INVALID_RECORD, which fails the whole transaction and
// stops the sink; the fake cluster stores it. Runs on the fake cluster,
// and on the real broker when KAFKASINK_TEST_BROKERS is set.
func TestKeylessEventOnCompactedTopicIsRejected(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, brokers []string, name string) {
		topic, dlq := name+".public.nokey", name+".dead"
		s := newSink(t, brokers, name, func(c *kafkasink.Config) {
			c.Topics = kafkasink.Topics{Prefix: name, Configs: map[string]string{"cleanup.policy": "compact"}}
			c.DeadLetterTopic = dlq
		})
		row := kafkasink.Row{{Name: "a", Value: 1}}
		events := []kafkasink.Event{
			{Op: kafkasink.OpInsert, Schema: "public", Table: "nokey", Position: kafkasink.Position{LSN: 0x100, Index: 0}, Keyless: true, After: row},
			{Op: kafkasink.OpInsert, Schema: "public", Table: "nokey", Position: kafkasink.Position{LSN: 0x100, Index: 1}, Key: []string{"a"}, After: row},
		}
		write(t, s, events)

		dead := sinktest.ReadCommitted(t, brokers, dlq)
		if len(dead) != 1 {
			t.Fatalf("%s holds %d records, want the keyless event dead-lettered", dlq, len(dead))
		}
		reason, _ := header(dead[0], kafkasink.HeaderReason)
		cause, _ := header(dead[0], kafkasink.HeaderError)
		if reason != string(kafkasink.ReasonNoKey) || !strings.Contains(cause, `"`+topic+`" is compacted`) || !strings.Contains(cause, "Config.KeyColumns") {
			t.Errorf("dead-letter record: reason %q, error %q; want no_key naming the compacted topic and Config.KeyColumns", reason, cause)
		}
		recs := sinktest.ReadCommitted(t, brokers, topic)
		if len(recs) != 1 || string(recs[0].Key) != "1" {
			t.Errorf("%s holds %d records, want the keyed event's alone (key 1)", topic, len(recs))
		}
	}
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		_, brokers := sinktest.Cluster(t)
		run(t, brokers, "compacted")
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
		run(t, brokers, name)
	})
}

// TestMatchDebeziumLossesTruncateHasNullKey: with MatchDebeziumLosses,
// DebeziumEncoder writes a TRUNCATE with a null key, as Debezium does, in
// partition 0 of a topic of several (without it, the event id); on a
// compacted topic, which refuses null keys, the truncate is dead-lettered
// as no_key, naming the option.
func TestMatchDebeziumLossesTruncateHasNullKey(t *testing.T) {
	t.Parallel()
	truncate := kafkasink.Event{Op: kafkasink.OpTruncate, Schema: "public", Table: "gone", Position: kafkasink.Position{LSN: 0x200, Index: 0}}
	for _, tc := range []struct {
		name    string
		losses  bool
		configs map[string]string
		wantKey string // "" for a null key; "dead" for dead-lettered
	}{
		{"with MatchDebeziumLosses", true, nil, ""},
		{"without", false, nil, "0/200:0"},
		{"on a compacted topic", true, map[string]string{"cleanup.policy": "compact"}, "dead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, brokers := sinktest.Cluster(t)
			s := newSink(t, brokers, "truncate-key", func(c *kafkasink.Config) {
				c.Topics = kafkasink.Topics{Prefix: "t", Partitions: 4, Configs: tc.configs}
				c.Encoder = debezium.Encoder{SkippedOperations: "none", MatchDebeziumLosses: tc.losses}
				c.DeadLetterTopic = "t.dead"
			})
			write(t, s, []kafkasink.Event{truncate})
			recs := sinktest.ReadCommitted(t, brokers, "t.public.gone")
			dead := sinktest.ReadCommitted(t, brokers, "t.dead")
			if tc.wantKey == "dead" {
				var cause string
				if len(dead) > 0 {
					cause, _ = header(dead[0], kafkasink.HeaderError)
				}
				if len(recs) != 0 || len(dead) != 1 || !strings.Contains(cause, "MatchDebeziumLosses") {
					t.Fatalf("%d records, %d dead-lettered (error %q); want the truncate dead-lettered, naming MatchDebeziumLosses", len(recs), len(dead), cause)
				}
				return
			}
			if len(recs) != 1 || len(dead) != 0 {
				t.Fatalf("%d records, %d dead-lettered; want the truncate written", len(recs), len(dead))
			}
			r := recs[0]
			switch {
			case tc.wantKey == "" && (r.Key != nil || r.Partition != 0):
				t.Errorf("key %q (nil: %t) in partition %d, want a null key in partition 0", r.Key, r.Key == nil, r.Partition)
			case tc.wantKey != "" && string(r.Key) != tc.wantKey:
				t.Errorf("key %q, want the event id %s", r.Key, tc.wantKey)
			}
		})
	}
}

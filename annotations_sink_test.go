package kafkasink_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestAnnotationsInRecords writes an insert, an update, a delete and an
// event that cannot be encoded (dead-lettered) through exactly-once sinks
// with Config.Annotations, and reads every record back read_committed:
// each value holds the annotations object (with AnnotateValue and
// AnnotateBoth), each record of an event, the tombstones and the
// dead-letter record included, their headers in sorted key order with
// their exact bytes (AnnotateHeaders and AnnotateBoth), after the sink's
// and the Encoder's own headers; the checkpoint records and
// DebeziumEncoder's BEGIN and END records carry none, as
// Config.Annotations says. Runs on the fake cluster, and on the real
// broker when KAFKASINK_TEST_BROKERS is set.
func TestAnnotationsInRecords(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, brokers []string, name string) {
		for _, c := range []struct {
			name    string
			enc     kafkasink.Encoder
			in      kafkasink.AnnotationPlace
			headers kafkasink.HeaderSet
			records int // in the table's topic
		}{
			{"json-both", kafkasink.JSONEncoder{}, kafkasink.AnnotateBoth, kafkasink.HeadersAll, 3},
			{"json-value", kafkasink.JSONEncoder{}, kafkasink.AnnotateValue, kafkasink.HeadersAll, 3},
			{"upsert-both", kafkasink.UpsertEncoder{}, kafkasink.AnnotateBoth, kafkasink.HeadersMinimal, 3},
			{"debezium-both", debezium.Encoder{WriteAnnotations: true}, kafkasink.AnnotateBoth, kafkasink.HeadersAll, 4},
			{"debezium-headers", debezium.Encoder{}, kafkasink.AnnotateHeaders, kafkasink.HeadersNone, 4},
			{"debezium-txn", debezium.Encoder{ProvideTransactionMetadata: true}, kafkasink.AnnotateHeaders, kafkasink.HeadersAll, 4},
		} {
			t.Run(c.name, func(t *testing.T) {
				prefix := name + "." + c.name
				dbz, frames := c.enc.(debezium.Encoder)
				if frames = frames && dbz.ProvideTransactionMetadata; frames {
					dbz.TransactionTopic = prefix + ".txn"
					c.enc = dbz
				}
				s := newSink(t, brokers, prefix, func(cfg *kafkasink.Config) {
					cfg.Topics.Prefix = prefix
					cfg.DeadLetterTopic = prefix + ".dead"
					cfg.Encoder, cfg.Headers = c.enc, c.headers
					cfg.Annotations, cfg.AnnotationsIn = testAnnotations, c.in
				})
				events := annotationsEvents()
				bad := withColumn(events[0], "blob", make(chan int))
				bad.Position.Index = 3
				events = append(events, bad)
				for i := range events {
					events[i].Txn = kafkasink.TxnPlace{Order: i + 1, TableOrder: i + 1, First: i == 0}
				}
				events[3].Txn.End = &kafkasink.TxnSummary{CommitEnd: 0x210, Events: 4, Tables: []kafkasink.TableEvents{{Schema: "public", Table: "t", Events: 4}}}
				write(t, s, events)

				inValue := c.in != kafkasink.AnnotateHeaders
				inHeaders := c.in != kafkasink.AnnotateValue
				recs := sinktest.ReadCommitted(t, brokers, prefix+".public.t")
				if len(recs) != c.records {
					t.Fatalf("%d records, want %d", len(recs), c.records)
				}
				for i, r := range recs {
					checkValueAnnotations(t, i, r, inValue)
					checkHeaderAnnotations(t, i, r, inHeaders, true)
				}
				dead := sinktest.ReadCommitted(t, brokers, prefix+".dead")
				if len(dead) != 1 {
					t.Fatalf("%d dead-letter records, want 1", len(dead))
				}
				checkHeaderAnnotations(t, -1, dead[0], inHeaders, false)

				var checkpoints int
				for _, r := range sinktest.ReadCommitted(t, brokers, kafkasink.DefaultCheckpointTopic) {
					if string(r.Key) == prefix {
						checkpoints++
						checkHeaderAnnotations(t, -1, r, false, false)
					}
				}
				if checkpoints == 0 {
					t.Errorf("no checkpoint record of sink %s", prefix)
				}
				if frames {
					txn := sinktest.ReadCommitted(t, brokers, prefix+".txn")
					if len(txn) != 2 {
						t.Fatalf("%d records in the transaction topic, want BEGIN and END", len(txn))
					}
					for _, r := range txn {
						checkHeaderAnnotations(t, -1, r, false, false)
					}
				}
			})
		}
	}
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		_, brokers := sinktest.Cluster(t)
		run(t, brokers, "ann")
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
		run(t, brokers, name)
	})
}

// checkValueAnnotations checks that record i's value, unless a tombstone,
// has an "annotations" member equal to testAnnotations when want, and
// none otherwise.
func checkValueAnnotations(t *testing.T, i int, r *kgo.Record, want bool) {
	t.Helper()
	if r.Value == nil {
		return
	}
	var v struct {
		Annotations json.RawMessage `json:"annotations"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatalf("record %d: value %s: %v", i, r.Value, err)
	}
	if !want {
		if v.Annotations != nil {
			t.Errorf("record %d: value has annotations %s, want none", i, v.Annotations)
		}
		return
	}
	var got map[string]string
	if err := json.Unmarshal(v.Annotations, &got); err != nil || !maps.Equal(got, testAnnotations) {
		t.Errorf("record %d: value's annotations %s (%v), want %q", i, v.Annotations, err, testAnnotations)
	}
	if keys := objectKeys(t, v.Annotations); !slices.IsSorted(keys) {
		t.Errorf("record %d: annotation keys in the order %q, want sorted", i, keys)
	}
}

// checkHeaderAnnotations checks that record i carries one header per
// annotation, in sorted key order, with the value's exact bytes, when
// want (and last, when last), and none otherwise.
func checkHeaderAnnotations(t *testing.T, i int, r *kgo.Record, want, last bool) {
	t.Helper()
	var got []kgo.RecordHeader
	at := -1
	for j, h := range r.Headers {
		if _, ok := testAnnotations[h.Key]; ok {
			if at < 0 {
				at = j
			}
			got = append(got, h)
		}
	}
	if !want {
		if got != nil {
			t.Errorf("record %d: annotation headers %v, want none", i, got)
		}
		return
	}
	keys := slices.Sorted(maps.Keys(testAnnotations))
	ok := len(got) == len(keys) && at+len(got) <= len(r.Headers)
	for j := 0; ok && j < len(keys); j++ {
		h := r.Headers[at+j]
		ok = h.Key == keys[j] && bytes.Equal(h.Value, []byte(testAnnotations[keys[j]]))
	}
	if !ok || last && at+len(got) != len(r.Headers) {
		t.Errorf("record %d: headers %v, want the annotations %q in key order (last: %t)", i, r.Headers, testAnnotations, last)
	}
}

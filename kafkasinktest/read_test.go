package kafkasinktest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// changes is one transaction of public.orders with each kind of change:
// an insert, an update, a delete, a truncate.
func changes() []kafkasink.Event {
	e := orders(0x500, 1, 4)
	e[1].Op, e[1].After = kafkasink.OpUpdate, kafkasink.Row{{Name: "id", Value: int64(1)}, {Name: "note", Value: "paid"}}
	e[2].Op, e[2].Before, e[2].After = kafkasink.OpDelete, kafkasink.Row{{Name: "id", Value: int64(1)}}, nil
	e[3].Op, e[3].After = kafkasink.OpTruncate, nil
	return e
}

// The reader decodes what each of the library's encoders writes into the
// same records, and each encoder's output passes AssertExactlyOnce.
func TestReadCommittedDecodesEveryEncoder(t *testing.T) {
	t.Parallel()
	inserted := map[string]any{"id": json.Number("1"), "note": "order 1"}
	paid := map[string]any{"id": json.Number("1"), "note": "paid"}
	deleted := map[string]any{"id": json.Number("1")}
	type want struct {
		op       kafkasink.Op
		index    uint64
		encoding kafkasinktest.Encoding
		value    map[string]any
	}
	cases := []struct {
		name    string
		encoder kafkasink.Encoder
		want    []want
	}{
		{"JSONEncoder", kafkasink.JSONEncoder{}, []want{
			{kafkasink.OpInsert, 0, kafkasinktest.EventJSON, inserted},
			{kafkasink.OpUpdate, 1, kafkasinktest.EventJSON, paid},
			{kafkasink.OpDelete, 2, kafkasinktest.EventJSON, deleted},
			{kafkasink.OpTruncate, 3, kafkasinktest.EventJSON, nil},
		}},
		{"UpsertEncoder", kafkasink.UpsertEncoder{}, []want{
			{kafkasink.OpInsert, 0, kafkasinktest.Upsert, inserted},
			{kafkasink.OpUpdate, 1, kafkasinktest.Upsert, paid},
			{kafkasink.OpDelete, 2, kafkasinktest.Tombstone, nil},
			{kafkasink.OpTruncate, 3, kafkasinktest.Tombstone, nil},
		}},
		{"DebeziumEncoder", debezium.Encoder{Now: func() time.Time { return time.Unix(1767225600, 0) }}, []want{
			{kafkasink.OpInsert, 0, kafkasinktest.Debezium, inserted},
			{kafkasink.OpUpdate, 1, kafkasinktest.Debezium, paid},
			{kafkasink.OpDelete, 2, kafkasinktest.Debezium, deleted},
			{kafkasink.OpDelete, 2, kafkasinktest.Tombstone, nil}, // after its delete
			// Debezium skips truncates by default.
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := kafkasinktest.NewCluster(t)
			// One partition: the truncate's record is keyed by its id,
			// not by the row's key.
			s, cfg := newSink(t, c, "decode", func(cfg *kafkasink.Config) {
				cfg.Encoder, cfg.Topics.Partitions = tc.encoder, 1
			})
			events := changes()
			writeAgain(t, s, events)
			got := kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic)
			if len(got) != len(tc.want) {
				t.Fatalf("%d records, want %d: %v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				r := got[i]
				if r.Op != w.op || r.Position != events[w.index].Position || r.Encoding != w.encoding || !reflect.DeepEqual(r.Value, w.value) {
					t.Errorf("record %d: %s %s %s %v, want %s %s %s %v", i, r.Op, r.Position, r.Encoding, r.Value,
						w.op, events[w.index].Position, w.encoding, w.value)
				}
				if r.Topic != ordersTopic || r.Partition != 0 || r.Offset < 0 {
					t.Errorf("record %d at %s[%d]@%d", i, r.Topic, r.Partition, r.Offset)
				}
			}
			want := events
			if tc.name == "DebeziumEncoder" {
				want = events[:3]
			}
			kafkasinktest.AssertExactlyOnce(t, got, want)
		})
	}
}

// Decode refuses what it cannot vouch for, naming the record.
func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	headers := []kgo.RecordHeader{{Key: kafkasink.HeaderID, Value: []byte("0/500:0")}, {Key: kafkasink.HeaderOp, Value: []byte("insert")}}
	for name, r := range map[string]*kgo.Record{
		"no headers (a checkpoint record)": {Topic: "t", Value: []byte(`{"position":"0/500:0"}`)},
		"an unknown op":                    {Topic: "t", Value: []byte(`{}`), Headers: []kgo.RecordHeader{headers[0], {Key: kafkasink.HeaderOp, Value: []byte("upsert")}}},
		"another encoding":                 {Topic: "t", Value: []byte(`{"name":"x"}`), Headers: headers},
		"not JSON":                         {Topic: "t", Value: []byte(`x`), Headers: headers},
		"an event id unlike the header":    {Topic: "t", Value: []byte(`{"id":"0/500:1","op":"insert","commit_lsn":"1280"}`), Headers: headers},
		"a Debezium op unlike the header":  {Topic: "t", Value: []byte(`{"before":null,"after":{},"source":{},"op":"u"}`), Headers: headers},
	} {
		if rec, err := kafkasinktest.Decode(r); err == nil {
			t.Errorf("%s: decoded as %v, want an error", name, rec)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// base64Encoder stands for an encoder outside the module: JSONEncoder's
// event, in base64, which Decode does not read.
type base64Encoder struct{}

func (base64Encoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	j, err := kafkasink.JSONEncoder{}.Encode(nil, e)
	if err != nil {
		return nil, err
	}
	return base64.StdEncoding.AppendEncode(dst, j), nil
}

// ReadCommittedWith reads a topic of another encoder through its
// Transcode, each record once, and what it returns passes
// AssertExactlyOnce with the rows decoded.
func TestReadCommittedWithTranscodes(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "transcoded", func(cfg *kafkasink.Config) { cfg.Encoder = base64Encoder{} })
	events := changes()
	writeAgain(t, s, events)
	var calls int
	transcode := func(_ context.Context, r *kgo.Record) (*kgo.Record, error) {
		calls++
		out := *r
		var err error
		out.Value, err = base64.StdEncoding.AppendDecode(nil, r.Value)
		return &out, err
	}
	got := kafkasinktest.ReadCommittedWith(t, cfg.Brokers, transcode, ordersTopic)
	if calls != len(events) || len(got) != len(events) {
		t.Fatalf("%d records, %d transcoded; want %d", len(got), calls, len(events))
	}
	kafkasinktest.AssertExactlyOnce(t, got, events)
	for _, r := range got { // partitions come in any order
		if r.Op == kafkasink.OpInsert && (r.Encoding != kafkasinktest.EventJSON || r.Value["note"] != "order 1") {
			t.Errorf("the insert is %s with row %v, want the event JSON of order 1", r.Encoding, r.Value)
		}
	}
}

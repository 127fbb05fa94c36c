package kafkasinkavro_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
)

// decoderEvents are events of every value form pgcdc gives, in every op,
// with the Relations pgcdc would give them.
func decoderEvents() []kafkasink.Event {
	numeric := func(p, s int32) *kafkasink.TypeInfo { return typeInfo("numeric", p<<16|s+4) }
	rel := &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
		{Name: "id", Type: typeInfo("int4", -1), NotNull: true},
		{Name: "order-id", Type: typeInfo("int8", -1)},
		{Name: "d", Type: typeInfo("date", -1)}, {Name: "d_bc", Type: typeInfo("date", -1)}, {Name: "d_inf", Type: typeInfo("date", -1)},
		{Name: "tm", Type: typeInfo("time", -1)}, {Name: "tm_end", Type: typeInfo("time", -1)},
		{Name: "ts", Type: typeInfo("timestamp", -1)}, {Name: "ts_bc", Type: typeInfo("timestamp", -1)}, {Name: "ts_inf", Type: typeInfo("timestamp", -1)},
		{Name: "tstz", Type: typeInfo("timestamptz", -1)}, {Name: "tstz_inf", Type: typeInfo("timestamptz", -1)},
		{Name: "small", Type: numeric(10, 3)}, {Name: "big", Type: numeric(40, 10)}, {Name: "whole", Type: numeric(20, 0)}, {Name: "any_num", Type: typeInfo("numeric", -1)},
		{Name: "u", Type: typeInfo("uuid", -1)}, {Name: "by", Type: typeInfo("bytea", -1)},
		{Name: "f4", Type: typeInfo("float4", -1)}, {Name: "f8", Type: typeInfo("float8", -1)}, {Name: "f8_nan", Type: typeInfo("float8", -1)}, {Name: "f4_inf", Type: typeInfo("float4", -1)},
		{Name: "b", Type: typeInfo("bool", -1), NotNull: true},
		{Name: "t", Type: typeInfo("text", -1)}, {Name: "jb", Type: typeInfo("jsonb", -1)},
		{Name: "a", Type: &kafkasink.TypeInfo{Name: "_int4", Modifier: -1, Elem: typeInfo("int4", -1)}},
		{Name: "nothing", Type: typeInfo("text", -1)},
		{Name: "toasted", Type: typeInfo("text", -1), NotNull: true},
	}}
	row := func(id int32, text string) kafkasink.Row {
		return kafkasink.Row{
			{Name: "id", Value: id}, {Name: "order-id", Value: int64(-9007199254740993)},
			{Name: "d", Value: "2024-02-29"}, {Name: "d_bc", Value: "-0043-03-15"}, {Name: "d_inf", Value: "infinity"},
			{Name: "tm", Value: "13:14:15.5"}, {Name: "tm_end", Value: "24:00:00"},
			{Name: "ts", Value: "2024-02-29T13:14:15.123456"}, {Name: "ts_bc", Value: "-0043-03-15T23:59:59.000001"}, {Name: "ts_inf", Value: "-infinity"},
			{Name: "tstz", Value: time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)}, {Name: "tstz_inf", Value: "infinity"},
			{Name: "small", Value: kafkasink.Decimal("-0.005")}, {Name: "big", Value: kafkasink.Decimal("-123456789012345678901234567890.0123456789")},
			{Name: "whole", Value: kafkasink.Decimal("128")}, {Name: "any_num", Value: kafkasink.Decimal("NaN")},
			{Name: "u", Value: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}, {Name: "by", Value: []byte{0, 0xff, 0x10}},
			{Name: "f4", Value: float32(0.1)}, {Name: "f8", Value: 1e21}, {Name: "f8_nan", Value: math.NaN()}, {Name: "f4_inf", Value: float32(math.Inf(-1))},
			{Name: "b", Value: true},
			{Name: "t", Value: text}, {Name: "jb", Value: json.RawMessage(`{"a": [1, null]}`)},
			{Name: "a", Value: []any{[]any{int32(1), nil}, []any{int32(3), int32(4)}}},
			{Name: "nothing", Value: nil},
			{Name: "toasted", Value: "long text"},
		}
	}
	base := kafkasink.Event{Schema: "public", Table: "every", Position: kafkasink.Position{LSN: 0x1A_2B3C4D5E, Index: 3},
		LSN: 0x1A_2B3C4D00, XID: 42, Commit: time.Date(2024, 6, 1, 12, 34, 56, 789012000, time.UTC), Key: []string{"id"}, Relation: rel}
	insert := base
	insert.Op, insert.After = kafkasink.OpInsert, row(1, `quotes " \ and U+2028 `+"\u2028 <&>")
	update := base // REPLICA IDENTITY FULL: the old row
	update.Op, update.Before, update.After = kafkasink.OpUpdate, row(1, "before"), row(1, "after")
	toast := base // REPLICA IDENTITY DEFAULT, an unchanged TOAST value
	toast.Op, toast.After = kafkasink.OpUpdate, row(1, "after")
	toast.After[len(toast.After)-1] = kafkasink.Column{Name: "toasted", Unchanged: true}
	del := base
	del.Op, del.Before = kafkasink.OpDelete, row(2, "gone")
	read := base
	read.Op, read.After, read.Commit, read.BackfillRunID = kafkasink.OpRead, row(3, "snap"), time.Time{}, "run-7"
	truncate := base
	truncate.Op, truncate.Key, truncate.Truncate = kafkasink.OpTruncate, nil, kafkasink.TruncateOptions{Cascade: true}
	return []kafkasink.Event{insert, update, toast, del, read, truncate}
}

// TestDecoderMatchesJSONEncoder: the Decoder turns what the Encoder
// writes back into JSONEncoder's event JSON for the same event, byte for
// byte, in every op and every value form pgcdc gives (BC dates, 24:00,
// infinities, negative and large decimals, NaN, nested arrays, a column
// whose name is no Avro name, an unchanged TOAST value), and each key
// into the sink's KeyJSON form.
func TestDecoderMatchesJSONEncoder(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := kafkasinkavro.New(kafkasinkavro.Config{Registry: cl})
	if err != nil {
		t.Fatal(err)
	}
	dec := kafkasinkavro.NewDecoder(cl)
	ctx := context.Background()
	for _, e := range decoderEvents() {
		t.Run(e.Op.String(), func(t *testing.T) {
			if err := enc.Prepare(ctx, []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: "shop.every", KeyColumns: e.Key}}); err != nil {
				t.Fatal(err)
			}
			avro, err := enc.Encode(make([]byte, 0, 512), &e)
			if err != nil {
				t.Fatal(err)
			}
			want, err := kafkasink.JSONEncoder{}.Encode(nil, &e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dec.Value(ctx, avro)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("decoded value\n%s\nJSONEncoder\n%s", got, want)
			}
			if len(e.Key) == 0 {
				return
			}
			avroKey, err := enc.EncodeKey(make([]byte, 0, 64), &e, e.Key)
			if err != nil {
				t.Fatal(err)
			}
			wantKey, err := kafkasink.AppendKey(nil, &e, e.Key, kafkasink.KeyJSON)
			if err != nil {
				t.Fatal(err)
			}
			if gotKey, err := dec.Key(ctx, avroKey); err != nil || string(gotKey) != string(wantKey) {
				t.Errorf("decoded key %s (%v), KeyJSON %s", gotKey, err, wantKey)
			}
		})
	}
}

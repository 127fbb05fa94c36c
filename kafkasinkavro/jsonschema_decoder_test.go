package kafkasinkavro_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro/internal/registry"
	"github.com/kafkasink/kafkasink/kafkasinkavro/jsonschema"
)

// TestAssertExactlyOnceOnJSONSchema streams inserts, an update, a delete
// and a truncate through pgcdc into a real JSON Schema topic and reads it
// back with the test kit through jsonschema's Decoder (see
// assertExactlyOnceOn). A delete's column outside the replica identity is
// left out, as JSONEncoder leaves it.
func TestAssertExactlyOnceOnJSONSchema(t *testing.T) {
	e := jsonEnv(t, jsonschema.Config{})
	assertExactlyOnceOn(t, e, jsonschema.NewDecoder(e.registry).Transcode, "map[id:3]")
}

// TestJSONSchemaDecoder, with a fake registry: a prepared event's value
// and key decode to JSONEncoder's and KeyJSON's bytes, fetching each
// schema once; the Decoder refuses a record not in the wire format, of an
// unknown id, of an Avro schema's id, or without a JSON document, and
// Transcode names the record; a null value and a key the sink writes
// without a schema stay as they are.
func TestJSONSchemaDecoder(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	var fetches atomic.Int32
	reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			fetches.Add(1)
		}
		return false
	})
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := jsonschema.New(jsonschema.Config{Registry: cl})
	if err != nil {
		t.Fatal(err)
	}
	e := benchEvent()
	ctx := context.Background()
	if err := enc.Prepare(ctx, []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: "shop.public.accounts", KeyColumns: e.Key}}); err != nil {
		t.Fatal(err)
	}
	value, err := enc.Encode(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	key, err := enc.EncodeKey(nil, &e, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	dec := jsonschema.NewDecoder(cl)
	want, _ := kafkasink.JSONEncoder{}.Encode(nil, &e)
	for range 3 {
		if got, err := dec.Decode(ctx, value); err != nil || string(got) != string(want) {
			t.Fatalf("value: %s (%v), want JSONEncoder's %s", got, err, want)
		}
	}
	if got, err := dec.Decode(ctx, key); err != nil || string(got) != `{"id":1234567}` {
		t.Errorf("key: %s (%v), want {\"id\":1234567}", got, err)
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("the decoder fetched schemas %d times for the value's and the key's ids, want once each", n)
	}

	avroID, _, err := reg.RegisterSchema("other-value", sr.Schema{Schema: `{"type":"record","name":"R","fields":[]}`})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		record []byte
		err    string
	}{
		{"not the wire format", want, "not the Confluent wire format (a zero byte, a 4-byte schema id, the JSON payload): 7b"},
		{"a header alone", []byte{0, 0, 0}, "not the Confluent wire format"},
		{"an unknown id", registry.AppendHeader(nil, 99999), "fetching schema 99999 from the Schema Registry"},
		{"an Avro schema's id", append(registry.AppendHeader(nil, avroID), 0), "is of type AVRO, not JSON"},
		{"not JSON", append(value[:5:5], "{\"id\":"...), "the payload after the header is not a JSON document"},
	} {
		if _, err := dec.Decode(ctx, tt.record); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want an error %q", tt.name, err, tt.err)
		}
	}

	if _, err := dec.Transcode(ctx, &kgo.Record{Topic: "shop.public.accounts", Partition: 2, Offset: 7, Value: want}); err == nil ||
		!strings.Contains(err.Error(), "jsonschema: record shop.public.accounts[2]@7: value: not the Confluent wire format") {
		t.Errorf("Transcode of a record without the header: %v, want an error naming the record", err)
	}
	r, err := dec.Transcode(ctx, &kgo.Record{Key: key, Value: value})
	if err != nil || string(r.Value) != string(want) || string(r.Key) != `{"id":1234567}` {
		t.Errorf("Transcode: %+v (%v), want the value and key's JSON", r, err)
	}
	textKey := []byte("0/1A2B3C4D5E/12") // a truncate's key: its id
	r, err = dec.Transcode(ctx, &kgo.Record{Key: textKey})
	if err != nil || string(r.Key) != string(textKey) || r.Value != nil {
		t.Errorf("Transcode of a truncate's record: %+v (%v), want its text key and null value as they are", r, err)
	}
}

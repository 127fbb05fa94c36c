package outbox_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink/outbox"
)

func TestMarshalRefusesBadInput(t *testing.T) {
	t.Parallel()
	ok := outbox.Message{Topic: "orders.events", Key: []byte("o-1"), Value: []byte("v")}
	with := func(edit func(*outbox.Message)) outbox.Message {
		m := ok
		edit(&m)
		return m
	}
	for _, tc := range []struct {
		name  string
		m     outbox.Message
		want  error
		field string
	}{
		{"no topic", with(func(m *outbox.Message) { m.Topic = "" }), outbox.ErrNoTopic, "topic"},
		{"topic with space", with(func(m *outbox.Message) { m.Topic = "orders events" }), outbox.ErrBadTopic, "topic"},
		{"topic too long", with(func(m *outbox.Message) { m.Topic = strings.Repeat("t", 250) }), outbox.ErrBadTopic, "topic"},
		{"topic dot", with(func(m *outbox.Message) { m.Topic = ".." }), outbox.ErrBadTopic, "topic"},
		{"binary key", with(func(m *outbox.Message) { m.Key = []byte{0xff, 0xfe} }), outbox.ErrNotText, "key"},
		{"key with NUL", with(func(m *outbox.Message) { m.Key = []byte("a\x00b") }), outbox.ErrNotText, "key"},
		{"empty header name", with(func(m *outbox.Message) { m.Headers = []outbox.Header{{Name: "", Value: []byte("x")}} }), outbox.ErrBadHeader, "headers[0].name"},
		{"reserved header", with(func(m *outbox.Message) { m.Headers = []outbox.Header{{Name: "kafkasink.id", Value: []byte("x")}} }), outbox.ErrBadHeader, "headers[0].name"},
		{"binary header value", with(func(m *outbox.Message) {
			m.Headers = []outbox.Header{{Name: "a", Value: []byte("x")}, {Name: "b", Value: []byte{0x80}}}
		}), outbox.ErrNotText, "headers[1].value"},
		{"too large", with(func(m *outbox.Message) { m.Value = make([]byte, outbox.DefaultMaxBytes) }), outbox.ErrTooLarge, "value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := outbox.Marshal(tc.m)
			var me *outbox.MessageError
			if !errors.Is(err, tc.want) || !errors.As(err, &me) || me.Field != tc.field || me.Fix == "" {
				t.Fatalf("Marshal: %v, want %v on field %q with a fix", err, tc.want, tc.field)
			}
		})
	}
	if _, err := outbox.Marshal(with(func(m *outbox.Message) { m.Value = make([]byte, outbox.DefaultMaxBytes-3) })); err != nil {
		t.Errorf("a message of exactly DefaultMaxBytes: %v", err)
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range []outbox.Message{
		{Topic: "t", Key: []byte("k"), Value: []byte(`{"a":"<b>"}`), Headers: []outbox.Header{{Name: "h", Value: []byte("1")}, {Name: "h", Value: []byte("")}}},
		{Topic: "t", Value: []byte{0, 1, 0xff}},
		{Topic: "t", Key: []byte(""), Value: []byte("")},
		{Topic: "t"},
	} {
		p, err := outbox.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := outbox.Unmarshal(p, 0)
		if err != nil {
			t.Fatalf("Unmarshal(%s): %v", p, err)
		}
		if got.Topic != m.Topic || !sameBytes(got.Key, m.Key) || !sameBytes(got.Value, m.Value) || len(got.Headers) != len(m.Headers) {
			t.Errorf("round trip of %s: %+v, want %+v", p, got, m)
		}
		for i := range m.Headers {
			if got.Headers[i].Name != m.Headers[i].Name || !bytes.Equal(got.Headers[i].Value, m.Headers[i].Value) {
				t.Errorf("header %d: %+v, want %+v", i, got.Headers[i], m.Headers[i])
			}
		}
	}
}

// sameBytes is bytes.Equal that also tells nil (null) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// TestPayloadGolden pins the format docs/outbox.md specifies: what Marshal
// writes, byte for byte.
func TestPayloadGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    outbox.Message
		want string
	}{
		{outbox.Message{Topic: "orders.events", Key: []byte("42"), Value: []byte(`{"state":"paid"}`), Headers: []outbox.Header{{Name: "type", Value: []byte("OrderPaid")}}},
			`{"v":1,"topic":"orders.events","key":"42","value":"{\"state\":\"paid\"}","headers":[{"name":"type","value":"OrderPaid"}]}`},
		{outbox.Message{Topic: "blobs", Value: []byte{0xde, 0xad, 0xbe, 0xef}}, `{"v":1,"topic":"blobs","value_base64":"3q2+7w=="}`},
	} {
		got, err := outbox.Marshal(tc.m)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal: %s, %v; want %s", got, err, tc.want)
		}
	}
}

func TestUnmarshalRefusesBadPayloads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ payload, inErr string }{
		{`not json`, "not a JSON object"},
		{`{"v":2,"topic":"t"}`, `"v" is 2`},
		{`{"topic":"t"}`, `"v" is 0`},
		{`{"v":1,"topic":"t","partition":3}`, `unknown field "partition"`},
		{`{"v":1,"topic":"t","value":"x","value_base64":"eA=="}`, "both"},
		{`{"v":1,"topic":"t","value_base64":"!"}`, "base64"},
		{`{"v":1,"topic":"t"} {}`, "more after"},
	} {
		if _, err := outbox.Unmarshal([]byte(tc.payload), 0); !errors.Is(err, outbox.ErrBadPayload) || !strings.Contains(err.Error(), tc.inErr) {
			t.Errorf("Unmarshal(%s): %v, want ErrBadPayload containing %q", tc.payload, err, tc.inErr)
		}
	}
	m, err := outbox.Unmarshal([]byte(`{"v":1,"topic":"bad topic","key":"k","value":"v"}`), 0)
	if !errors.Is(err, outbox.ErrBadTopic) || string(m.Value) != "v" {
		t.Errorf("a payload breaking a Message rule: %+v, %v; want ErrBadTopic and the message as read", m, err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"v":1,"topic":"t","key":"k","value":"v","headers":[{"name":"a","value":"b"}]}`))
	f.Add([]byte(`{"v":1,"topic":"t","value_base64":"AAE="}`))
	f.Fuzz(func(t *testing.T, content []byte) {
		m, err := outbox.Unmarshal(content, 0)
		if err != nil {
			return
		}
		p, err := outbox.Marshal(m)
		if err != nil {
			t.Fatalf("Unmarshal accepted %q but Marshal refuses its message: %v", content, err)
		}
		again, err := outbox.Unmarshal(p, 0)
		if err != nil || again.Topic != m.Topic || !sameBytes(again.Key, m.Key) || !sameBytes(again.Value, m.Value) {
			t.Fatalf("round trip of %q: %+v, %v", content, again, err)
		}
	})
}

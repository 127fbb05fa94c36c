package checkpointlog

import (
	"strings"
	"testing"
)

// TestValueRoundTrip: Encode writes format Version, which Decode reads
// back; Decode refuses another version and what is not JSON, saying so.
func TestValueRoundTrip(t *testing.T) {
	t.Parallel()
	b, err := Encode(Value{SinkID: "s", Mode: "exactly-once", Position: "0/10:1", Cursor: []byte(`{"k":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := Decode(b)
	if err != nil || v.Version != Version || v.SinkID != "s" || v.Position != "0/10:1" || string(v.Cursor) != `{"k":1}` {
		t.Fatalf("Decode(%s) = %+v, %v; want what was encoded, version %d", b, v, err, Version)
	}
	for value, want := range map[string]string{
		`{"version":2,"sink_id":"s"}`: "format version 2, this library reads version 1",
		`not json`:                    "value is not checkpoint JSON",
	} {
		if _, err := Decode([]byte(value)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s): %v, want an error saying %q", value, err, want)
		}
	}
	if _, err := Encode(Value{Cursor: []byte("{")}); err == nil {
		t.Error("Encode of a cursor that is not JSON: no error")
	}
}

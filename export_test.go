package kafkasink

import (
	"testing"
	"time"
)

// This file exports, to the external tests (package kafkasink_test), what
// the tests of the debezium package's Encoder share with the internal
// tests: the root does not import debezium, so those tests cannot be
// internal (debezium_encode_test.go).

// GoldenNow is the fixed clock of the Debezium encoder in tests.
var GoldenNow = goldenNow

// AddGoldenEncoder adds enc, by the name of its golden file
// (testdata/golden/<name>.json), to the encoders that TestGoldenEncoders
// and every test over the built-in encoders check. Call it from init.
func AddGoldenEncoder(name string, enc Encoder) {
	goldenEncoders = append(goldenEncoders, struct {
		name string
		enc  Encoder
	}{name, enc})
}

// AddAnnotatingEncoder adds enc to the encoders BenchmarkEncodeAnnotations
// measures. Call it from init.
func AddAnnotatingEncoder(name string, enc Annotator) {
	annotatingEncoders = append(annotatingEncoders, struct {
		name string
		enc  Annotator
	}{name, enc})
}

// AddStdlibBaseline adds an encoder and the encoding/json value it is
// compared with to TestStdlibBaselinesEquivalent. Call it from init.
func AddStdlibBaseline(name string, baseline func(e *Event, now time.Time) (Encoder, any)) {
	stdlibBaselines = append(stdlibBaselines, struct {
		name     string
		baseline func(e *Event, now time.Time) (Encoder, any)
	}{name, baseline})
}

// GoldenByName returns the golden event of that name.
func GoldenByName(t *testing.T, name string) *Event { return goldenByName(t, name) }

// DecodeObject parses an encoder's output into generic JSON.
func DecodeObject(t *testing.T, b []byte) map[string]any { return decodeObject(t, b) }

// BenchEvent is the event the encoder benchmarks measure.
func BenchEvent() Event { return benchEvent() }

// BenchEncoderOn measures enc on BenchEvent as changed by prepare.
func BenchEncoderOn(b *testing.B, enc Encoder, prepare func(*Event)) { benchEncoderOn(b, enc, prepare) }

// BenchStdlib measures encoding/json on what v returns.
func BenchStdlib(b *testing.B, v func() any) { benchStdlib(b, v) }

// BenchStdRow is BenchEvent's row as a typed struct for encoding/json.
func BenchStdRow() any { return benchStdRow() }

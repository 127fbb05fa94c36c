package kafkasinkavro_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
)

var (
	benchCreated = time.Date(2023, 11, 14, 8, 30, 0, 0, time.UTC)
	benchUpdated = time.Date(2024, 6, 1, 12, 34, 56, 789012000, time.UTC)
)

func typeInfo(name string, modifier int32) *kafkasink.TypeInfo {
	return &kafkasink.TypeInfo{Name: name, Modifier: modifier, Kind: 'b'}
}

// benchEvent is the root package's encode benchmark event (a realistic
// update of a 10-column row: integers, text, numeric, timestamptz, bool,
// float and a NULL) with the Relation pgcdc would give it.
func benchEvent() kafkasink.Event {
	return kafkasink.Event{
		Op: kafkasink.OpUpdate, Schema: "public", Table: "accounts",
		Position: kafkasink.Position{LSN: 0x1A_2B3C4D5E, Index: 12}, LSN: 0x1A_2B3C4D00, XID: 987654,
		Commit: benchUpdated, Key: []string{"id"},
		After: kafkasink.Row{
			{Name: "id", Value: int64(1234567)},
			{Name: "account_id", Value: int64(42)},
			{Name: "email", Value: "jane.doe@example.com"},
			{Name: "name", Value: "Jane \"JD\" Doe"},
			{Name: "balance", Value: kafkasink.Decimal("10234.57")},
			{Name: "created_at", Value: benchCreated},
			{Name: "updated_at", Value: benchUpdated},
			{Name: "active", Value: true},
			{Name: "score", Value: 0.875},
			{Name: "deleted_at", Value: nil},
		},
		Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
			{Name: "id", Type: typeInfo("int8", -1), NotNull: true},
			{Name: "account_id", Type: typeInfo("int8", -1), NotNull: true},
			{Name: "email", Type: typeInfo("text", -1), NotNull: true},
			{Name: "name", Type: typeInfo("text", -1)},
			{Name: "balance", Type: typeInfo("numeric", 12<<16|2+4), NotNull: true},
			{Name: "created_at", Type: typeInfo("timestamptz", -1), NotNull: true},
			{Name: "updated_at", Type: typeInfo("timestamptz", -1)},
			{Name: "active", Type: typeInfo("bool", -1), NotNull: true},
			{Name: "score", Type: typeInfo("float8", -1)},
			{Name: "deleted_at", Type: typeInfo("timestamptz", -1)},
		}},
	}
}

// preparedEncoder returns an Encoder with e's table version prepared for
// topic in the fake registry reg.
func preparedEncoder(tb testing.TB, reg *srfake.Registry, e *kafkasink.Event, topic string) *kafkasinkavro.Encoder {
	tb.Helper()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := kafkasinkavro.New(kafkasinkavro.Config{Registry: cl})
	if err != nil {
		tb.Fatal(err)
	}
	if err := enc.Prepare(context.Background(), []kafkasink.Event{*e}, []kafkasink.EventRoute{{Topic: topic, KeyColumns: e.Key}}); err != nil {
		tb.Fatal(err)
	}
	return enc
}

// BenchmarkEncode compares the Avro encoder with JSONEncoder on the same
// event, in the same run, value and key:
//
//	go test -run '^$' -bench Encode -count 6 . | benchstat -col /impl -
func BenchmarkEncode(b *testing.B) {
	reg := srfake.New()
	defer reg.Close()
	e := benchEvent()
	enc := preparedEncoder(b, reg, &e, "shop.public.accounts")
	benchEncoders(b, 1024, []benchEncoder{
		{"json", func(dst []byte) ([]byte, error) { return kafkasink.JSONEncoder{}.Encode(dst, &e) }},
		{"avro", func(dst []byte) ([]byte, error) { return enc.Encode(dst, &e) }},
		{"json-key", func(dst []byte) ([]byte, error) { return kafkasink.AppendKey(dst, &e, nil, kafkasink.KeyJSON) }},
		{"avro-key", func(dst []byte) ([]byte, error) { return enc.EncodeKey(dst, &e, e.Key) }},
	})
}

// benchEncoder is one encoder a benchmark compares, by name.
type benchEncoder struct {
	name string
	enc  func(dst []byte) ([]byte, error)
}

// benchEncoders runs each of encoders as a sub-benchmark impl=<name>,
// appending to a buffer of capacity size reused between events, so that
// benchstat -col /impl compares them within one run.
func benchEncoders(b *testing.B, size int, encoders []benchEncoder) {
	for _, impl := range encoders {
		b.Run("impl="+impl.name, func(b *testing.B) {
			buf := make([]byte, 0, size)
			b.ReportAllocs()
			for b.Loop() {
				out, err := impl.enc(buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(out)))
			}
		})
	}
}

// TestEncodeAllocs pins what BenchmarkEncode shows: a steady-state event,
// its table version prepared, costs no allocation, value or key.
func TestEncodeAllocs(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	e := benchEvent()
	enc := preparedEncoder(t, reg, &e, "shop.public.accounts")
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := enc.Encode(buf[:0], &e); err != nil {
			t.Fatal(err)
		}
		if _, err := enc.EncodeKey(buf[:0], &e, e.Key); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("encoding a prepared event's value and key allocates %.1f times, want 0", n)
	}
}

// TestRegistryErrorClasses: a registry answering 5xx, or not at all, is
// a retryable PrepareError; one that refuses the schema (4xx) a fatal one
// naming the table and the subject; a table version once registered is
// not registered again.
func TestRegistryErrorClasses(t *testing.T) {
	e := benchEvent()
	route := []kafkasink.EventRoute{{Topic: "shop.public.accounts", KeyColumns: e.Key}}
	prepare := func(url string) error {
		cl, err := sr.NewClient(sr.URLs(url))
		if err != nil {
			t.Fatal(err)
		}
		enc, err := kafkasinkavro.New(kafkasinkavro.Config{Registry: cl})
		if err != nil {
			t.Fatal(err)
		}
		return enc.Prepare(context.Background(), []kafkasink.Event{e}, route)
	}
	answer := func(status int) *srfake.Registry {
		reg := srfake.New()
		reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			w.WriteHeader(status)
			w.Write([]byte(`{"error_code":42201,"message":"no thanks"}`))
			return true
		})
		t.Cleanup(reg.Close)
		return reg
	}
	closed := srfake.New()
	closedURL := closed.URL()
	closed.Close()
	for _, tt := range []struct {
		name      string
		url       string
		retryable bool
	}{
		{"503", answer(http.StatusServiceUnavailable).URL(), true},
		{"500", answer(http.StatusInternalServerError).URL(), true},
		{"connection refused", closedURL, true},
		{"422", answer(http.StatusUnprocessableEntity).URL(), false},
		{"401", answer(http.StatusUnauthorized).URL(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := prepare(tt.url)
			var pe *kafkasink.PrepareError
			if !errors.As(err, &pe) || pe.Retryable != tt.retryable || kafkasink.IsRetryable(err) != tt.retryable || kafkasink.IsFatal(err) == tt.retryable {
				t.Fatalf("Prepare: %v; want a PrepareError, retryable %t", err, tt.retryable)
			}
			for _, part := range []string{"public.accounts", "shop.public.accounts-value"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%v does not name %s", err, part)
				}
			}
		})
	}

	// Registered once: a second Prepare of the same version asks nothing.
	reg := srfake.New()
	defer reg.Close()
	enc := preparedEncoder(t, reg, &e, route[0].Topic)
	var calls atomic.Int32
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		calls.Add(1)
		return false
	})
	if err := enc.Prepare(context.Background(), []kafkasink.Event{e, e}, append(route, route...)); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("preparing a registered table version again made %d registry calls, want 0", n)
	}
}

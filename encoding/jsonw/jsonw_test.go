package jsonw

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// stdString is encoding/json's encoding of s without HTML escaping, the
// rule AppendString promises to follow byte for byte.
func stdString(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestAppendString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"plain", "hello", `"hello"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls", "\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"html not escaped", "<a href='x'>&</a>", `"<a href='x'>&</a>"`},
		{"del kept", "\x7f", "\"\x7f\""},
		{"multibyte kept", "żółw 🐢", `"żółw 🐢"`},
		{"line separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"invalid byte", "a\xffb", `"a\ufffdb"`},
		{"one replacement per bad byte", "\xe2\x82", `"\ufffd\ufffd"`},
		{"truncated rune at end", "ok\xf0\x9f\x90", `"ok\ufffd\ufffd\ufffd"`},
		{"surrogate half", "\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
		{"literal replacement char kept", "\uFFFD", "\"\uFFFD\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(AppendString([]byte("x"), tt.in))
			if got != "x"+tt.want {
				t.Errorf("AppendString(%q) = %s, want %s", tt.in, got[1:], tt.want)
			}
			if std := stdString(t, tt.in); std != tt.want {
				t.Errorf("encoding/json writes %s, want %s: the rule no longer matches the standard library", std, tt.want)
			}
			if !json.Valid([]byte(got[1:])) {
				t.Errorf("output %s is not valid JSON", got[1:])
			}
		})
	}
}

// TestAppendStringEveryByteEverywhere puts every byte value at every
// position of text long enough for AppendString's word-at-a-time scan,
// after plain text and before it, and compares with encoding/json: a byte
// the scan took for plain would be written unescaped.
func TestAppendStringEveryByteEverywhere(t *testing.T) {
	t.Parallel()
	for b := range 256 {
		for at := range 19 {
			s := []byte("abcdefghijklmnopqr")
			s = append(s[:at], append([]byte{byte(b)}, s[at:]...)...)
			if got, want := string(AppendString(nil, string(s))), stdString(t, string(s)); got != want {
				t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
			}
		}
	}
}

func TestAppendFloat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   float64
		bits int
		want string
	}{
		{"zero", 0, 64, "0"},
		{"negative zero", math.Copysign(0, -1), 64, "-0.0"},
		{"float32 negative zero", math.Copysign(0, -1), 32, "-0.0"},
		{"integer", 42, 64, "42"},
		{"fraction", 0.1, 64, "0.1"},
		{"shortest", 1.0 / 3, 64, "0.3333333333333333"},
		{"large plain", 1e20, 64, "100000000000000000000"},
		{"large exponent", 1e21, 64, "1e+21"},
		{"small plain", 1e-6, 64, "0.000001"},
		{"small exponent", 1e-7, 64, "1e-7"},
		{"tiny", 5e-324, 64, "5e-324"},
		{"max", math.MaxFloat64, 64, "1.7976931348623157e+308"},
		{"float32 shortest", float64(float32(0.1)), 32, "0.1"},
		{"float32 at 64 bits", float64(float32(0.1)), 64, "0.10000000149011612"},
		{"NaN", math.NaN(), 64, `"NaN"`},
		{"+Inf", math.Inf(1), 64, `"Infinity"`},
		{"-Inf", math.Inf(-1), 64, `"-Infinity"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(AppendFloat(nil, tt.in, tt.bits))
			if got != tt.want {
				t.Errorf("AppendFloat(%v, %d) = %s, want %s", tt.in, tt.bits, got, tt.want)
			}
			if math.IsNaN(tt.in) || math.IsInf(tt.in, 0) {
				return
			}
			if tt.in == 0 && math.Signbit(tt.in) {
				// encoding/json writes -0, which Jackson and Python
				// read as the integer 0; the value must still be -0.
				var back float64
				if err := json.Unmarshal([]byte(got), &back); err != nil || back != 0 || !math.Signbit(back) {
					t.Errorf("%s reads back as %v (%v), want -0", got, back, err)
				}
				return
			}
			var std []byte
			var err error
			if tt.bits == 32 {
				std, err = json.Marshal(float32(tt.in))
			} else {
				std, err = json.Marshal(tt.in)
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(std) != got {
				t.Errorf("encoding/json writes %s, jsonw %s", std, got)
			}
		})
	}
}

func TestAppendValue(t *testing.T) {
	t.Parallel()
	ts := time.Date(2024, 2, 29, 23, 59, 58, 123456000, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, "null"},
		{"true", true, "true"},
		{"false", false, "false"},
		{"int", int(-1), "-1"},
		{"int8", int8(math.MinInt8), "-128"},
		{"int16", int16(math.MaxInt16), "32767"},
		{"int32", int32(math.MinInt32), "-2147483648"},
		{"int64", int64(math.MinInt64), "-9223372036854775808"},
		{"uint", uint(7), "7"},
		{"uint8", uint8(255), "255"},
		{"uint16", uint16(65535), "65535"},
		{"uint32", uint32(math.MaxUint32), "4294967295"},
		{"uint64", uint64(math.MaxUint64), "18446744073709551615"},
		{"float32", float32(1.5), "1.5"},
		{"float64", 2.25, "2.25"},
		{"float NaN", math.NaN(), `"NaN"`},
		{"float32 -Inf", float32(math.Inf(-1)), `"-Infinity"`},
		{"string", "a\"b", `"a\"b"`},
		{"bytes", []byte{0, 1, 2, 0xfe, 0xff}, `"AAEC/v8="`},
		{"empty bytes", []byte{}, `""`},
		{"nil bytes", []byte(nil), "null"},
		{"time in UTC", ts, `"2024-02-29T22:59:58.123456Z"`},
		{"time whole seconds", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), `"2000-01-01T00:00:00Z"`},
		{"raw", json.RawMessage(`{"a": [1, "\u00e9\n"]}`), `"{\"a\": [1, \"\\u00e9\\n\"]}"`},
		{"raw null is not NULL", json.RawMessage(`null`), `"null"`},
		{"nil raw", json.RawMessage(nil), "null"},
		{"array", []any{1, "x", nil, []any{}, map[string]any{}}, `[1,"x",null,[],{}]`},
		{"nil array", []any(nil), "null"},
		{"map sorted", map[string]any{"b": 1, "a": []any{true}, "": "e", "ä": nil}, `{"":"e","a":[true],"b":1,"ä":null}`},
		{"nil map", map[string]any(nil), "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := AppendValue([]byte("["), tt.in)
			if err != nil {
				t.Fatalf("AppendValue(%#v): %v", tt.in, err)
			}
			if string(got[1:]) != tt.want {
				t.Errorf("AppendValue(%#v) = %s, want %s", tt.in, got[1:], tt.want)
			}
			if !json.Valid(got[1:]) {
				t.Errorf("output %s is not valid JSON", got[1:])
			}
		})
	}
}

func TestAppendValueMatchesStdlib(t *testing.T) {
	t.Parallel()
	// For values without a documented difference (NaN, time zones, HTML
	// escaping), jsonw and encoding/json must agree byte for byte.
	values := []any{
		nil, true, int64(-5), uint64(math.MaxUint64), 3.14, float32(2.5), "plain ascii",
		[]byte("bytes"), time.Date(2020, 5, 6, 7, 8, 9, 10, time.UTC),
		[]any{1, 2.5, "x", []any{nil}}, map[string]any{"z": 1, "a": map[string]any{"y": false, "b": "q"}},
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%#v: jsonw %s, encoding/json %s", v, got, want)
		}
	}
}

func TestAppendValueErrors(t *testing.T) {
	t.Parallel()
	type named string
	tests := []struct {
		name     string
		in       any
		wantType string
	}{
		{"chan", make(chan int), "chan int"},
		{"struct", struct{ A int }{1}, "struct { A int }"},
		{"named string", named("x"), "jsonw.named"},
		{"pointer", new(int), "*int"},
		{"string slice", []string{"a"}, "[]string"},
		{"nested in array", []any{1, make(chan bool)}, "chan bool"},
		{"nested in map", map[string]any{"k": struct{}{}}, "struct {}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := AppendValue(nil, tt.in)
			var ute *UnsupportedTypeError
			if !errors.As(err, &ute) {
				t.Fatalf("AppendValue(%T) error = %v, want *UnsupportedTypeError", tt.in, err)
			}
			if ute.Type != tt.wantType {
				t.Errorf("Type = %q, want %q", ute.Type, tt.wantType)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantType) || !strings.Contains(msg, "map[string]any") {
				t.Errorf("message %q should name the type and the supported types", msg)
			}
		})
	}

	for _, raw := range []string{"", "{", `{"a":}`, "01", `"x" "y"`, "nul"} {
		if _, err := AppendValue(nil, json.RawMessage(raw)); !errors.As(err, new(*InvalidRawError)) {
			t.Errorf("raw %q: error = %v, want *InvalidRawError", raw, err)
		}
	}
	_, err := AppendValue(nil, json.RawMessage("\"\xff\""))
	var ire *InvalidRawError
	if !errors.As(err, &ire) || !ire.BadUTF8 {
		t.Errorf("raw with invalid UTF-8: error = %v, want *InvalidRawError with BadUTF8", err)
	}
}

type celsius float64

var celsiusExt = &Extension{
	Append: func(dst []byte, v any) ([]byte, bool, error) {
		if c, ok := v.(celsius); ok {
			return AppendFloat(dst, float64(c), 64), true, nil
		}
		return dst, false, nil
	},
	Types: "jsonw.celsius",
}

func TestExtension(t *testing.T) {
	t.Parallel()
	got, err := AppendValueExt(nil, map[string]any{"t": []any{celsius(21.5)}}, celsiusExt)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"t":[21.5]}` {
		t.Errorf("got %s", got)
	}
	_, err = AppendValueExt(nil, []any{uintptr(1)}, celsiusExt)
	if err == nil || !strings.Contains(err.Error(), "jsonw.celsius") || !strings.Contains(err.Error(), "uintptr") {
		t.Errorf("error %v should name the unsupported type and the extension's types", err)
	}
	if _, err := AppendValue(nil, celsius(1)); err == nil {
		t.Error("without the extension, celsius must be refused")
	}
}

func TestAppendValueAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	values := []any{
		nil, true, int64(1), uint32(2), 1.25, float32(math.Inf(1)), "a string with \"escapes\"\n and \xff",
		[]byte("0123456789"), time.Date(2024, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 7200)),
		json.RawMessage(`{"k":[1,2,{"x":null}]}`),
		[]any{1, "two", 3.0}, map[string]any{"b": 1, "a": 2, "c": []any{"x"}},
	}
	buf := make([]byte, 0, 4096)
	for _, v := range values {
		allocs := testing.AllocsPerRun(100, func() {
			var err error
			if _, err = AppendValue(buf[:0], v); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("AppendValue(%T) allocates %v times per call, want 0", v, allocs)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "abc", "\x00\"\\\n", "\xff\xfe", "<>&", "\u2028\u2029", "\xed\xa0\x80", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		if want := stdString(t, s); string(got) != want {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
		if !utf8.Valid(got) || !json.Valid(got) {
			t.Fatalf("AppendString(%q) = %q is not valid UTF-8 JSON", s, got)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("round trip of valid UTF-8 %q gave %q", s, back)
		}
	})
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1.5, 1e21, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		for _, bits := range []int{32, 64} {
			x := v
			if bits == 32 {
				x = float64(float32(v))
			}
			got := AppendFloat(nil, x, bits)
			if !json.Valid(got) {
				t.Fatalf("AppendFloat(%v, %d) = %s is not valid JSON", x, bits, got)
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			if x == 0 && math.Signbit(x) {
				if string(got) != "-0.0" {
					t.Fatalf("AppendFloat(-0, %d) = %s, want -0.0", bits, got)
				}
				continue
			}
			var std []byte
			if bits == 32 {
				std, _ = json.Marshal(float32(x))
			} else {
				std, _ = json.Marshal(x)
			}
			if !bytes.Equal(got, std) {
				t.Fatalf("AppendFloat(%v, %d) = %s, encoding/json %s", x, bits, got, std)
			}
		}
	})
}

// TestAppendStringMap: keys in sorted order whatever the map's iteration
// order, each key and value escaped as AppendString does; the result is
// what encoding/json writes for the map (it sorts keys too).
func TestAppendStringMap(t *testing.T) {
	for _, m := range []map[string]string{nil, {"a": "1"}, {"zone": "eu", "app": "orders\n", "é": `"q"`, "b": ""}} {
		want, err := json.Marshal(m)
		if m == nil {
			want, err = []byte("{}"), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendStringMap([]byte("x"), m); string(got) != "x"+string(want) {
			t.Errorf("AppendStringMap(%v) = %s, want x%s", m, got, want)
		}
	}
}

package kafkasink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kafkasink/kafkasink/encoding/jsonw"
)

// parseKeyText reverses the KeyText form as AppendKey documents it: split
// on '|' not escaped by a backslash, a field of exactly \N is NULL, and
// \\ and \| stand for \ and |. It returns nil for NULL fields. It fails on
// any other backslash sequence, so a test passing proves the form is
// unambiguous.
func parseKeyText(s string) ([]*string, error) {
	var fields []*string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] == '\\' {
			if i+1 == len(s) {
				return nil, fmt.Errorf("dangling backslash at the end of %q", s)
			}
			i++ // the escaped byte is never a separator
			continue
		}
		if i == len(s) || s[i] == '|' {
			f, err := unescapeKeyField(s[start:i])
			if err != nil {
				return nil, fmt.Errorf("field %d of %q: %w", len(fields), s, err)
			}
			fields = append(fields, f)
			start = i + 1
		}
	}
	return fields, nil
}

func unescapeKeyField(raw string) (*string, error) {
	if raw == `\N` {
		return nil, nil
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			i++
			if i == len(raw) || (raw[i] != '\\' && raw[i] != '|') {
				return nil, fmt.Errorf("bad escape in %q", raw)
			}
			c = raw[i]
		}
		b.WriteByte(c)
	}
	v := b.String()
	return &v, nil
}

func keyStr(s string) *string { return &s }

func TestAppendKeyText(t *testing.T) {
	t.Parallel()
	ts := time.Date(2024, 1, 2, 3, 4, 5, 600000000, time.FixedZone("X", -5*3600))
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"string", "abc", "abc"},
		{"empty string", "", ""},
		{"pipe", "a|b", `a\|b`},
		{"backslash", `a\b`, `a\\b`},
		{"literal \\N", `\N`, `\\N`},
		{"nil", nil, `\N`},
		{"int", int(-3), "-3"},
		{"int8", int8(-8), "-8"},
		{"int16", int16(16), "16"},
		{"int32", int32(32), "32"},
		{"int64", int64(math.MaxInt64), "9223372036854775807"},
		{"uint", uint(1), "1"},
		{"uint8", uint8(8), "8"},
		{"uint16", uint16(16), "16"},
		{"uint32", uint32(32), "32"},
		{"uint64", uint64(math.MaxUint64), "18446744073709551615"},
		{"float64", 0.1, "0.1"},
		{"float64 exponent", 1e21, "1e+21"},
		{"float32", float32(0.1), "0.1"},
		{"NaN", math.NaN(), "NaN"},
		{"-Inf", math.Inf(-1), "-Infinity"},
		{"bool", true, "true"},
		{"time", ts, "2024-01-02T08:04:05.6Z"},
		{"decimal", Decimal("-12.50"), "-12.50"},
		{"bytes", []byte{0x00, 0xAB, 0xff}, "00abff"},
		{"nil bytes", []byte(nil), `\N`},
		{"raw", json.RawMessage(`{"a":"b|c"}`), `{"a":"b\|c"}`},
		{"array", []any{"x|y", `\`}, `["x\|y","\\\\"]`},
		{"map", map[string]any{"b": 1, "a": Decimal("2")}, `{"a":"2","b":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Event{Op: OpInsert, Schema: "s", Table: "t", Key: []string{"k"}, After: Row{{Name: "k", Value: tt.v}}}
			got, err := AppendKey([]byte("pre:"), e, nil, KeyText)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "pre:"+tt.want {
				t.Errorf("key = %s, want %s", got[4:], tt.want)
			}
		})
	}
}

func TestAppendKeyColumnsAndImages(t *testing.T) {
	t.Parallel()
	e := &Event{
		Op: OpUpdate, Schema: "s", Table: "t", Position: Position{LSN: 0xA_0000000B, Index: 4},
		Key:    []string{"tenant", "id"},
		Before: Row{{Name: "tenant", Value: "old"}, {Name: "id", Value: 1}, {Name: "name", Value: "x"}},
		After:  Row{{Name: "id", Value: 2}, {Name: "name", Value: "n|m"}, {Name: "tenant", Value: "new"}},
	}
	del := &Event{Op: OpDelete, Schema: "s", Table: "t", Key: []string{"tenant", "id"}, Before: e.Before}
	noKey := &Event{Op: OpInsert, Schema: "s", Table: "t", Position: e.Position, After: e.After}
	tests := []struct {
		name    string
		e       *Event
		columns []string
		format  KeyFormat
		want    string
	}{
		{"primary key in key order, from After", e, nil, KeyText, "new|2"},
		{"configured columns win", e, []string{"name"}, KeyText, `n\|m`},
		{"delete uses Before", del, nil, KeyText, "old|1"},
		{"no key columns: event id", noKey, nil, KeyText, "A/B:4"},
		{"json", e, nil, KeyJSON, `{"tenant":"new","id":2}`},
		{"json configured", e, []string{"name", "id"}, KeyJSON, `{"name":"n|m","id":2}`},
		{"json event id", noKey, nil, KeyJSON, `"A/B:4"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := AppendKey(nil, tt.e, tt.columns, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("key = %s, want %s", got, tt.want)
			}
			if tt.format == KeyJSON && !json.Valid(got) {
				t.Errorf("JSON key %s is not valid JSON", got)
			}
		})
	}
}

func TestAppendKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		e         *Event
		columns   []string
		column    string
		missing   bool
		msgChunks []string
	}{
		{
			name:    "column not in row",
			e:       &Event{Op: OpDelete, Schema: "app", Table: "orders", Key: []string{"id", "region"}, Before: Row{{Name: "id", Value: 1}}},
			column:  "region",
			missing: true, msgChunks: []string{"app.orders", `"region"`, "REPLICA IDENTITY", "key columns", "before"},
		},
		{
			name:    "configured column not in row",
			e:       &Event{Op: OpInsert, Schema: "app", Table: "orders", After: Row{{Name: "id", Value: 1}}},
			columns: []string{"nope"}, column: "nope",
			missing: true, msgChunks: []string{"app.orders", `"nope"`, "after"},
		},
		{
			name:    "unchanged TOAST key column",
			e:       &Event{Op: OpUpdate, Schema: "app", Table: "docs", Key: []string{"body"}, After: Row{{Name: "body", Unchanged: true}}},
			column:  "body",
			missing: true, msgChunks: []string{"app.docs", `"body"`, "TOAST", "REPLICA IDENTITY"},
		},
		{
			name:      "unsupported type",
			e:         &Event{Op: OpInsert, Schema: "app", Table: "t", Key: []string{"k"}, After: Row{{Name: "k", Value: struct{}{}}}},
			column:    "k",
			msgChunks: []string{"app.t", `"k"`, "struct {}", "kafkasink.Decimal"},
		},
		{
			name:      "unsupported nested type",
			e:         &Event{Op: OpInsert, Schema: "app", Table: "t", Key: []string{"k"}, After: Row{{Name: "k", Value: []any{make(chan int)}}}},
			column:    "k",
			msgChunks: []string{"app.t", `"k"`, "chan int"},
		},
	}
	for _, tt := range tests {
		for _, format := range []KeyFormat{KeyText, KeyJSON} {
			t.Run(tt.name+"/"+format.String(), func(t *testing.T) {
				t.Parallel()
				got, err := AppendKey([]byte{}, tt.e, tt.columns, format)
				var ee *EncodeError
				if !errors.As(err, &ee) {
					t.Fatalf("error = %v (key %q), want *EncodeError", err, got)
				}
				if got != nil {
					t.Errorf("key = %q on error, want nil", got)
				}
				if ee.Column != tt.column || ee.Table != tt.e.Table || ee.Schema != tt.e.Schema {
					t.Errorf("EncodeError names %s.%s %q, want %s.%s %q", ee.Schema, ee.Table, ee.Column, tt.e.Schema, tt.e.Table, tt.column)
				}
				if errors.Is(err, errMissingKeyColumn) != tt.missing {
					t.Errorf("errors.Is(err, errMissingKeyColumn) = %v, want %v", !tt.missing, tt.missing)
				}
				for _, chunk := range tt.msgChunks {
					if !strings.Contains(err.Error(), chunk) {
						t.Errorf("message %q lacks %q", err, chunk)
					}
				}
			})
		}
	}
	if _, err := AppendKey(nil, &Event{Key: []string{"k"}, After: Row{{Name: "k"}}}, nil, KeyFormat(9)); err == nil {
		t.Error("unknown key format must be an error")
	}
}

func TestKeyTextRoundTrip(t *testing.T) {
	t.Parallel()
	values := [][]*string{
		{keyStr("")},
		{nil},
		{keyStr(`\N`)},
		{keyStr(`\`), keyStr(`|`)},
		{keyStr(`a\|b`), nil, keyStr(`\\N|`)},
		{keyStr(""), keyStr(""), nil, keyStr("")},
		{keyStr("|||"), keyStr(`\\\`), keyStr(`N\`)},
	}
	for _, vals := range values {
		key := textKeyOf(t, vals)
		back, err := parseKeyText(string(key))
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		if !sameFields(back, vals) {
			t.Errorf("key %q parsed to %s, want %s", key, showFields(back), showFields(vals))
		}
	}
}

// textKeyOf renders vals (nil meaning NULL) as a KeyText key.
func textKeyOf(t testing.TB, vals []*string) []byte {
	t.Helper()
	e := &Event{Op: OpInsert, Schema: "s", Table: "t"}
	for i, v := range vals {
		name := fmt.Sprintf("c%d", i)
		e.Key = append(e.Key, name)
		var val any
		if v != nil {
			val = *v
		}
		e.After = append(e.After, Column{Name: name, Value: val})
	}
	key, err := AppendKey(nil, e, nil, KeyText)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func sameFields(a, b []*string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || a[i] != nil && *a[i] != *b[i] {
			return false
		}
	}
	return true
}

func showFields(f []*string) string {
	parts := make([]string, len(f))
	for i, p := range f {
		if p == nil {
			parts[i] = "NULL"
		} else {
			parts[i] = fmt.Sprintf("%q", *p)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func FuzzKeyText(f *testing.F) {
	f.Add("a", "b", "c", uint8(0))
	f.Add(`\N`, "|", `\`, uint8(2))
	f.Add("", `\\|\N|`, "|\\N", uint8(5))
	f.Fuzz(func(t *testing.T, a, b, c string, nulls uint8) {
		vals := []*string{&a, &b, &c}
		for i := range vals {
			if nulls&(1<<i) != 0 {
				vals[i] = nil
			}
		}
		key := textKeyOf(t, vals)
		back, err := parseKeyText(string(key))
		if err != nil {
			t.Fatalf("key %q does not parse: %v", key, err)
		}
		if !sameFields(back, vals) {
			t.Fatalf("key %q parsed to %s, want %s", key, showFields(back), showFields(vals))
		}
	})
}

// TestGoldenKeys pins both key forms for the golden events.
func TestGoldenKeys(t *testing.T) {
	type keyCase struct {
		name    string
		ev      *Event
		columns []string
	}
	var cases []keyCase
	for _, g := range goldenEvents() {
		cases = append(cases, keyCase{g.name, &g.ev, nil})
	}
	// Every value type as a key column, through the insert event's row.
	insert := goldenByName(t, "insert")
	var all []string
	for _, c := range insert.After {
		all = append(all, c.Name)
	}
	cases = append(cases, keyCase{"insert_every_column", insert, all})

	var doc []byte
	doc = append(doc, '{')
	for i, c := range cases {
		text, err := AppendKey([]byte{}, c.ev, c.columns, KeyText)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		js, err := AppendKey([]byte{}, c.ev, c.columns, KeyJSON)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !json.Valid(js) {
			t.Fatalf("%s: JSON key %s is not valid JSON", c.name, js)
		}
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = fmt.Appendf(doc, `%q:{"text":%s,`, c.name, jsonw.AppendString(nil, string(text)))
		if !utf8.Valid(text) {
			// JSON cannot hold the exact bytes of a text key with invalid
			// UTF-8; pin them in hex as well.
			doc = fmt.Appendf(doc, `"text_hex":"%x",`, text)
		}
		doc = fmt.Appendf(doc, `"json":%s,"partition_of_text_in_12":%d}`, js, PartitionFor(text, 12))
	}
	doc = append(doc, '}')
	var indented bytes.Buffer
	if err := json.Indent(&indented, doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	indented.WriteByte('\n')
	checkGolden(t, "keys", indented.Bytes())
}

// A truncate carries its table's key column names but no row: it is keyed
// by its event id, not rejected for missing key values.
func TestTruncateKeyedByEventID(t *testing.T) {
	e := Event{Op: OpTruncate, Schema: "public", Table: "orders", Key: []string{"id"}, Position: Position{LSN: 0x10, Index: 2}}
	for _, f := range []KeyFormat{KeyText, KeyJSON} {
		got, err := AppendKey(nil, &e, []string{"id"}, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want := "0/10:2"
		if f == KeyJSON {
			want = `"0/10:2"`
		}
		if string(got) != want {
			t.Errorf("%s key %q, want %q", f, got, want)
		}
	}
}

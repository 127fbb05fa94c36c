package kafkasink_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
)

// testAnnotations holds a value of every kind JSON must escape (quote,
// backslash, control character, U+2028, HTML characters), non-ASCII text
// and an empty value, under keys whose map order is not their sorted one.
var testAnnotations = map[string]string{
	"region":  "eu-west-1",
	"env":     "prod",
	"note":    "a\"b\\c\n\x01\u2028é<&>",
	"empty":   "",
	"a.b_c-1": "x",
}

// annotated returns enc annotated with testAnnotations.
func annotated(t testing.TB, enc kafkasink.Encoder) kafkasink.Encoder {
	t.Helper()
	out, err := enc.(kafkasink.Annotator).Annotate(testAnnotations)
	if err != nil {
		t.Fatalf("%T.Annotate: %v", enc, err)
	}
	return out
}

// annotationsEvents are an insert, an update and a delete of public.t.
func annotationsEvents() []kafkasink.Event {
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	row := func(id int64, name string) kafkasink.Row {
		return kafkasink.Row{{Name: "id", Value: id}, {Name: "name", Value: name}}
	}
	ev := func(op kafkasink.Op, i uint64, before, after kafkasink.Row) kafkasink.Event {
		return kafkasink.Event{Op: op, Schema: "public", Table: "t", Position: kafkasink.Position{LSN: 0x200, Index: i},
			LSN: 0x1f0, XID: 7, Commit: at, Key: []string{"id"}, Before: before, After: after}
	}
	return []kafkasink.Event{
		ev(kafkasink.OpInsert, 0, nil, row(1, "a")),
		ev(kafkasink.OpUpdate, 1, row(1, "a"), row(1, "b")),
		ev(kafkasink.OpDelete, 2, row(1, "b"), nil),
	}
}

// checkAnnotationsMember checks that annotated is plain with the member
// `,"annotations":{...}` inserted before its last closing brace (so
// nothing else changed), that the member holds testAnnotations exactly,
// and that its keys are in sorted order.
func checkAnnotationsMember(t *testing.T, name string, plain, annotated []byte) {
	t.Helper()
	if !bytes.HasPrefix(annotated, plain[:len(plain)-1]) || !bytes.HasSuffix(annotated, []byte("}")) {
		t.Fatalf("%s: annotated value %s\ndoes not start with the plain value %s", name, annotated, plain)
	}
	member := annotated[len(plain)-1 : len(annotated)-1]
	obj, ok := bytes.CutPrefix(member, []byte(`,"annotations":`))
	if !ok {
		t.Fatalf("%s: the annotated value adds %s, want a last member ,\"annotations\":{...}", name, member)
	}
	if !json.Valid(annotated) {
		t.Fatalf("%s: annotated value is not valid JSON: %s", name, annotated)
	}
	var got map[string]string
	if err := json.Unmarshal(obj, &got); err != nil {
		t.Fatalf("%s: annotations %s: %v", name, obj, err)
	}
	if !maps.Equal(got, testAnnotations) {
		t.Errorf("%s: annotations read back as %q, want %q", name, got, testAnnotations)
	}
	if keys := objectKeys(t, obj); !slices.IsSorted(keys) || len(keys) != len(testAnnotations) {
		t.Errorf("%s: annotation keys in the order %q, want each once, sorted", name, keys)
	}
}

// objectKeys returns the member names of a JSON object in their order.
func objectKeys(t *testing.T, obj []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestAnnotatedEncoders: JSONEncoder, UpsertEncoder and DebeziumEncoder
// with WriteAnnotations, once annotated, write the value they write
// without annotations plus a last "annotations" member holding every
// annotation, keys sorted, values escaped so that they read back
// unchanged; an upsert delete stays a tombstone.
func TestAnnotatedEncoders(t *testing.T) {
	t.Parallel()
	now := func() time.Time { return time.Unix(1767225600, 0) }
	for _, enc := range []kafkasink.Encoder{
		kafkasink.JSONEncoder{},
		kafkasink.UpsertEncoder{},
		debezium.Encoder{WriteAnnotations: true, Now: now},
	} {
		ann := annotated(t, enc)
		for _, e := range annotationsEvents() {
			name := fmt.Sprintf("%T %s", enc, e.Op)
			plain, err := enc.Encode([]byte{}, &e)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out, err := ann.Encode([]byte{}, &e)
			if err != nil {
				t.Fatalf("%s annotated: %v", name, err)
			}
			if plain == nil {
				if out != nil {
					t.Errorf("%s: annotated %s, want a tombstone as without annotations", name, out)
				}
				continue
			}
			checkAnnotationsMember(t, name, plain, out)
		}
	}
}

// TestAnnotatedEncodeAllocs: annotating costs no allocation per event.
func TestAnnotatedEncodeAllocs(t *testing.T) {
	e := annotationsEvents()[1]
	buf := make([]byte, 0, 4096)
	for _, enc := range []kafkasink.Encoder{
		kafkasink.JSONEncoder{},
		kafkasink.UpsertEncoder{},
		debezium.Encoder{WriteAnnotations: true},
	} {
		ann := annotated(t, enc)
		if n := testing.AllocsPerRun(200, func() { _, _ = ann.Encode(buf[:0], &e) }); n != 0 {
			t.Errorf("annotated %T allocates %v times per event, want 0", enc, n)
		}
	}
}

// TestDebeziumAnnotationsRefusals: DebeziumEncoder takes annotations in
// its value only with WriteAnnotations and without SchemasEnable, as
// WriteAnnotations says; an annotated encoder asked for a schema'd form
// afterwards (SchemasEnable set on it, or AppendAvro) refuses the event
// with an *EncodeError instead of writing a value its schema does not
// declare.
func TestDebeziumAnnotationsRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		enc  debezium.Encoder
		want string
	}{
		{"without WriteAnnotations", debezium.Encoder{}, "set DebeziumEncoder.WriteAnnotations"},
		{"with SchemasEnable", debezium.Encoder{WriteAnnotations: true, SchemasEnable: true}, "JSON without schemas only"},
	} {
		if _, err := c.enc.Annotate(testAnnotations); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Annotate: %v, want an error saying %q", c.name, err, c.want)
		}
	}

	enc, err := debezium.Encoder{WriteAnnotations: true}.Annotate(testAnnotations)
	if err != nil {
		t.Fatal(err)
	}
	d := enc.(debezium.Encoder)
	e := annotationsEvents()[0]
	e.Relation = &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
		{Name: "id", Type: &kafkasink.TypeInfo{Name: "int8", Kind: 'b', Modifier: -1}, NotNull: true},
		{Name: "name", Type: &kafkasink.TypeInfo{Name: "text", Kind: 'b', Modifier: -1}},
	}}
	if _, err := d.Encode(nil, &e); err != nil {
		t.Fatalf("annotated Encode with a Relation: %v", err)
	}
	d.SchemasEnable = true
	_, errSchemas := d.Encode(nil, &e)
	d.SchemasEnable = false
	_, errAvro := d.AppendAvro(nil, &e)
	for name, err := range map[string]error{"Encode with SchemasEnable": errSchemas, "AppendAvro": errAvro} {
		var ee *kafkasink.EncodeError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "JSON without schemas only") {
			t.Errorf("annotated encoder, %s: %v, want an *EncodeError saying annotations are for JSON without schemas only", name, err)
		}
	}
}

func TestParseAnnotationPlace(t *testing.T) {
	t.Parallel()
	for _, p := range []kafkasink.AnnotationPlace{kafkasink.AnnotateValue, kafkasink.AnnotateHeaders, kafkasink.AnnotateBoth} {
		got, err := kafkasink.ParseAnnotationPlace(p.String())
		if err != nil || got != p {
			t.Errorf("ParseAnnotationPlace(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	if _, err := kafkasink.ParseAnnotationPlace("key"); err == nil || !strings.Contains(err.Error(), "want value, headers or both") {
		t.Errorf("ParseAnnotationPlace(\"key\"): %v, want an error naming the places", err)
	}
}

// notAnnotator is an Encoder without Annotate, as a schema'd encoder of
// kafkasinkavro is.
type notAnnotator struct{ kafkasink.JSONEncoder }

func (notAnnotator) Annotate() {} // shadows JSONEncoder's: not an Annotator

// TestAnnotationsConfigErrors: New refuses each bad annotation setting
// with a problem naming the key and the fix.
func TestAnnotationsConfigErrors(t *testing.T) {
	t.Parallel()
	one := func(k, v string) map[string]string { return map[string]string{k: v} }
	tests := []struct {
		name string
		edit func(*kafkasink.Config)
		want [][]string
	}{
		{"empty key", func(c *kafkasink.Config) { c.Annotations = one("", "x") }, [][]string{{"Annotations", "empty key"}}},
		{"key too long", func(c *kafkasink.Config) {
			c.Annotations = one(strings.Repeat("k", kafkasink.MaxAnnotationKeyLen+1), "x")
		},
			[][]string{{"Annotations key", "129 bytes", "at most 128"}}},
		{"key with a space", func(c *kafkasink.Config) { c.Annotations = one("my env", "x") },
			[][]string{{`Annotations key "my env"`, "[a-zA-Z0-9._-]"}}},
		{"key with a colon", func(c *kafkasink.Config) { c.Annotations = one("env:prod", "x") },
			[][]string{{`Annotations key "env:prod"`, "[a-zA-Z0-9._-]"}}},
		{"the sink's header", func(c *kafkasink.Config) { c.Annotations = one(kafkasink.HeaderOp, "x") },
			[][]string{{`Annotations key "kafkasink.op"`, `"kafkasink."`, "reserved", "sink's own headers"}}},
		{"Debezium's header", func(c *kafkasink.Config) { c.Annotations = one(debezium.HeaderOldKey, "x") },
			[][]string{{`Annotations key "__debezium.oldkey"`, `"__"`, "reserved", "Kafka Connect and its connectors"}}},
		{"invalid UTF-8 value", func(c *kafkasink.Config) { c.Annotations = one("env", "pr\xffod") },
			[][]string{{`Annotations["env"]`, "not valid UTF-8"}}},
		{"AnnotationsIn unknown", func(c *kafkasink.Config) { c.Annotations, c.AnnotationsIn = one("env", "x"), 3 },
			[][]string{{"AnnotationsIn 3 is unknown"}}},
		{"AnnotationsIn without Annotations", func(c *kafkasink.Config) { c.AnnotationsIn = kafkasink.AnnotateHeaders },
			[][]string{{"AnnotationsIn is headers", "Annotations is empty"}}},
		{"value with an Encoder that is no Annotator", func(c *kafkasink.Config) {
			c.Annotations, c.Encoder = one("env", "x"), notAnnotator{}
		}, [][]string{{"AnnotationsIn is value", "notAnnotator", "does not write annotations", "AnnotateHeaders"}}},
		{"both with DebeziumEncoder without WriteAnnotations", func(c *kafkasink.Config) {
			c.Annotations, c.AnnotationsIn, c.Encoder = one("env", "x"), kafkasink.AnnotateBoth, debezium.Encoder{}
		}, [][]string{{"AnnotationsIn is both", "DebeziumEncoder.WriteAnnotations", "AnnotateHeaders"}}},
		{"value with DebeziumEncoder SchemasEnable", func(c *kafkasink.Config) {
			c.Annotations, c.KeyFormat = one("env", "x"), kafkasink.KeyJSON
			c.Encoder = debezium.Encoder{WriteAnnotations: true, SchemasEnable: true}
		}, [][]string{{"AnnotationsIn is value", "JSON without schemas only", "AnnotateHeaders"}}},
		{"every key problem at once", func(c *kafkasink.Config) {
			c.Annotations = map[string]string{"ok": "x", "b d": "x", "kafkasink.id": "x", "e": "\xff"}
		}, [][]string{{`"b d"`}, {`"kafkasink.id"`}, {`Annotations["e"]`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			tt.edit(&cfg)
			ce := configError(t, cfg)
			checkProblems(t, ce.Problems, tt.want)
			if len(ce.Problems) != len(tt.want) {
				t.Errorf("problems %q, want %d", ce.Problems, len(tt.want))
			}
		})
	}
}

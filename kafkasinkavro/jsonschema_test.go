package kafkasinkavro_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro/jsonschema"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// The tests of package jsonschema live here, to share this package's
// environment of real PostgreSQL, Kafka and Schema Registry.

// jsonEnv is an avroEnv whose pipeline writes with jsonschema's encoder
// of cfg, its Registry set.
func jsonEnv(t *testing.T, cfg jsonschema.Config) *avroEnv {
	e := newAvroEnv(t)
	cfg.Registry = e.registry
	enc, err := jsonschema.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.encoder = enc
	return e
}

// jsonRecord is a record's key or value in the JSON Schema wire format:
// its schema, as the registry has it under the record's id, and its JSON.
type jsonRecord struct {
	id      int
	schema  any // the JSON Schema, decoded
	payload []byte
}

func (e *avroEnv) jsonRecord(b []byte) jsonRecord {
	e.t.Helper()
	id, s := e.wireSchema(b)
	if s.Type != sr.TypeJSON {
		e.t.Fatalf("schema %d is %s, want JSON", id, s.Type)
	}
	var schema any
	if err := json.Unmarshal([]byte(s.Schema), &schema); err != nil {
		e.t.Fatalf("schema %d is not JSON: %v", id, err)
	}
	return jsonRecord{id: id, schema: schema, payload: b[5:]}
}

// validate checks doc against schema for the keywords the encoder's
// schemas use: type, enum, oneOf, anyOf, properties, additionalProperties
// false, required, items. It returns the first violation, with its path.
func validate(schema, doc any, path string) error {
	s, ok := schema.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: the schema %v is not an object", path, schema)
	}
	if t, ok := s["type"].(string); ok && !jsonType(doc, t) {
		return fmt.Errorf("%s: %v is not of type %s", path, doc, t)
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(v any) bool { return fmt.Sprint(v) == fmt.Sprint(doc) }) {
		return fmt.Errorf("%s: %v is none of %v", path, doc, enum)
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		alts, ok := s[kw].([]any)
		if !ok {
			continue
		}
		n := 0
		for _, alt := range alts {
			if validate(alt, doc, path) == nil {
				n++
			}
		}
		if n == 0 || kw == "oneOf" && n > 1 {
			return fmt.Errorf("%s: %v matches %d of the %d schemas of %s", path, doc, n, len(alts), kw)
		}
	}
	if obj, ok := doc.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		for k, v := range obj {
			p, ok := props[k]
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: property %q is not in the schema", path, k)
				}
				continue
			}
			if err := validate(p, v, path+"."+k); err != nil {
				return err
			}
		}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := obj[r.(string)]; !ok {
					return fmt.Errorf("%s: required property %q is missing", path, r)
				}
			}
		}
	}
	if arr, ok := doc.([]any); ok && s["items"] != nil {
		for i, v := range arr {
			if err := validate(s["items"], v, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonType reports whether v, decoded with UseNumber, is of JSON Schema
// type t.
func jsonType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case json.Number:
		_, err := v.Int64()
		return t == "number" || t == "integer" && (err == nil || !strings.ContainsAny(v.String(), ".eE"))
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// TestJSONSchemaRoundTrip streams the row of the golden type test
// (testdata/types.sql: every type pgcdc supports, from the real
// PostgreSQL) with the JSON Schema encoder: each value is the Confluent
// wire format around exactly the JSON that JSONEncoder writes (pgcdc's
// golden file), each key the KeyJSON object, and each validates against
// the JSON Schema the real registry has under the record's id, which a
// value with a column of the wrong type does not.
func TestJSONSchemaRoundTrip(t *testing.T) {
	e := jsonEnv(t, jsonschema.Config{})
	sql := pgtest.LoadTypesSQL(t, e.name)
	e.exec(sql.Setup)
	t.Cleanup(func() { e.exec(sql.Drop) })
	_, done, _ := e.run(sql.Table)
	e.exec(sql.Insert)
	e.exec(sql.Update)
	recs := e.readRecords(e.name+".public."+sql.Table, 2, done)

	payloads := make([][]byte, len(recs))
	for i, r := range recs {
		v, k := e.jsonRecord(r.Value), e.jsonRecord(r.Key)
		payloads[i] = v.payload
		if err := validate(v.schema, decodeJSON(t, v.payload), "value"); err != nil {
			t.Errorf("record %d: the value does not validate against schema %d: %v", i, v.id, err)
		}
		if string(k.payload) != `{"row_id":1}` {
			t.Errorf("record %d: key %s, want {\"row_id\":1}", i, k.payload)
		}
		if err := validate(k.schema, decodeJSON(t, k.payload), "key"); err != nil {
			t.Errorf("record %d: the key does not validate against schema %d: %v", i, k.id, err)
		}
		if i == 0 {
			wrong := decodeJSON(t, v.payload)
			wrong.(map[string]any)["after"].(map[string]any)["i4"] = "2147483647"
			if validate(v.schema, wrong, "value") == nil {
				t.Error("a value whose integer column holds a string validates: the schema checks nothing")
			}
		}
	}
	golden := pgtest.TypesGoldenFile(t)
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := pgtest.TypesGolden(t, payloads, e.name); !bytes.Equal(got, want) {
		t.Errorf("the values differ from JSONEncoder's in %s:\n%s", golden, got)
	}
}

// TestJSONSchemaEvolution changes a table while it is streamed with the
// JSON Schema encoder, against the real registry's BACKWARD check: ADD
// COLUMN of a nullable column registers a new version before the first
// record that needs it; ALTER TYPE int to bigint keeps the JSON type, so
// the schema and its id; ALTER TYPE int to text is refused: Run stops
// with a fatal PrepareError naming the column's change against the last
// version, the subject and the level, and nothing of that transaction is
// produced.
func TestJSONSchemaEvolution(t *testing.T) {
	e := jsonEnv(t, jsonschema.Config{})
	table := e.table("jevo", "id int PRIMARY KEY, a int")
	_, done, runErr := e.run(table)
	topic := e.name + ".public." + table
	e.exec("INSERT INTO " + table + " VALUES (1, 11)")
	e.exec("ALTER TABLE " + table + " ADD COLUMN b text")
	e.exec("INSERT INTO " + table + " VALUES (2, 22, 'two')")
	e.exec("ALTER TABLE " + table + " ALTER COLUMN a TYPE bigint")
	e.exec("INSERT INTO " + table + " VALUES (3, 9223372036854775807, 'three')")
	recs := e.readRecords(topic, 3, done)
	var ids []int
	var rows []string
	for _, r := range recs {
		v := e.jsonRecord(r.Value)
		ids = append(ids, v.id)
		doc := decodeJSON(t, v.payload)
		if err := validate(v.schema, doc, "value"); err != nil {
			t.Errorf("schema %d: %v", v.id, err)
		}
		rows = append(rows, fmt.Sprint(doc.(map[string]any)["after"]))
	}
	if want := "map[a:11 id:1] map[a:22 b:two id:2] map[a:9223372036854775807 b:three id:3]"; strings.Join(rows, " ") != want {
		t.Errorf("rows %s, want %s", strings.Join(rows, " "), want)
	}
	if ids[0] == ids[1] || ids[1] != ids[2] {
		t.Errorf("schema ids %v: want a new one after ADD COLUMN, the same after int to bigint", ids)
	}

	e.exec("BEGIN; ALTER TABLE " + table + " ALTER COLUMN a TYPE text; INSERT INTO " + table + " VALUES (4, 'four', 'four'); COMMIT")
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop after the registry refused the retyped table's schema")
	}
	err := runErr()
	var pe *kafkasink.PrepareError
	if !errors.As(err, &pe) || !kafkasink.IsFatal(err) {
		t.Fatalf("Run stopped with %v; want a fatal *kafkasink.PrepareError", err)
	}
	for _, part := range []string{"jsonschema:", "public." + table, "subject " + topic + "-value", "HTTP 409", "global BACKWARD",
		`changed "a" from {"oneOf":[{"type":"null"},{"type":"integer"}]} to {"oneOf":[{"type":"null"},{"type":"string"}]}`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %q: %v", part, err)
		}
	}
	if strings.Contains(err.Error(), `added "`) || strings.Contains(err.Error(), `dropped "`) {
		t.Errorf("the error names changes against a version older than the last: %v", err)
	}
	uncommitted, err := kafkasinktest.FetchUncommitted(context.Background(), e.brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(uncommitted); n != 3 {
		t.Errorf("the topic holds %d records, want the 3 before the refused change", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if versions, err := e.registry.Schemas(ctx, topic+"-value"); err != nil || len(versions) != 2 {
		t.Errorf("subject %s-value has %d versions (%v), want 2", topic, len(versions), err)
	}
}

// TestJSONSchemaEncode: with its table version prepared (a fake registry),
// an event's value is the wire format's header around JSONEncoder's bytes
// and its key around the KeyJSON object, without an allocation; an event
// not prepared is an EncodeError saying why.
func TestJSONSchemaEncode(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := jsonschema.New(jsonschema.Config{Registry: cl})
	if err != nil {
		t.Fatal(err)
	}
	e := benchEvent()
	var ee *kafkasink.EncodeError
	if _, err := enc.Encode(nil, &e); !errors.As(err, &ee) || !strings.Contains(err.Error(), "not prepared") {
		t.Errorf("Encode before Prepare: %v, want an EncodeError saying it was not prepared", err)
	}
	if err := enc.Prepare(context.Background(), []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: "shop.public.accounts", KeyColumns: e.Key}}); err != nil {
		t.Fatal(err)
	}
	value, err := enc.Encode(make([]byte, 0, 1024), &e)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := kafkasink.JSONEncoder{}.Encode(nil, &e)
	if value[0] != 0 || !bytes.Equal(value[5:], want) {
		t.Errorf("value %q, want the header and %s", value, want)
	}
	key, err := enc.EncodeKey(make([]byte, 0, 64), &e, e.Key)
	if err != nil || key[0] != 0 || string(key[5:]) != `{"id":1234567}` {
		t.Errorf("key %q (%v), want the header and {\"id\":1234567}", key, err)
	}
	ids := []uint32{binary.BigEndian.Uint32(value[1:5]), binary.BigEndian.Uint32(key[1:5])}
	for i, subject := range []string{"shop.public.accounts-value", "shop.public.accounts-key"} {
		s, err := cl.SchemaByVersion(context.Background(), subject, -1)
		if err != nil || uint32(s.ID) != ids[i] || s.Type != sr.TypeJSON {
			t.Errorf("subject %s: %+v (%v), want the JSON schema of id %d", subject, s, err, ids[i])
		}
	}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		enc.Encode(buf[:0], &e)
		enc.EncodeKey(buf[:0], &e, e.Key)
	}); n != 0 {
		t.Errorf("encoding a prepared event's value and key allocates %.1f times, want 0", n)
	}
}

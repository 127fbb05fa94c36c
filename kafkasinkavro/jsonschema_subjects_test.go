package kafkasinkavro_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinkavro/jsonschema"
)

// title is the title of a JSON Schema's text: the record name Confluent's
// subject name strategies take from it.
func title(t *testing.T, schema string) string {
	t.Helper()
	var s struct{ Title string }
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s.Title
}

// TestJSONSchemaSubjectStrategies prepares one event under each strategy,
// with a fake registry: the value and key schemas are under the
// strategy's subjects, titled as it says (the record names of RecordName
// and TopicRecordName, the topic's titles under TopicName as before).
func TestJSONSchemaSubjectStrategies(t *testing.T) {
	e := benchEvent()
	e.Table = "order-lines"
	const topic = "shop.all"
	for _, tt := range []struct {
		strategy  kafkasinkavro.SubjectStrategy
		namespace string
		subjects  []string // value's, key's
		titles    []string // value schema's, key schema's
	}{
		{kafkasinkavro.TopicName, "", []string{"shop.all-value", "shop.all-key"}, []string{"shop.all change event", "shop.all key"}},
		{kafkasinkavro.RecordName, "", []string{"public.order-lines.Envelope", "public.order-lines.Key"}, []string{"public.order-lines.Envelope", "public.order-lines.Key"}},
		{kafkasinkavro.RecordName, "db1.cdc", []string{"db1.cdc.public.order-lines.Envelope", "db1.cdc.public.order-lines.Key"}, []string{"db1.cdc.public.order-lines.Envelope", "db1.cdc.public.order-lines.Key"}},
		{kafkasinkavro.TopicRecordName, "db1", []string{"shop.all-db1.public.order-lines.Envelope", "shop.all-db1.public.order-lines.Key"}, []string{"db1.public.order-lines.Envelope", "db1.public.order-lines.Key"}},
	} {
		t.Run(tt.strategy.String()+"/"+tt.namespace, func(t *testing.T) {
			checkSubjects(t, e, topic, func(cl *sr.Client) (kafkasink.Preparer, error) {
				return jsonschema.New(jsonschema.Config{Registry: cl, Subjects: tt.strategy, Namespace: tt.namespace})
			}, tt.subjects, tt.titles, title)
		})
	}
}

// TestJSONSchemaSubjectConfig: New refuses a Namespace under TopicName
// (where it would do nothing) and an unknown strategy, each problem naming
// the field and the flag.
func TestJSONSchemaSubjectConfig(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cfg     jsonschema.Config
		problem string
	}{
		{jsonschema.Config{Namespace: "db1"}, `jsonschema.Config.Namespace "db1" applies to the RecordName and TopicRecordName subject strategies only`},
		{jsonschema.Config{Subjects: 7}, "jsonschema.Config.Subjects is SubjectStrategy(7)"},
	} {
		tt.cfg.Registry = cl
		_, err := jsonschema.New(tt.cfg)
		var ce *kafkasink.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.problem) || !strings.Contains(err.Error(), "-schema-registry-") {
			t.Errorf("%+v: %v, want a ConfigError %q naming the flag", tt.cfg, err, tt.problem)
		}
	}
}

// TestJSONSchemaSharedTopic routes two tables whose keys and rows
// have different types to one topic, streaming from the real PostgreSQL
// into the real registry with the JSON Schema encoder: under RecordName
// and TopicRecordName each table's schemas are one version of subjects of
// their own, titled with its record names, and every record is its own
// table's row behind the id of such a schema; under TopicName, the
// default, the second table's schema would be a new version of the
// topic's subject, which BACKWARD refuses (the closed content model does
// not read the first table's rows), so the pipeline stops there.
func TestJSONSchemaSharedTopic(t *testing.T) {
	for _, strategy := range []kafkasinkavro.SubjectStrategy{kafkasinkavro.RecordName, kafkasinkavro.TopicRecordName, kafkasinkavro.TopicName} {
		t.Run(strategy.String(), func(t *testing.T) {
			e := newAvroEnv(t)
			cfg := jsonschema.Config{Registry: e.registry, Subjects: strategy}
			if strategy != kafkasinkavro.TopicName {
				cfg.Namespace = e.name // under the cleanup's prefix
			}
			enc, err := jsonschema.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			e.encoder = enc
			a := e.table("a", "id int PRIMARY KEY, qty int")
			b := e.table("b", "code text PRIMARY KEY, note text")
			topic := e.name + ".shared"
			e.routes = map[string]string{"public." + a: topic, "public." + b: topic}
			_, done, runErr := e.run(a, b)
			e.exec("INSERT INTO " + a + " VALUES (1, 10)")
			e.exec("INSERT INTO " + b + " VALUES ('x', 'ex')")
			if refusedUnderTopicName(t, strategy, topic, done, runErr) {
				return
			}
			recs := e.readRecords(topic, 2, done)
			want := map[string]struct{ record, after, key string }{
				a: {e.name + ".public." + a, "map[id:1 qty:10]", "map[id:1]"},
				b: {e.name + ".public." + b, "map[code:x note:ex]", "map[code:x]"},
			}
			for _, r := range recs {
				v, k := e.jsonRecord(r.Value), e.jsonRecord(r.Key)
				doc := decodeJSON(t, v.payload).(map[string]any)
				table, _ := doc["table"].(string)
				w, ok := want[table]
				if !ok {
					t.Fatalf("a record of table %q", table)
				}
				if got := fmt.Sprint(doc["after"]); got != w.after {
					t.Errorf("%s: after %s, want %s", table, got, w.after)
				}
				if got := fmt.Sprint(decodeJSON(t, k.payload)); got != w.key {
					t.Errorf("%s: key %s, want %s", table, got, w.key)
				}
				if err := validate(v.schema, doc, "value"); err != nil {
					t.Errorf("%s: the value does not validate against schema %d: %v", table, v.id, err)
				}
				if got := v.schema.(map[string]any)["title"]; got != w.record+".Envelope" {
					t.Errorf("%s: value schema titled %v, want %s.Envelope", table, got, w.record)
				}
				if got := k.schema.(map[string]any)["title"]; got != w.record+".Key" {
					t.Errorf("%s: key schema titled %v, want %s.Key", table, got, w.record)
				}
			}
			checkSharedTopicSubjects(t, e, strategy, topic, sr.TypeJSON, want[a].record, want[b].record)
		})
	}
}

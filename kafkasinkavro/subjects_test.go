package kafkasinkavro_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinkavro/jsonschema"
)

// recordName is the full name of the record a schema text defines.
func recordName(t *testing.T, schema string) string {
	t.Helper()
	var s struct{ Name, Namespace string }
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s.Namespace + "." + s.Name
}

// TestSubjectStrategies prepares one event under each strategy, with a
// fake registry: the value and key schemas are under the strategy's
// subjects, their records named as it says, and a table's name is made
// of Avro names.
func TestSubjectStrategies(t *testing.T) {
	e := benchEvent()
	e.Table = "order-lines" // not an Avro name
	const topic = "shop.all"
	for _, tt := range []struct {
		strategy  kafkasinkavro.SubjectStrategy
		namespace string
		subjects  []string // value's, key's
		names     []string // value record's, key record's
	}{
		{kafkasinkavro.TopicName, "", []string{"shop.all-value", "shop.all-key"}, []string{"shop.all.Envelope", "shop.all.Key"}},
		{kafkasinkavro.RecordName, "", []string{"public.order_lines.Envelope", "public.order_lines.Key"}, []string{"public.order_lines.Envelope", "public.order_lines.Key"}},
		{kafkasinkavro.RecordName, "db1.cdc", []string{"db1.cdc.public.order_lines.Envelope", "db1.cdc.public.order_lines.Key"}, []string{"db1.cdc.public.order_lines.Envelope", "db1.cdc.public.order_lines.Key"}},
		{kafkasinkavro.TopicRecordName, "db1", []string{"shop.all-db1.public.order_lines.Envelope", "shop.all-db1.public.order_lines.Key"}, []string{"db1.public.order_lines.Envelope", "db1.public.order_lines.Key"}},
	} {
		t.Run(tt.strategy.String()+"/"+tt.namespace, func(t *testing.T) {
			checkSubjects(t, e, topic, func(cl *sr.Client) (kafkasink.Preparer, error) {
				return kafkasinkavro.New(kafkasinkavro.Config{Registry: cl, Subjects: tt.strategy, Namespace: tt.namespace})
			}, tt.subjects, tt.names, recordName)
		})
	}
}

// checkSubjects prepares e for topic with the encoder newEncoder makes on
// a fake registry of its own, and checks that the registry then has
// exactly the subjects want, each with one schema whose name (as name
// reads it from the schema's text: a record's name, a JSON Schema's
// title) is the one names gives at the same index.
func checkSubjects(t *testing.T, e kafkasink.Event, topic string, newEncoder func(*sr.Client) (kafkasink.Preparer, error),
	want, names []string, name func(*testing.T, string) string) {
	t.Helper()
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newEncoder(cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Prepare(context.Background(), []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: topic, KeyColumns: e.Key}}); err != nil {
		t.Fatal(err)
	}
	subjects, err := cl.Subjects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(subjects)
	if sorted := slices.Sorted(slices.Values(want)); !slices.Equal(subjects, sorted) {
		t.Fatalf("subjects %q, want %q", subjects, sorted)
	}
	for i, subject := range want {
		s, err := cl.SchemaByVersion(context.Background(), subject, -1)
		if err != nil {
			t.Fatal(err)
		}
		if got := name(t, s.Schema.Schema); got != names[i] {
			t.Errorf("subject %s: schema named %q, want %q", subject, got, names[i])
		}
	}
}

// TestSubjectStrategyConfig: New refuses a Namespace that is no Avro
// namespace, one under TopicName (where it would do nothing), and an
// unknown strategy, each problem naming the field and the flag.
func TestSubjectStrategyConfig(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cfg     kafkasinkavro.Config
		problem string
	}{
		{kafkasinkavro.Config{Subjects: kafkasinkavro.RecordName, Namespace: "db-1"}, `Namespace "db-1" is not an Avro namespace`},
		{kafkasinkavro.Config{Subjects: kafkasinkavro.RecordName, Namespace: "a..b"}, `Namespace "a..b" is not an Avro namespace`},
		{kafkasinkavro.Config{Subjects: kafkasinkavro.RecordName, Namespace: "1db"}, `Namespace "1db" is not an Avro namespace`},
		{kafkasinkavro.Config{Namespace: "db1"}, "applies to the RecordName and TopicRecordName subject strategies only"},
		{kafkasinkavro.Config{Subjects: 7}, "Config.Subjects is SubjectStrategy(7)"},
	} {
		tt.cfg.Registry = cl
		_, err := kafkasinkavro.New(tt.cfg)
		var ce *kafkasink.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.problem) || !strings.Contains(err.Error(), "-schema-registry-") {
			t.Errorf("%+v: %v, want a ConfigError %q naming the flag", tt.cfg, err, tt.problem)
		}
	}
	for _, name := range []string{"TopicNameStrategy", "recordnamestrategy", "TopicRecordNameStrategy"} {
		if s, ok := kafkasinkavro.ParseSubjectStrategy(name); !ok || !strings.EqualFold(s.String(), name) {
			t.Errorf("ParseSubjectStrategy(%q) = %s, %t", name, s, ok)
		}
	}
	if _, ok := kafkasinkavro.ParseSubjectStrategy("io.confluent.kafka.serializers.subject.Nope"); ok {
		t.Error("ParseSubjectStrategy accepted an unknown name")
	}
}

// TestTwoTablesOneTopic routes two tables whose keys and rows have
// different types to one topic, streaming from the real PostgreSQL into
// the real registry: under RecordName and TopicRecordName each table's
// schemas are one version of subjects of their own, and every record
// decodes with its own table's schema into its row; under TopicName, the
// default, the second table's schema would be a new version of the
// topic's subject, which BACKWARD refuses, so the pipeline stops there.
func TestTwoTablesOneTopic(t *testing.T) {
	for _, strategy := range []kafkasinkavro.SubjectStrategy{kafkasinkavro.RecordName, kafkasinkavro.TopicRecordName, kafkasinkavro.TopicName} {
		t.Run(strategy.String(), func(t *testing.T) {
			e := newAvroEnv(t)
			a := e.table("a", "id int PRIMARY KEY, qty int")
			b := e.table("b", "code text PRIMARY KEY, note text")
			topic := e.name + ".shared"
			e.routes = map[string]string{"public." + a: topic, "public." + b: topic}
			e.avro = kafkasinkavro.Config{Subjects: strategy}
			if strategy != kafkasinkavro.TopicName {
				e.avro.Namespace = e.name // under the cleanup's prefix
			}
			_, done, runErr := e.run(a, b)
			e.exec("INSERT INTO " + a + " VALUES (1, 10)")
			e.exec("INSERT INTO " + b + " VALUES ('x', 'ex')")
			if refusedUnderTopicName(t, strategy, topic, done, runErr) {
				return
			}
			recs := e.readRecords(topic, 2, done)
			want := map[string]struct{ ns, after, key string }{
				a: {e.name + ".public." + a, "map[id:1 qty:10]", "map[id:1]"},
				b: {e.name + ".public." + b, "map[code:x note:ex]", "map[code:x]"},
			}
			for _, r := range recs {
				v, k := e.decode(r.Value), e.decode(r.Key)
				table, _ := v.value["table"].(string)
				w, ok := want[table]
				if !ok {
					t.Fatalf("a record of table %q", table)
				}
				if got := fmt.Sprint(v.value["after"]); got != w.after {
					t.Errorf("%s: after %s, want %s", table, got, w.after)
				}
				if got := fmt.Sprint(k.value); got != w.key {
					t.Errorf("%s: key %s, want %s", table, got, w.key)
				}
				if got := recordName(t, v.schema); got != w.ns+".Envelope" {
					t.Errorf("%s: value record %s, want %s.Envelope", table, got, w.ns)
				}
				if got := recordName(t, k.schema); got != w.ns+".Key" {
					t.Errorf("%s: key record %s, want %s.Key", table, got, w.ns)
				}
			}
			checkSharedTopicSubjects(t, e, strategy, topic, sr.TypeAvro, want[a].ns, want[b].ns)
		})
	}
}

// refusedUnderTopicName reports whether strategy is TopicName, under
// which two tables of other columns cannot share topic: Run must then
// have stopped with the registry's refusal (HTTP 409) of the topic's
// value subject.
func refusedUnderTopicName(t *testing.T, strategy kafkasinkavro.SubjectStrategy, topic string, done <-chan struct{}, runErr func() error) bool {
	t.Helper()
	if strategy != kafkasinkavro.TopicName {
		return false
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop: the second table's schema is not BACKWARD compatible with the first's")
	}
	if err := runErr(); !kafkasink.IsFatal(err) || !strings.Contains(err.Error(), "subject "+topic+"-value") || !strings.Contains(err.Error(), "HTTP 409") {
		t.Fatalf("Run stopped with %v; want the registry's refusal of %s-value", err, topic)
	}
	return true
}

// checkSharedTopicSubjects checks the registry after tables whose
// records are named records shared topic under strategy: one schema of
// type typ under each record's .Envelope and .Key subjects (after
// "<topic>-" under TopicRecordName), and nothing under the topic's own.
func checkSharedTopicSubjects(t *testing.T, e *avroEnv, strategy kafkasinkavro.SubjectStrategy, topic string, typ sr.SchemaType, records ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, record := range records {
		for _, suffix := range []string{".Envelope", ".Key"} {
			subject := record + suffix
			if strategy == kafkasinkavro.TopicRecordName {
				subject = topic + "-" + subject
			}
			versions, err := e.registry.Schemas(ctx, subject)
			if err != nil || len(versions) != 1 || versions[0].Type != typ {
				t.Errorf("subject %s: %d versions, %v; want 1 of type %s", subject, len(versions), err, typ)
			}
		}
	}
	for _, s := range []string{topic + "-value", topic + "-key"} {
		if _, err := e.registry.Schemas(ctx, s); err == nil {
			t.Errorf("subject %s exists; %s registers nothing under the topic's subjects", s, strategy)
		}
	}
}

// TestKeyColumnNotInTable: a key column (kafkasink.Config.KeyColumns)
// the table lacks stops Prepare with a PrepareError naming the column,
// the table and the setting to fix, in each registry encoder, before
// anything is registered for the key.
func TestKeyColumnNotInTable(t *testing.T) {
	e := benchEvent()
	for _, c := range []struct {
		name string
		new  func(*sr.Client) (kafkasink.Preparer, error)
		want []string
	}{
		{"avro", func(cl *sr.Client) (kafkasink.Preparer, error) {
			return kafkasinkavro.New(kafkasinkavro.Config{Registry: cl})
		}, []string{`kafkasinkavro: key column "nope" is not a column of public.accounts`, "-key-columns"}},
		{"json-schema", func(cl *sr.Client) (kafkasink.Preparer, error) {
			return jsonschema.New(jsonschema.Config{Registry: cl})
		}, []string{`jsonschema: key column "nope" is not a column of public.accounts`, "-key-columns"}},
		{"debezium-avro", func(cl *sr.Client) (kafkasink.Preparer, error) {
			return kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: cl}, debezium.Encoder{Name: "shop"})
		}, []string{`the key column "nope" is not in the table's Debezium row`, "-key-columns"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := srfake.New()
			defer reg.Close()
			cl, err := sr.NewClient(sr.URLs(reg.URL()))
			if err != nil {
				t.Fatal(err)
			}
			enc, err := c.new(cl)
			if err != nil {
				t.Fatal(err)
			}
			err = enc.Prepare(context.Background(), []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: "shop.accounts", KeyColumns: []string{"id", "nope"}}})
			var pe *kafkasink.PrepareError
			if !errors.As(err, &pe) {
				t.Fatalf("Prepare: %v, want a PrepareError", err)
			}
			for _, part := range c.want {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Prepare: %v; want it to say %q", err, part)
				}
			}
			subjects, err := cl.Subjects(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(subjects, func(s string) bool { return strings.HasSuffix(s, "-key") }) {
				t.Errorf("subjects %q: a key schema was registered", subjects)
			}
		})
	}
}

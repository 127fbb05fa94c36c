package jsonschema

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinkavro/internal/registry"
)

// Config configures an Encoder.
type Config struct {
	// Registry is the Schema Registry client the schemas are registered
	// with: franz-go's sr.Client, whose options set the registry's URLs,
	// TLS and authentication. Required.
	Registry *sr.Client
	// Subjects says under which subjects the schemas are registered,
	// and so whether tables may share a topic: kafkasinkavro.TopicName
	// (the default) registers them under <topic>-value and <topic>-key,
	// where the tables of one topic are versions of one subject;
	// RecordName under each schema's title, its record name
	// [Namespace.]<schema>.<table>.Envelope and .Key, a subject per table
	// whatever its topic; TopicRecordName under <topic>-<title>, a
	// subject per table and topic. These are the subjects Confluent's
	// serializers use with the strategies of the same names, which take a
	// JSON Schema's record name from its title.
	Subjects kafkasinkavro.SubjectStrategy
	// Namespace is put before <schema>.<table> in the titles, and so the
	// subjects, under RecordName and TopicRecordName, so that pipelines
	// of several databases can share a registry. Default empty; set
	// under TopicName it is refused.
	Namespace string
}

// Encoder writes events as JSON in the Confluent wire format, with their
// JSON Schemas in a Schema Registry (see the package documentation). It
// is a kafkasink.Encoder, Preparer and KeyEncoder: give it to
// kafkasink.Config.Encoder. It is safe for concurrent use, and may be
// shared by several sinks.
type Encoder struct {
	registry  *sr.Client
	subjects  kafkasinkavro.SubjectStrategy
	namespace string
	versions  registry.Versions[*tableVersion] // the table versions prepared
}

// tableVersion is one version of a table as written to one topic: its
// columns and the ids of its registered schemas.
type tableVersion struct {
	topic         string
	schema, table string
	columns       []column // in table order
	valueID       int
	keyColumns    []string // the key's columns by name; nil without a key schema
	key           []column // in key order
	keyID         int
}

// Place implements registry.Version.
func (tv *tableVersion) Place() (topic, schema, table string, keyColumns []string) {
	return tv.topic, tv.schema, tv.table, tv.keyColumns
}

var (
	_ kafkasink.Encoder    = (*Encoder)(nil)
	_ kafkasink.Preparer   = (*Encoder)(nil)
	_ kafkasink.KeyEncoder = (*Encoder)(nil)
)

// New checks cfg and returns an Encoder.
func New(cfg Config) (*Encoder, error) {
	if cfg.Registry == nil {
		return nil, &kafkasink.ConfigError{Problems: []string{"jsonschema.Config.Registry is nil; set it to an sr.Client for the Schema Registry (-schema-registry)"}}
	}
	if problems := checkNames(&cfg); problems != nil {
		return nil, &kafkasink.ConfigError{Problems: problems}
	}
	return &Encoder{registry: cfg.Registry, subjects: cfg.Subjects, namespace: cfg.Namespace}, nil
}

// Prepare implements kafkasink.Preparer: it registers the value schema of
// every table version among events not registered for its topic yet, and
// the key schema of its key columns, under the subjects of Config.Subjects.
// Registering a schema the subject has is idempotent: the
// registry answers with the id it has.
func (enc *Encoder) Prepare(ctx context.Context, events []kafkasink.Event, routes []kafkasink.EventRoute) error {
	return enc.versions.Prepare(ctx, "jsonschema", events, routes, enc.register)
}

// register makes e's table version ready for route: it registers the
// value schema unless prev (the version prepared before) has it for the
// same topic, and the key schema of route's key columns.
func (enc *Encoder) register(ctx context.Context, e *kafkasink.Event, route kafkasink.EventRoute, prev *tableVersion, ok bool) (*tableVersion, error) {
	next := &tableVersion{topic: route.Topic, schema: e.Schema, table: e.Table}
	n := enc.namesFor(route.Topic, e)
	if ok && prev.topic == route.Topic {
		*next = *prev
	} else {
		next.columns = make([]column, len(e.Relation.Columns))
		for i := range e.Relation.Columns {
			next.columns[i] = columnOf(&e.Relation.Columns[i])
		}
		var err error
		if next.valueID, err = enc.registerSchema(ctx, e, n.valueSubject, valueSchema(n.valueTitle, next.columns), next.columns, false); err != nil {
			return nil, err
		}
	}
	if len(route.KeyColumns) == 0 || slices.Equal(next.keyColumns, route.KeyColumns) {
		return next, nil
	}
	key, missing := registry.Pick(next.columns, func(c column) string { return c.name }, route.KeyColumns)
	if missing != "" {
		return nil, registry.KeyColumnError("jsonschema", e, missing)
	}
	next.keyColumns, next.key = slices.Clone(route.KeyColumns), key
	var err error
	if next.keyID, err = enc.registerSchema(ctx, e, n.keySubject, keySchema(n.keyTitle, key), key, true); err != nil {
		return nil, err
	}
	return next, nil
}

// registerSchema registers text, the value schema of cols or their key
// schema (key), under subject and returns its id.
func (enc *Encoder) registerSchema(ctx context.Context, e *kafkasink.Event, subject, text string, cols []column, key bool) (int, error) {
	return registry.Register(ctx, enc.registry, "jsonschema", kafkasink.TableName(e.Schema, e.Table), subject, sr.Schema{Schema: text, Type: sr.TypeJSON}, func() string {
		var changed string
		if prev, ok := enc.versions.Previous(e); ok {
			old := prev.columns
			if key {
				old = prev.key
			}
			changed = registry.Changes(described(old), described(cols))
		}
		return fmt.Sprintf("the table changed in a way the subject's compatibility level (%s) does not allow%s; "+
			"undo the change (under BACKWARD a new column must be nullable, and no column may be dropped or change its JSON type), "+
			"let the subject accept it (PUT /config/%s with the registry), or %s",
			registry.Compatibility(ctx, enc.registry, subject), changed, subject, enc.newSubjectFix())
	})
}

// described is cols as registry.Changes takes them, each with its schema.
func described(cols []column) []registry.Column {
	out := make([]registry.Column, len(cols))
	for i := range cols {
		out[i] = registry.Column{Name: cols[i].name, Type: cols[i].schema}
	}
	return out
}

// Encode implements kafkasink.Encoder: the event as kafkasink.JSONEncoder
// writes it, in the Confluent wire format with the id of its table
// version's value schema.
func (enc *Encoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	tv, err := enc.versions.Lookup(e, "jsonschema", "its JSON Schema")
	if err != nil {
		return nil, err
	}
	return kafkasink.JSONEncoder{}.Encode(registry.AppendHeader(dst, tv.valueID), e)
}

// EncodeKey implements kafkasink.KeyEncoder: the KeyJSON object of
// columns, in the Confluent wire format with the id of the key schema.
func (enc *Encoder) EncodeKey(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	tv, err := enc.versions.Lookup(e, "jsonschema", "its JSON Schema")
	if err != nil {
		return nil, err
	}
	if !slices.Equal(tv.keyColumns, columns) {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("key columns %q were not prepared (%q were)", columns, tv.keyColumns)}
	}
	return kafkasink.AppendKey(registry.AppendHeader(dst, tv.keyID), e, columns, kafkasink.KeyJSON)
}

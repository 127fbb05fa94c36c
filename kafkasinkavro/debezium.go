package kafkasinkavro

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinkavro/internal/registry"
)

// DebeziumEncoder writes Debezium's envelope in Avro, as Debezium's
// PostgreSQL connector with Kafka Connect's AvroConverter writes it (see
// the package documentation, "Debezium's envelope"). Make one with
// NewDebezium and give it to kafkasink.Config.Encoder. It is safe for
// concurrent use.
type DebeziumEncoder struct {
	// dbz writes the records' content: each event's envelope and key
	// payloads, and the Connect schemas the Avro schemas are made from.
	dbz      debezium.Encoder
	registry *sr.Client
	subjects SubjectStrategy
	versions registry.Versions[*debeziumVersion] // the table versions prepared
	// frames are the schemas of the transaction records
	// (ProvideTransactionMetadata), once registered; nil until then.
	frames atomic.Pointer[debeziumFrames]
}

// debeziumFrames are the ids of the registered schemas of the BEGIN and
// END records.
type debeziumFrames struct {
	keyID, valueID int
}

// debeziumVersion is one table version as written to one topic: its
// Avro schemas' ids (a registry.Version).
type debeziumVersion struct {
	topic         string
	schema, table string
	envelope      *debezium.ConnectSchema // the Connect schema of the value
	valueID       int
	keyColumns    []string // nil without a key schema
	keyID         int
}

// Place implements registry.Version.
func (v *debeziumVersion) Place() (topic, schema, table string, keyColumns []string) {
	return v.topic, v.schema, v.table, v.keyColumns
}

var (
	_ kafkasink.Encoder      = (*DebeziumEncoder)(nil)
	_ kafkasink.Preparer     = (*DebeziumEncoder)(nil)
	_ kafkasink.KeyEncoder   = (*DebeziumEncoder)(nil)
	_ kafkasink.RecordShaper = (*DebeziumEncoder)(nil)
	_ kafkasink.Framer       = (*DebeziumEncoder)(nil)
	_ kafkasink.Explainer    = (*DebeziumEncoder)(nil)
)

// NewDebezium checks cfg and dbz and returns a DebeziumEncoder. Of cfg,
// Registry and Subjects apply: under TopicName the subjects are
// <topic>-value and <topic>-key, under RecordName the records' full names
// (Debezium's, <Name>.<schema>.<table>.Envelope and .Key), under
// TopicRecordName <topic>-<full name>; Namespace is refused, as Debezium
// names its records itself. dbz's
// options apply as they do to debezium.Encoder: Name (Debezium's
// topic.prefix, the first part of the schemas' names; give the sink the
// same kafkasink.Topics.Prefix for Debezium's topic names), Now, the
// value modes (DecimalHandling, TimePrecision, IntervalHandling,
// BinaryHandling, UnavailableValuePlaceholder), LSNAsString,
// MatchDebeziumLosses, the record shape (DisableTombstones,
// SkippedOperations, DisableExtendedHeaders, RunID) and
// ProvideTransactionMetadata with TransactionTopic (the BEGIN and END
// records, in Avro under the subjects <TransactionTopic>-key and -value).
// SchemasEnable is implied: the Avro schemas are made from the Connect
// schemas it declares.
func NewDebezium(cfg Config, dbz debezium.Encoder) (*DebeziumEncoder, error) {
	problems := checkNames(&cfg)
	if cfg.Registry == nil {
		problems = append([]string{"kafkasinkavro.Config.Registry is nil; set it to an sr.Client for the Schema Registry (-schema-registry)"}, problems...)
	}
	if cfg.Namespace != "" && cfg.Subjects != TopicName {
		problems = append(problems, fmt.Sprintf("kafkasinkavro.Config.Namespace %q does not apply to NewDebezium: Debezium names its records <Name>.<schema>.<table>.Envelope and .Key "+
			"(kafkasink.DebeziumEncoder.Name; -slot); leave Namespace (-schema-registry-namespace) empty", cfg.Namespace))
	}
	if problems != nil {
		return nil, &kafkasink.ConfigError{Problems: problems}
	}
	dbz.SchemasEnable = true
	return &DebeziumEncoder{dbz: dbz, registry: cfg.Registry, subjects: cfg.Subjects}, nil
}

// Shape implements kafkasink.RecordShaper as debezium.Encoder
// does: the tombstone after a delete, the skipped operations.
func (d *DebeziumEncoder) Shape(e *kafkasink.Event) kafkasink.RecordShape { return d.dbz.Shape(e) }

// AppendHeaders implements kafkasink.RecordShaper as
// debezium.Encoder does: Debezium's headers. The other key of a
// key change (__debezium.oldkey, __debezium.newkey) is written as
// Debezium's converters write it, its JSON payload ({"id":2}), whatever
// the sink's Config.KeyFormat.
func (d *DebeziumEncoder) AppendHeaders(dst []kafkasink.Header, arena []byte, e *kafkasink.Event, otherKey []byte) ([]kafkasink.Header, []byte) {
	if e.Source.KeyChange != nil && otherKey != nil {
		if v, ok := d.versions.Get(e.Relation); ok && v.keyColumns != nil {
			other := kafkasink.Event{Op: kafkasink.OpInsert, Schema: e.Schema, Table: e.Table, Position: e.Position, Key: e.Key, Relation: e.Relation, After: e.Source.KeyChange}
			start := len(arena)
			if out, err := d.dbz.AppendKeyPayload(arena, &other, v.keyColumns); err == nil {
				arena, otherKey = out, out[start:len(out):len(out)]
			}
		}
	}
	return d.dbz.AppendHeaders(dst, arena, e, otherKey)
}

// Prepare implements kafkasink.Preparer: it registers the Avro schemas of
// every table version among events not registered for its topic yet,
// under the subjects of Config.Subjects, as Encoder.Prepare does.
func (d *DebeziumEncoder) Prepare(ctx context.Context, events []kafkasink.Event, routes []kafkasink.EventRoute) error {
	if err := d.prepareFrames(ctx, events); err != nil {
		return err
	}
	return d.versions.Prepare(ctx, "kafkasinkavro", events, routes,
		func(ctx context.Context, e *kafkasink.Event, route kafkasink.EventRoute, prev *debeziumVersion, _ bool) (*debeziumVersion, error) {
			return d.register(ctx, e, route, prev)
		})
}

// register makes e's table version ready for route: the value schema
// unless v (the version prepared before, or nil) has it for the same
// topic, and the key schema of route's key columns.
func (d *DebeziumEncoder) register(ctx context.Context, e *kafkasink.Event, route kafkasink.EventRoute, v *debeziumVersion) (*debeziumVersion, error) {
	next := &debeziumVersion{topic: route.Topic, schema: e.Schema, table: e.Table}
	if v != nil && v.topic == route.Topic {
		*next = *v
	} else {
		env, err := d.envelopeSchema(e)
		if err != nil {
			return nil, &kafkasink.PrepareError{Err: err}
		}
		text, err := convertConnectSchema(env)
		if err != nil {
			return nil, &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: the Debezium schema of %s: %w", kafkasink.TableName(e.Schema, e.Table), err)}
		}
		next.envelope = env
		if next.valueID, err = d.registerSchema(ctx, e, d.subject(route.Topic, env.Name, false), text, rowColumns(&env.Fields[0]), false); err != nil {
			return nil, err
		}
	}
	if len(route.KeyColumns) == 0 || slices.Equal(next.keyColumns, route.KeyColumns) {
		return next, nil
	}
	ks, err := keyConnectSchema(next.envelope, route.KeyColumns)
	if err != nil {
		return nil, &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: the Debezium key of %s: %w; fix kafkasink.Config.KeyColumns (-key-columns) for the table",
			kafkasink.TableName(e.Schema, e.Table), err)}
	}
	text, err := convertConnectSchema(ks)
	if err != nil {
		return nil, &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: the Debezium key schema of %s: %w", kafkasink.TableName(e.Schema, e.Table), err)}
	}
	next.keyColumns = slices.Clone(route.KeyColumns)
	if next.keyID, err = d.registerSchema(ctx, e, d.subject(route.Topic, ks.Name, true), text, rowColumns(ks), true); err != nil {
		return nil, err
	}
	return next, nil
}

// subject is the subject of the schema of the record named record (its
// full name), a key's when key, written to topic, under Config.Subjects.
func (d *DebeziumEncoder) subject(topic, record string, key bool) string {
	switch {
	case d.subjects == RecordName:
		return record
	case d.subjects == TopicRecordName:
		return topic + "-" + record
	case key:
		return topic + "-key"
	}
	return topic + "-value"
}

// registerSchema registers text under subject and returns its id; cols
// are the row's (key's, with key) columns, to say what changed when the
// registry refuses it.
func (d *DebeziumEncoder) registerSchema(ctx context.Context, e *kafkasink.Event, subject, text string, cols []registry.Column, key bool) (int, error) {
	return registry.Register(ctx, d.registry, "kafkasinkavro", kafkasink.TableName(e.Schema, e.Table), subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, func() string {
		var changed string
		if prev, ok := d.versions.Previous(e); ok && prev.envelope != nil {
			old := rowColumns(&prev.envelope.Fields[0])
			if key {
				old = nil
				if ks, err := keyConnectSchema(prev.envelope, prev.keyColumns); err == nil {
					old = rowColumns(ks)
				}
			}
			changed = registry.Changes(old, cols)
		}
		return fmt.Sprintf("the table changed in a way the subject's compatibility level (%s) does not allow%s; "+
			"undo the change (under BACKWARD a new column must be nullable, and no column may change its type), "+
			"let the subject accept it (PUT /config/%s with the registry), or route the table to a new topic (kafkasink.Config.Topics; -topic-routes)",
			registry.Compatibility(ctx, d.registry, subject), changed, subject)
	})
}

// rowColumns describes the fields of a Debezium row or key struct for
// registry.Changes: each column with its Connect type, "NOT NULL int32",
// "io.debezium.time.MicroTimestamp (int64)".
func rowColumns(row *debezium.ConnectSchema) []registry.Column {
	out := make([]registry.Column, len(row.Fields))
	for i := range row.Fields {
		f := &row.Fields[i]
		typ := f.Type
		if f.Name != "" {
			typ = f.Name + " (" + f.Type + ")"
		}
		if !f.Optional {
			typ = "NOT NULL " + typ
		}
		out[i] = registry.Column{Name: f.Field, Type: typ}
	}
	return out
}

// envelopeSchema returns the Connect schema debezium.Encoder declares
// for e's table version (debezium.Encoder.ValueSchema, as under
// SchemasEnable): the schema does not depend on the rows, and a row value
// it cannot write must reject its event in Encode, not stop the sink
// here.
func (d *DebeziumEncoder) envelopeSchema(e *kafkasink.Event) (*debezium.ConnectSchema, error) {
	s, err := d.dbz.ValueSchema(e)
	if err != nil {
		return nil, fmt.Errorf("kafkasinkavro: the Debezium schema of %s: %w", kafkasink.TableName(e.Schema, e.Table), err)
	}
	return s, nil
}

// Encode implements kafkasink.Encoder: Debezium's envelope of e in the
// Confluent wire format, with the id of its table version's value schema.
func (d *DebeziumEncoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	v, err := d.versions.Lookup(e, "kafkasinkavro", "its Avro schema")
	if err != nil {
		return nil, err
	}
	if err := v.checkUnchanged(e); err != nil {
		return nil, err
	}
	return d.dbz.AppendAvro(registry.AppendHeader(dst, v.valueID), e)
}

// EncodeKey implements kafkasink.KeyEncoder: Debezium's key of e, the
// record of the key columns, in the Confluent wire format with the id of
// the key schema.
func (d *DebeziumEncoder) EncodeKey(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	v, err := d.versions.Lookup(e, "kafkasinkavro", "its Avro schema")
	if err != nil {
		return nil, err
	}
	if !slices.Equal(v.keyColumns, columns) {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("key columns %q were not prepared (%q were)", columns, v.keyColumns)}
	}
	return d.dbz.AppendAvroKey(registry.AppendHeader(dst, v.keyID), e, columns)
}

// FrameTopic implements kafkasink.Framer: debezium.Encoder's
// transaction topic with ProvideTransactionMetadata, "" without.
func (d *DebeziumEncoder) FrameTopic() string { return d.dbz.FrameTopic() }

// Explain implements kafkasink.Explainer as debezium.Encoder does, so
// that the sink's problems about its keys, frames and null keys name its
// options.
func (d *DebeziumEncoder) Explain(f kafkasink.Feature) (why, fix string) { return d.dbz.Explain(f) }

// prepareFrames registers the schemas of the BEGIN and END records
// (Debezium's TransactionMetadataKey and TransactionMetadataValue) under
// the transaction topic's subjects (Config.Subjects), once, before the
// first Write that may write one.
func (d *DebeziumEncoder) prepareFrames(ctx context.Context, events []kafkasink.Event) error {
	topic := d.FrameTopic()
	if topic == "" || d.frames.Load() != nil || len(events) == 0 {
		return nil
	}
	// The event names the table the registry's refusal would name.
	probe := kafkasink.Event{Op: kafkasink.OpInsert, Schema: events[0].Schema, Table: events[0].Table}
	keySchema, valueSchema := d.dbz.FrameSchemas()
	var f debeziumFrames
	for _, part := range []struct {
		schema *debezium.ConnectSchema
		key    bool
		id     *int
	}{{keySchema, true, &f.keyID}, {valueSchema, false, &f.valueID}} {
		text, err := convertConnectSchema(part.schema)
		if err != nil {
			return &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: the Debezium transaction record's schema: %w", err)}
		}
		if *part.id, err = d.registerSchema(ctx, &probe, d.subject(topic, part.schema.Name, part.key), text, nil, false); err != nil {
			return err
		}
	}
	d.frames.Store(&f)
	return nil
}

// AppendFrame implements kafkasink.Framer: Debezium's BEGIN (after false)
// or END record of e's transaction, key and value in the Confluent wire
// format with the ids of the schemas prepareFrames registered.
func (d *DebeziumEncoder) AppendFrame(dst []byte, e *kafkasink.Event, after bool) ([]byte, int) {
	f := d.frames.Load()
	if f == nil {
		// The sink asks for frames only in a Write, which prepared them.
		panic("kafkasinkavro: AppendFrame before Prepare registered the transaction records' schemas")
	}
	out := d.dbz.AppendAvroFrameKey(registry.AppendHeader(dst, f.keyID), e, after)
	keyLen := len(out) - len(dst)
	return d.dbz.AppendAvroFrameValue(registry.AppendHeader(out, f.valueID), e, after), keyLen
}

// checkUnchanged refuses an event with an unchanged TOAST value (a value
// the change does not carry) that debezium.Encoder writes as the
// placeholder string (UnavailableValuePlaceholder) in a column whose Avro
// type is not a string: an array of a type Debezium gives no placeholder
// of its own (debezium.PlaceholderIsString: it does for bytea, hstore and for text, varchar,
// char, json, jsonb, bytea, integer, bigint, date and uuid arrays, which the
// root writes in the column's form).
func (v *debeziumVersion) checkUnchanged(e *kafkasink.Event) error {
	for _, row := range [...]kafkasink.Row{e.Before, e.After} {
		for i := range row {
			if !row[i].Unchanged || placeholderHasOwnForm(e.Relation, row[i].Name) {
				continue
			}
			if f := v.rowField(row[i].Name); f != nil && f.Type != "string" {
				return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: row[i].Name, Err: errors.New(
					"an unchanged TOAST value (the change does not carry it), written as the placeholder string kafkasink.DebeziumEncoder.UnavailableValuePlaceholder, " +
						"which this column's Avro type (an array of a type Debezium gives no placeholder of its own) cannot hold; give the table REPLICA IDENTITY FULL (ALTER TABLE ... REPLICA IDENTITY FULL) so that changes carry every value")}
			}
		}
	}
	return nil
}

// placeholderHasOwnForm reports whether debezium.Encoder writes
// the placeholder of an unchanged value of the column in the column's
// own form rather than as the string.
func placeholderHasOwnForm(rel *kafkasink.Relation, column string) bool {
	c, ok := rel.Column(column)
	if !ok || c.Type == nil {
		return false
	}
	return !debezium.PlaceholderIsString(c.Type)
}

// rowField returns the Connect schema of the row's field for column, nil
// when the row has none (a column Debezium leaves out).
func (v *debeziumVersion) rowField(column string) *debezium.ConnectSchema {
	row := &v.envelope.Fields[0] // before, the Value struct
	for i := range row.Fields {
		if row.Fields[i].Field == column {
			return &row.Fields[i]
		}
	}
	return nil
}

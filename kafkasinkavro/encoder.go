package kafkasinkavro

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/encoding/avrobin"
	"github.com/kafkasink/kafkasink/kafkasinkavro/internal/registry"
)

// Config configures an Encoder.
type Config struct {
	// Registry is the Schema Registry client the schemas are registered
	// with: franz-go's sr.Client, whose options set the registry's URLs
	// (sr.URLs), TLS (sr.DialTLSConfig) and basic or bearer
	// authentication (sr.BasicAuth, sr.BearerToken). Required.
	Registry *sr.Client

	// Subjects is the subject name strategy: under which subjects the
	// schemas are registered and how their records are named (see
	// SubjectStrategy). Default TopicName.
	Subjects SubjectStrategy
	// Namespace is put before <schema>.<table> in the records' namespace
	// under RecordName and TopicRecordName, so that the same tables of
	// two databases that share a registry have subjects of their own
	// (Debezium puts its topic.prefix there). Dot-separated Avro names.
	// Default none; it conflicts with TopicName, where records are named
	// after their topic.
	Namespace string
}

// Encoder writes events as Avro in the Confluent wire format, with their
// schemas in a Schema Registry (see the package documentation). It is a
// kafkasink.Encoder, Preparer and KeyEncoder: give it to
// kafkasink.Config.Encoder. It is safe for concurrent use, and may be
// shared by several sinks.
type Encoder struct {
	registry  *sr.Client
	subjects  SubjectStrategy
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
	valueSchema   string
	keyColumns    []string // the key's columns by name; nil without a key schema
	key           []column // the key's columns, in key order
	keyID         int
	keySchema     string
}

// New checks cfg and returns an Encoder.
func New(cfg Config) (*Encoder, error) {
	problems := checkNames(&cfg)
	if cfg.Registry == nil {
		problems = append([]string{"kafkasinkavro.Config.Registry is nil; set it to an sr.Client for the Schema Registry (-schema-registry)"}, problems...)
	}
	if problems != nil {
		return nil, &kafkasink.ConfigError{Problems: problems}
	}
	return &Encoder{registry: cfg.Registry, subjects: cfg.Subjects, namespace: cfg.Namespace}, nil
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

// Prepare implements kafkasink.Preparer: it registers the value schema of
// every table version among events not registered for its topic yet, and
// the key schema of its key columns, under the subjects of
// Config.Subjects (<topic>-value and <topic>-key by default). Registering
// a schema the subject has is idempotent: the registry answers with the
// id it has. An event without a Relation is left for Encode to reject.
func (enc *Encoder) Prepare(ctx context.Context, events []kafkasink.Event, routes []kafkasink.EventRoute) error {
	return enc.versions.Prepare(ctx, "kafkasinkavro", events, routes,
		func(ctx context.Context, e *kafkasink.Event, route kafkasink.EventRoute, prev *tableVersion, _ bool) (*tableVersion, error) {
			return enc.register(ctx, e, route, prev)
		})
}

// register makes e's table version ready for route: it registers the
// value schema unless tv (the version prepared before, or nil) has it for
// the same topic, and the key schema of route's key columns.
func (enc *Encoder) register(ctx context.Context, e *kafkasink.Event, route kafkasink.EventRoute, tv *tableVersion) (*tableVersion, error) {
	next := &tableVersion{topic: route.Topic, schema: e.Schema, table: e.Table}
	n := enc.namesFor(route.Topic, e)
	if tv != nil && tv.topic == route.Topic {
		*next = *tv
	} else {
		cols, err := tableColumns(e)
		if err != nil {
			return nil, &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: %w", err)}
		}
		next.columns = cols
		next.valueSchema = valueSchema(n.namespace, cols)
		if next.valueID, err = enc.registerSchema(ctx, e, n.valueSubject, next.valueSchema, cols); err != nil {
			return nil, err
		}
	}
	if len(route.KeyColumns) == 0 || slices.Equal(next.keyColumns, route.KeyColumns) {
		return next, nil
	}
	key, missing := registry.Pick(next.columns, func(c column) string { return c.name }, route.KeyColumns)
	if missing != "" {
		return nil, registry.KeyColumnError("kafkasinkavro", e, missing)
	}
	next.keyColumns, next.key = slices.Clone(route.KeyColumns), key
	next.keySchema = keySchema(n.namespace, key)
	var err error
	if next.keyID, err = enc.registerSchema(ctx, e, n.keySubject, next.keySchema, key); err != nil {
		return nil, err
	}
	return next, nil
}

// registerSchema registers text under subject and returns its id.
func (enc *Encoder) registerSchema(ctx context.Context, e *kafkasink.Event, subject, text string, cols []column) (int, error) {
	return registry.Register(ctx, enc.registry, "kafkasinkavro", kafkasink.TableName(e.Schema, e.Table), subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, func() string {
		prev, _ := enc.versions.Previous(e)
		return fmt.Sprintf("the table changed in a way the subject's compatibility level (%s) does not allow%s; "+
			"undo the change (under BACKWARD a new column must be nullable, and no column may change its type), "+
			"let the subject accept it (PUT /config/%s with the registry), or %s",
			registry.Compatibility(ctx, enc.registry, subject), changes(prev, cols, isKeySubject(subject)), subject, enc.newSubjectFix())
	})
}

// changes describes how cols differ from prev's columns (the key's when
// key), for an error message: ", the columns: added x (NOT NULL int); ...",
// or "" when prev is nil.
func changes(prev *tableVersion, cols []column, key bool) string {
	if prev == nil {
		return ""
	}
	old := prev.columns
	if key {
		old = prev.key
	}
	return registry.Changes(described(old), described(cols))
}

// described is cols as registry.Changes takes them.
func described(cols []column) []registry.Column {
	out := make([]registry.Column, len(cols))
	for i := range cols {
		out[i] = registry.Column{Name: cols[i].name, Type: cols[i].description()}
	}
	return out
}

// description is c's Avro type, for error messages: "NOT NULL int".
func (c *column) description() string {
	var b strings.Builder
	if !c.nullable {
		b.WriteString("NOT NULL ")
	}
	if c.array {
		b.WriteString("array of ")
	}
	b.WriteString(c.typeName())
	return b.String()
}

// typeName is the Avro type of c's kind: "int", "decimal(12,2)".
func (c *column) typeName() string {
	switch c.kind {
	case kindBoolean:
		return "boolean"
	case kindInt:
		return "int"
	case kindLong:
		return "long"
	case kindFloat:
		return "float"
	case kindDouble:
		return "double"
	case kindString:
		return "string"
	case kindBytes:
		return "bytes"
	case kindDecimal:
		return fmt.Sprintf("decimal(%d,%d)", c.precision, c.scale)
	case kindUUID:
		return "uuid"
	case kindDate:
		return "date"
	case kindTimeMicros:
		return "time-micros"
	case kindTimestampMicros:
		return "timestamp-micros"
	case kindLocalTimestampMicros:
		return "local-timestamp-micros"
	}
	return "kind(" + fmt.Sprint(uint8(c.kind)) + ")"
}

// Encode implements kafkasink.Encoder: the event's envelope, in the
// Confluent wire format with the id of its table version's value schema.
func (enc *Encoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	tv, err := enc.versions.Lookup(e, "kafkasinkavro", "its Avro schema")
	if err != nil {
		return nil, err
	}
	out, err := tv.appendEnvelope(registry.AppendHeader(dst, tv.valueID), e)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EncodeKey implements kafkasink.KeyEncoder: the key record of columns,
// in the Confluent wire format with the id of the key schema.
func (enc *Encoder) EncodeKey(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	tv, err := enc.versions.Lookup(e, "kafkasinkavro", "its Avro schema")
	if err != nil {
		return nil, err
	}
	if !slices.Equal(tv.keyColumns, columns) {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("key columns %q were not prepared (%q were)", columns, tv.keyColumns)}
	}
	dst = registry.AppendHeader(dst, tv.keyID)
	row := e.Image()
	for i := range tv.key {
		c := &tv.key[i]
		col, ok := row.Get(c.name)
		if dst, err = appendColumn(dst, c, col.Value, ok && !col.Unchanged); err != nil {
			return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: c.name, Err: err}
		}
	}
	return dst, nil
}

// appendEnvelope appends e's envelope (see the package documentation).
func (tv *tableVersion) appendEnvelope(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if !e.Op.Valid() {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("invalid op %s", e.Op)}
	}
	if uint64(e.LSN) > math.MaxInt64 || uint64(e.Position.LSN) > math.MaxInt64 || e.Position.Index > math.MaxInt64 {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("position %s or LSN %s beyond Avro's long", e.Position, e.LSN)}
	}
	// The id's text is under 64 bytes: its length is one varint byte.
	at := len(dst)
	dst = e.Position.AppendText(append(dst, 0))
	dst[at] = byte((len(dst) - at - 1) << 1)
	dst = avrobin.AppendString(dst, e.Op.String())
	dst = avrobin.AppendString(dst, e.Schema)
	dst = avrobin.AppendString(dst, e.Table)
	dst = avrobin.AppendLong(dst, int64(e.LSN))
	dst = avrobin.AppendLong(dst, int64(e.Position.LSN))
	dst = avrobin.AppendLong(dst, int64(e.Position.Index))
	dst = avrobin.AppendLong(dst, int64(e.XID))
	if e.Commit.IsZero() {
		dst = append(dst, unionNull)
	} else {
		dst = avrobin.AppendLong(append(dst, unionValue), e.Commit.UnixMicro())
	}
	if len(e.Key) > 0 {
		dst = avrobin.AppendLong(dst, int64(len(e.Key)))
		for _, k := range e.Key {
			dst = avrobin.AppendString(dst, k)
		}
	}
	dst = append(dst, 0)
	var err error
	if dst, err = tv.appendRow(dst, e, e.Before); err != nil {
		return nil, err
	}
	if dst, err = tv.appendRow(dst, e, e.After); err != nil {
		return nil, err
	}
	dst = appendUnchanged(dst, e)
	if e.Op == kafkasink.OpTruncate {
		dst = avrobin.AppendBool(avrobin.AppendBool(append(dst, unionValue), e.Truncate.Cascade), e.Truncate.RestartIdentity)
	} else {
		dst = append(dst, unionNull)
	}
	if e.BackfillRunID == "" {
		return append(dst, unionNull), nil
	}
	return avrobin.AppendString(append(dst, unionValue), e.BackfillRunID), nil
}

// appendRow appends row as the union of null and the Value record.
func (tv *tableVersion) appendRow(dst []byte, e *kafkasink.Event, row kafkasink.Row) ([]byte, error) {
	if row == nil {
		return append(dst, unionNull), nil
	}
	dst = append(dst, unionValue)
	j := 0 // rows hold the columns in table order: find each by position first
	for i := range tv.columns {
		c := &tv.columns[i]
		var col kafkasink.Column
		ok := false
		if j < len(row) && row[j].Name == c.name {
			col, ok = row[j], true
			j++
		} else {
			col, ok = row.Get(c.name)
		}
		var err error
		if dst, err = appendColumn(dst, c, col.Value, ok && !col.Unchanged); err != nil {
			return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: c.name, Err: err}
		}
	}
	return dst, nil
}

// appendUnchanged appends the names of the unchanged TOAST columns, of
// After and then of Before not already listed, as JSONEncoder lists them.
func appendUnchanged(dst []byte, e *kafkasink.Event) []byte {
	n := 0
	for i := range e.After {
		if e.After[i].Unchanged {
			n++
		}
	}
	for i := range e.Before {
		if c := &e.Before[i]; c.Unchanged && !unchangedIn(e.After, c.Name) {
			n++
		}
	}
	if n == 0 {
		return append(dst, 0)
	}
	dst = avrobin.AppendLong(dst, int64(n))
	for i := range e.After {
		if e.After[i].Unchanged {
			dst = avrobin.AppendString(dst, e.After[i].Name)
		}
	}
	for i := range e.Before {
		if c := &e.Before[i]; c.Unchanged && !unchangedIn(e.After, c.Name) {
			dst = avrobin.AppendString(dst, c.Name)
		}
	}
	return append(dst, 0)
}

func unchangedIn(row kafkasink.Row, name string) bool {
	for i := range row {
		if row[i].Unchanged && row[i].Name == name {
			return true
		}
	}
	return false
}

package kafkasinkavro

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
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

	mu sync.RWMutex
	// versions are the table versions prepared, by their Relation: the
	// source shares one *Relation among the events of a table version.
	versions map[*kafkasink.Relation]*tableVersion
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
	return &Encoder{registry: cfg.Registry, subjects: cfg.Subjects, namespace: cfg.Namespace,
		versions: make(map[*kafkasink.Relation]*tableVersion)}, nil
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
	var prepared map[*kafkasink.Relation]string // table versions of this batch, to their topics
	for i := range events {
		e, route := &events[i], routes[i]
		if route.Topic == "" || e.Relation == nil {
			continue
		}
		if topic, seen := prepared[e.Relation]; seen && topic != route.Topic {
			return &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: %s is routed to two topics in one Write, %s and %s; "+
				"a Topics.Route function must give a table one topic for the whole of a Write", kafkasink.TableName(e.Schema, e.Table), topic, route.Topic)}
		}
		if prepared == nil {
			prepared = make(map[*kafkasink.Relation]string)
		}
		prepared[e.Relation] = route.Topic
		enc.mu.RLock()
		tv := enc.versions[e.Relation]
		enc.mu.RUnlock()
		if tv != nil && tv.topic == route.Topic && (len(route.KeyColumns) == 0 || slices.Equal(tv.keyColumns, route.KeyColumns)) {
			continue
		}
		next, err := enc.register(ctx, e, route, tv)
		if err != nil {
			return err
		}
		enc.mu.Lock()
		enc.versions[e.Relation] = next
		enc.forgetOlder(next, prepared)
		enc.mu.Unlock()
	}
	return nil
}

// forgetOlder drops the versions of tv's table that this batch does not
// use: the source sends a new Relation when a table changes, and never
// an event of an older one after it. Called with mu held.
func (enc *Encoder) forgetOlder(tv *tableVersion, batch map[*kafkasink.Relation]string) {
	for rel, other := range enc.versions {
		if _, used := batch[rel]; !used && other.schema == tv.schema && other.table == tv.table {
			delete(enc.versions, rel)
		}
	}
}

// previous returns a prepared version of e's table other than e's own, to
// say what changed when the registry refuses the new one.
func (enc *Encoder) previous(e *kafkasink.Event) *tableVersion {
	enc.mu.RLock()
	defer enc.mu.RUnlock()
	for rel, tv := range enc.versions {
		if rel != e.Relation && tv.schema == e.Schema && tv.table == e.Table {
			return tv
		}
	}
	return nil
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
	key := make([]column, len(route.KeyColumns))
	for i, name := range route.KeyColumns {
		j := slices.IndexFunc(next.columns, func(c column) bool { return c.name == name })
		if j < 0 {
			return nil, &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: key column %q is not a column of %s; fix kafkasink.Config.KeyColumns (-key-columns) for the table",
				name, kafkasink.TableName(e.Schema, e.Table))}
		}
		key[i] = next.columns[j]
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
	id, err := enc.registry.RegisterSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, -1, -1)
	if err == nil {
		return id, nil
	}
	table := kafkasink.TableName(e.Schema, e.Table)
	if ctx.Err() != nil {
		return 0, fmt.Errorf("kafkasinkavro: registering the schema of %s under subject %s: %w", table, subject, err)
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		// No answer: the registry is down or unreachable, which may pass.
		return 0, &kafkasink.PrepareError{Retryable: true, Err: fmt.Errorf("kafkasinkavro: registering the schema of %s under subject %s: %w", table, subject, err)}
	}
	if re.StatusCode >= 500 {
		return 0, &kafkasink.PrepareError{Retryable: true, Err: fmt.Errorf("kafkasinkavro: registering the schema of %s under subject %s: the Schema Registry answered HTTP %d: %s",
			table, subject, re.StatusCode, re.Message)}
	}
	var fix string
	switch re.StatusCode {
	case 409:
		fix = fmt.Sprintf("the table changed in a way the subject's compatibility level (%s) does not allow%s; "+
			"undo the change (under BACKWARD a new column must be nullable, and no column may change its type), "+
			"let the subject accept it (PUT /config/%s with the registry), or %s",
			enc.compatibility(ctx, subject), changes(enc.previous(e), cols, isKeySubject(subject)), subject, enc.newSubjectFix())
	case 401, 403:
		fix = "check the registry's credentials (sr.BasicAuth, sr.BearerToken; -schema-registry-user and -schema-registry-password-file, or -schema-registry-token-file) and that they may register schemas"
	default:
		fix = "the registry refused the schema; report it with the schema text: " + text
	}
	return 0, &kafkasink.PrepareError{Err: fmt.Errorf("kafkasinkavro: the Schema Registry refused the schema of %s under subject %s (HTTP %d: %s): %s",
		table, subject, re.StatusCode, re.Message, fix)}
}

// compatibility names the compatibility level that applies to subject:
// its own, and the registry's global one.
func (enc *Encoder) compatibility(ctx context.Context, subject string) string {
	res := enc.registry.Compatibility(ctx, subject, sr.GlobalSubject)
	level := func(r sr.CompatibilityResult) string {
		if r.Err != nil {
			return "not set"
		}
		return r.Level.String()
	}
	return "subject " + level(res[0]) + ", global " + level(res[1])
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
	var out []string
	for i := range cols {
		c := &cols[i]
		j := slices.IndexFunc(old, func(o column) bool { return o.name == c.name })
		switch {
		case j < 0:
			out = append(out, fmt.Sprintf("added %q (%s)", c.name, c.description()))
		case old[j].description() != c.description():
			out = append(out, fmt.Sprintf("changed %q from %s to %s", c.name, old[j].description(), c.description()))
		}
	}
	for i := range old {
		if !slices.ContainsFunc(cols, func(c column) bool { return c.name == old[i].name }) {
			out = append(out, fmt.Sprintf("dropped %q", old[i].name))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return ", the columns: " + strings.Join(out, "; ")
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

// version returns the prepared version of e's table, or an error saying
// why there is none.
func (enc *Encoder) version(e *kafkasink.Event) (*tableVersion, error) {
	if e.Relation == nil {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: errors.New("kafkasinkavro needs Event.Relation, the table's declared columns, to derive its Avro schema; pgcdc sets it")}
	}
	enc.mu.RLock()
	tv := enc.versions[e.Relation]
	enc.mu.RUnlock()
	if tv == nil {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: errors.New("the table version was not prepared: a kafkasinkavro.Encoder writes through kafkasink.Config.Encoder, whose Write prepares it")}
	}
	return tv, nil
}

// appendHeader appends the Confluent wire format's header: magic byte 0,
// then the schema id in 4 bytes, big-endian.
func appendHeader(dst []byte, id int) []byte {
	return append(dst, 0, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// Encode implements kafkasink.Encoder: the event's envelope, in the
// Confluent wire format with the id of its table version's value schema.
func (enc *Encoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	tv, err := enc.version(e)
	if err != nil {
		return nil, err
	}
	out, err := tv.appendEnvelope(appendHeader(dst, tv.valueID), e)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EncodeKey implements kafkasink.KeyEncoder: the key record of columns,
// in the Confluent wire format with the id of the key schema.
func (enc *Encoder) EncodeKey(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	tv, err := enc.version(e)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(tv.keyColumns, columns) {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("key columns %q were not prepared (%q were)", columns, tv.keyColumns)}
	}
	dst = appendHeader(dst, tv.keyID)
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
	dst = appendString(dst, e.Op.String())
	dst = appendString(dst, e.Schema)
	dst = appendString(dst, e.Table)
	dst = appendLong(dst, int64(e.LSN))
	dst = appendLong(dst, int64(e.Position.LSN))
	dst = appendLong(dst, int64(e.Position.Index))
	dst = appendLong(dst, int64(e.XID))
	if e.Commit.IsZero() {
		dst = append(dst, unionNull)
	} else {
		dst = appendLong(append(dst, unionValue), e.Commit.UnixMicro())
	}
	if len(e.Key) > 0 {
		dst = appendLong(dst, int64(len(e.Key)))
		for _, k := range e.Key {
			dst = appendString(dst, k)
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
		dst = appendBool(appendBool(append(dst, unionValue), e.Truncate.Cascade), e.Truncate.RestartIdentity)
	} else {
		dst = append(dst, unionNull)
	}
	if e.BackfillRunID == "" {
		return append(dst, unionNull), nil
	}
	return appendString(append(dst, unionValue), e.BackfillRunID), nil
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
	dst = appendLong(dst, int64(n))
	for i := range e.After {
		if e.After[i].Unchanged {
			dst = appendString(dst, e.After[i].Name)
		}
	}
	for i := range e.Before {
		if c := &e.Before[i]; c.Unchanged && !unchangedIn(e.After, c.Name) {
			dst = appendString(dst, c.Name)
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

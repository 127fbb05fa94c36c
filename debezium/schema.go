package debezium

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/encoding/jsonw"
)

// Encoder's schema-carrying form (SchemasEnable): Kafka Connect's
// JsonConverter with schemas.enable=true writes every key and value as
// {"schema":<Connect schema>,"payload":<the schemaless document>}. The
// schemas are those Debezium 3.6.1's PostgreSQL connector declares
// (testdata/debezium/*-schemas-true.jsonl hold them), built from the
// table's Relation and the encoder's options, once per table version.

// connectSchema is a Kafka Connect schema, written as JsonConverter
// writes it (asJsonSchema): its members always in the order type,
// fields or items, optional, name, version, doc, parameters, default,
// and field when it is a struct's field.
type connectSchema struct {
	typ      string // int16, int32, int64, float, double, boolean, string, bytes, struct, array
	fields   []connectField
	items    *connectSchema
	optional bool
	name     string
	version  int // 0: none
	doc      string
	params   [][2]string // in order
	def      string      // the default value's JSON; "": none
}

type connectField struct {
	name   string
	schema connectSchema
}

// appendJSON appends s; field, when not empty, is its name in a struct.
func (s *connectSchema) appendJSON(dst []byte, field string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, s.typ...)
	dst = append(dst, '"')
	switch s.typ {
	case "struct":
		dst = append(dst, `,"fields":[`...)
		for i := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.fields[i].schema.appendJSON(dst, s.fields[i].name)
		}
		dst = append(dst, ']')
	case "array":
		dst = append(dst, `,"items":`...)
		dst = s.items.appendJSON(dst, "")
	}
	dst = append(dst, `,"optional":`...)
	dst = jsonw.AppendBool(dst, s.optional)
	if s.name != "" {
		dst = append(dst, `,"name":`...)
		dst = jsonw.AppendString(dst, s.name)
	}
	if s.version != 0 {
		dst = append(dst, `,"version":`...)
		dst = strconv.AppendInt(dst, int64(s.version), 10)
	}
	if s.doc != "" {
		dst = append(dst, `,"doc":`...)
		dst = jsonw.AppendString(dst, s.doc)
	}
	if len(s.params) > 0 {
		dst = append(dst, `,"parameters":{`...)
		for i, p := range s.params {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonw.AppendString(dst, p[0])
			dst = append(dst, ':')
			dst = jsonw.AppendString(dst, p[1])
		}
		dst = append(dst, '}')
	}
	if s.def != "" {
		dst = append(dst, `,"default":`...)
		dst = append(dst, s.def...)
	}
	if field != "" {
		dst = append(dst, `,"field":`...)
		dst = jsonw.AppendString(dst, field)
	}
	return append(dst, '}')
}

// Connect's schemas of the types Debezium uses, by name.
func plainSchema(typ string) connectSchema { return connectSchema{typ: typ} }

func semanticSchema(typ, name string) connectSchema {
	return connectSchema{typ: typ, name: name, version: 1}
}

func optionalSchema(s connectSchema) connectSchema {
	s.optional = true
	return s
}

// debeziumSourceSchema is the source block's schema
// (io.debezium.connector.postgresql.Source); lsnType is source.lsn's
// type, "string" with LSNAsString.
func debeziumSourceSchema(lsnType string) connectSchema {
	req := plainSchema
	opt := func(typ string) connectSchema { return optionalSchema(plainSchema(typ)) }
	snapshot := semanticSchema("string", "io.debezium.data.Enum")
	snapshot.optional = true
	snapshot.params = [][2]string{{"allowed", "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"}}
	snapshot.def = `"false"`
	return connectSchema{
		typ: "struct",
		fields: []connectField{
			{"version", req("string")},
			{"connector", req("string")},
			{"name", req("string")},
			{"ts_ms", req("int64")},
			{"snapshot", snapshot},
			{"db", req("string")},
			{"sequence", opt("string")},
			{"ts_us", opt("int64")},
			{"ts_ns", opt("int64")},
			{"schema", req("string")},
			{"table", req("string")},
			{"txId", opt("int64")},
			{"lsn", opt(lsnType)},
			{"xmin", opt("int64")},
			{"origin", opt("string")},
			{"origin_lsn", opt("int64")},
		},
		name:    "io.debezium.connector.postgresql.Source",
		version: 1,
	}
}

// debeziumTransactionSchema is the transaction block's schema
// (provide.transaction.metadata), declared whether or not the block is
// written.
var debeziumTransactionSchema = connectSchema{
	typ: "struct",
	fields: []connectField{
		{"id", plainSchema("string")},
		{"total_order", plainSchema("int64")},
		{"data_collection_order", plainSchema("int64")},
	},
	optional: true,
	name:     "event.block",
	version:  1,
}

// debeziumNoKeySchema is the schema of a key that is not a row's
// columns: the event id AppendKey gives a truncate or a table without key
// columns (Debezium writes a null key there, see SchemasEnable).
var debeziumNoKeySchema = plainSchema("string")

// columnSchema returns the Connect schema of a column of declared type t
// (not optional: the caller says), as Debezium's PostgresValueConverter
// declares it under d's options, for the value forms appendTyped writes.
func (d *Encoder) columnSchema(t *kafkasink.TypeInfo) connectSchema {
	t = declaredBase(t)
	if t == nil {
		return plainSchema("string")
	}
	if t.Elem != nil {
		elem := declaredBase(t.Elem)
		items := d.columnSchema(elem)
		// Debezium builds an enum array's items without optional().
		items.optional = elem == nil || elem.Kind != 'e'
		return connectSchema{typ: "array", items: &items}
	}
	if t.Kind == 'e' && t.Labels != nil {
		s := semanticSchema("string", "io.debezium.data.Enum")
		s.params = [][2]string{{"allowed", strings.Join(t.Labels, ",")}}
		return s
	}
	switch t.Name {
	case "int2":
		return plainSchema("int16")
	case "int4":
		return plainSchema("int32")
	case "int8", "oid":
		return plainSchema("int64")
	case "float4":
		return plainSchema("float")
	case "float8":
		return plainSchema("double")
	case "bool":
		return plainSchema("boolean")
	case "numeric", "money":
		return d.decimalSchema(t)
	case "date", "time", "timestamp", "timetz", "timestamptz", "interval":
		return d.temporalSchema(t)
	case "uuid":
		return semanticSchema("string", "io.debezium.data.Uuid")
	case "json", "jsonb", "hstore": // hstore as a JSON object (hstore.handling.mode json)
		return semanticSchema("string", "io.debezium.data.Json")
	case "xml":
		return semanticSchema("string", "io.debezium.data.Xml")
	case "tsvector":
		return semanticSchema("string", "io.debezium.data.Tsvector")
	case "ltree": // the extension's type, which Debezium knows by name
		return semanticSchema("string", "io.debezium.data.Ltree")
	case "bit", "varbit":
		return bitsSchema(t)
	case "bytea":
		if d.BinaryHandling == BinaryBytes {
			return plainSchema("bytes")
		}
		return plainSchema("string")
	case "point":
		return pointSchema()
	}
	// Text, character types, name, "char", inet, cidr, macaddr, enums
	// whose labels the source did not give, and every other type pgcdc
	// keeps as its text.
	return plainSchema("string")
}

// decimalSchema is columnSchema of numeric and money, which
// decimal.handling.mode writes alike.
func (d *Encoder) decimalSchema(t *kafkasink.TypeInfo) connectSchema {
	switch d.DecimalHandling {
	case DecimalDouble:
		return plainSchema("double")
	case DecimalString:
		return plainSchema("string")
	}
	if t.Name == "money" {
		s := semanticSchema("bytes", "org.apache.kafka.connect.data.Decimal")
		s.params = [][2]string{{"scale", "2"}}
		return s
	}
	if t.Modifier < 4 { // no declared precision and scale
		s := semanticSchema("struct", "io.debezium.data.VariableScaleDecimal")
		s.fields = []connectField{{"scale", plainSchema("int32")}, {"value", plainSchema("bytes")}}
		s.doc = "Variable scaled decimal"
		return s
	}
	mod := t.Modifier - 4
	s := semanticSchema("bytes", "org.apache.kafka.connect.data.Decimal")
	s.params = [][2]string{{"scale", strconv.Itoa(int(mod & 0xffff))}, {"connect.decimal.precision", strconv.Itoa(int(mod >> 16))}}
	return s
}

// temporalSchema is columnSchema of the date and time types, under
// time.precision.mode and, for interval, interval.handling.mode.
func (d *Encoder) temporalSchema(t *kafkasink.TypeInfo) connectSchema {
	switch t.Name {
	case "date":
		switch d.TimePrecision {
		case TimeIsostring:
			return semanticSchema("string", "io.debezium.time.IsoDate")
		case TimeConnect:
			return semanticSchema("int32", "org.apache.kafka.connect.data.Date")
		}
		return semanticSchema("int32", "io.debezium.time.Date")
	case "time":
		switch {
		case d.TimePrecision == TimeIsostring:
			return semanticSchema("string", "io.debezium.time.IsoTime")
		case d.TimePrecision == TimeConnect:
			return semanticSchema("int32", "org.apache.kafka.connect.data.Time")
		case d.TimePrecision == TimeAdaptive && timePrecision(t.Modifier) <= 3:
			return semanticSchema("int32", "io.debezium.time.Time")
		}
		return semanticSchema("int64", "io.debezium.time.MicroTime")
	case "timestamp":
		switch {
		case d.TimePrecision == TimeIsostring:
			return semanticSchema("string", "io.debezium.time.IsoTimestamp")
		case d.TimePrecision == TimeConnect:
			return semanticSchema("int64", "org.apache.kafka.connect.data.Timestamp")
		case timePrecision(t.Modifier) <= 3:
			return semanticSchema("int64", "io.debezium.time.Timestamp")
		}
		return semanticSchema("int64", "io.debezium.time.MicroTimestamp")
	case "timetz":
		return semanticSchema("string", "io.debezium.time.ZonedTime")
	case "timestamptz":
		return semanticSchema("string", "io.debezium.time.ZonedTimestamp")
	}
	if d.IntervalHandling == IntervalString {
		return semanticSchema("string", "io.debezium.time.Interval")
	}
	return semanticSchema("int64", "io.debezium.time.MicroDuration")
}

// bitsSchema is columnSchema of bit and varbit.
func bitsSchema(t *kafkasink.TypeInfo) connectSchema {
	if t.Name == "bit" && t.Modifier == 1 {
		return plainSchema("boolean") // as appendBits writes bit(1)
	}
	length := "2147483647" // varbit without a length, as pgjdbc reports it
	if t.Modifier >= 0 {
		length = strconv.Itoa(int(t.Modifier))
	}
	s := semanticSchema("bytes", "io.debezium.data.Bits")
	s.params = [][2]string{{"length", length}}
	return s
}

// pointSchema is columnSchema of point: Debezium's geometry Point, as
// writePoint writes it.
func pointSchema() connectSchema {
	s := semanticSchema("struct", "io.debezium.data.geometry.Point")
	s.fields = []connectField{
		{"x", plainSchema("double")},
		{"y", plainSchema("double")},
		{"wkb", optionalSchema(plainSchema("bytes"))},
		{"srid", optionalSchema(plainSchema("int32"))},
	}
	s.doc = "Geometry (POINT)"
	return s
}

// debeziumSchemaName is the name Debezium gives a table's schemas
// (topic.prefix, schema, table; suffix Key, Value or Envelope).
func (d *Encoder) debeziumSchemaName(e *kafkasink.Event, suffix string) string {
	name := d.Name
	if name == "" {
		name = "kafkasink"
	}
	return name + "." + e.Schema + "." + e.Table + "." + suffix
}

// envelopeSchema is the value's schema of e's table: the Envelope struct
// with before and after as the table's Value struct.
func (d *Encoder) envelopeSchema(e *kafkasink.Event) connectSchema {
	row := connectSchema{typ: "struct", optional: true, name: d.debeziumSchemaName(e, "Value")}
	for i := range e.Relation.Columns {
		ci := &e.Relation.Columns[i]
		if d.leavesOut(ci.Type) {
			continue // left out of the row, as appendDebeziumRow does
		}
		s := d.columnSchema(ci.Type)
		s.optional = !ci.NotNull
		s.def = d.declaredDefault(ci)
		row.fields = append(row.fields, connectField{ci.Name, s})
	}
	lsnType := "int64"
	if d.LSNAsString {
		lsnType = "string"
	}
	opt := func(typ string) connectSchema { return optionalSchema(plainSchema(typ)) }
	return connectSchema{
		typ: "struct",
		fields: []connectField{
			{"before", row},
			{"after", row},
			{"source", debeziumSourceSchema(lsnType)},
			{"transaction", debeziumTransactionSchema},
			{"op", plainSchema("string")},
			{"ts_ms", opt("int64")},
			{"ts_us", opt("int64")},
			{"ts_ns", opt("int64")},
		},
		name:    d.debeziumSchemaName(e, "Envelope"),
		version: 2,
	}
}

// declaredDefault is the "default" of column ci's schema field: the
// default Debezium declares (columnDefault) with MatchDebeziumLosses or
// for a NOT NULL column; else none. Kafka Connect's JsonConverter reads
// a NULL of a field with a default as the default
// (replace.null.with.default), so declaring it for a nullable column
// while writing its NULLs, as the encoder does by default, would have
// such readers see the default where the row holds NULL. A NOT NULL
// column holds no NULL: its only nulls are the values a REPLICA IDENTITY
// DEFAULT delete's before image lacks, which appendDebeziumRow writes as
// this default, as Debezium does (JsonConverter refuses a null in a
// required field).
func (d *Encoder) declaredDefault(ci *kafkasink.ColumnInfo) string {
	if !d.MatchDebeziumLosses && !ci.NotNull {
		return ""
	}
	return string(d.columnDefault(ci).json)
}

// keySchema is the key's schema of e's table for the key columns: the
// Key struct with one field per column, in key order. missing names a
// column the Relation does not have; the schema is then incomplete.
func (d *Encoder) keySchema(e *kafkasink.Event, columns []string) (s connectSchema, missing string) {
	s = connectSchema{typ: "struct", name: d.debeziumSchemaName(e, "Key")}
	for _, name := range columns {
		ci, found := e.Relation.Column(name)
		if !found {
			return s, name
		}
		f := d.columnSchema(ci.Type)
		f.optional = !ci.NotNull
		f.def = d.declaredDefault(ci)
		s.fields = append(s.fields, connectField{name, f})
	}
	return s, ""
}

// schemaDocument opens a schema-carrying document: {"schema":<s>,"payload":
// (the caller appends the payload and the closing brace).
func schemaDocument(s *connectSchema) []byte {
	return append(s.appendJSON([]byte(`{"schema":`), ""), `,"payload":`...)
}

// debeziumSchemas are the opened documents of one table version under one
// set of options. value never changes once made; key is replaced whole,
// never modified, so readers need no lock.
type debeziumSchemas struct {
	cacheKey schemaCacheKey
	envelope connectSchema
	value    []byte // {"schema":<Envelope>,"payload":
	// members are the JSON texts that open the columns' members in a
	// row (,"name":), by their index in the Relation.
	members []string
	// sourceHead and sourceTable are the source block's members that do
	// not change between the version's records.
	sourceHead, sourceTable connectChunk
	// defaults are the columns' declared defaults, by their index in the
	// Relation, which a row writes in place of NULL as JsonConverter
	// does (see declaredDefault).
	defaults []columnDefaultValue
	// key is the Key document for the key columns it was last asked for
	// (they are the same for every event of a table version, unless
	// Config.KeyColumns names others); nil until then.
	key atomic.Pointer[debeziumKeySchema]
}

type debeziumKeySchema struct {
	columns []string
	schema  connectSchema
	open    []byte // {"schema":<Key>,"payload":
}

// schemaCacheKey is what a table's schemas depend on: the table version
// (its *Relation, which a source shares among the version's events),
// its name, and the options that change a schema.
type schemaCacheKey struct {
	rel           *kafkasink.Relation
	schema, table string
	name          string
	decimal       DecimalMode
	time          TimePrecisionMode
	interval      IntervalMode
	binary        BinaryMode
	lsnAsString   bool
	losses        bool // MatchDebeziumLosses leaves some array columns out
}

// maxCachedSchemas bounds the schema cache: a process that sees more
// table versions than this rebuilds some schemas, once per eviction.
const maxCachedSchemas = 1024

// schemaCache holds the schemas of the table versions encoded lately, for
// every Encoder of the process (encoders are values, so the cache
// cannot live in one). Encode is safe for concurrent use, so is the cache.
var schemaCache = struct {
	sync.RWMutex
	m map[schemaCacheKey]*debeziumSchemas
}{m: make(map[schemaCacheKey]*debeziumSchemas)}

// lastSchemas is the cache entry found last: a batch's events are mostly
// of one table, whose entry it finds without the map's lock and hash.
var lastSchemas atomic.Pointer[debeziumSchemas]

// schemasOf returns the schemas of e's table version, from the cache or
// made and cached. e.Relation must not be nil.
func (d *Encoder) schemasOf(e *kafkasink.Event) *debeziumSchemas {
	k := schemaCacheKey{
		rel: e.Relation, schema: e.Schema, table: e.Table, name: d.Name,
		decimal: d.DecimalHandling, time: d.TimePrecision, interval: d.IntervalHandling,
		binary: d.BinaryHandling, lsnAsString: d.LSNAsString, losses: d.MatchDebeziumLosses,
	}
	if last := lastSchemas.Load(); last != nil && last.cacheKey == k {
		return last
	}
	schemaCache.RLock()
	s := schemaCache.m[k]
	schemaCache.RUnlock()
	if s != nil {
		lastSchemas.Store(s)
		return s
	}
	env := d.envelopeSchema(e)
	s = &debeziumSchemas{
		cacheKey: k, envelope: env, value: schemaDocument(&env),
		members:  make([]string, len(e.Relation.Columns)),
		defaults: make([]columnDefaultValue, len(e.Relation.Columns)),
	}
	source := &env.fields[2].schema
	s.sourceHead = writeChunk(source, 0, d.writeSourceHead)
	s.sourceTable = writeChunk(source, sourceTableField, func(w *connectWriter) { writeSourceTable(w, e) })
	for i := range e.Relation.Columns {
		ci := &e.Relation.Columns[i]
		s.members[i] = string(append(jsonw.AppendString([]byte{','}, ci.Name), ':'))
		s.defaults[i] = d.columnDefault(ci)
	}
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if old := schemaCache.m[k]; old != nil {
		return old // another goroutine made it first
	}
	if len(schemaCache.m) >= maxCachedSchemas {
		for old := range schemaCache.m { // evict an arbitrary entry
			delete(schemaCache.m, old)
			break
		}
	}
	schemaCache.m[k] = s
	return s
}

// errNoRelation is the error for an event without a Relation under
// SchemasEnable.
func errNoRelation(e *kafkasink.Event) error {
	return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf(
		"DebeziumEncoder.SchemasEnable (schemas.enable) writes each record's schema from the table's declared columns, " +
			"and the event has none: set Event.Relation (pgcdc sets it), or turn SchemasEnable off")}
}

// encodeWithSchema is Encode with SchemasEnable: the envelope inside its
// schema document. Nested arrays are written as null, as Debezium writes
// them: the schema Debezium declares for an array column (an array of the
// element type) cannot hold them, and JsonConverter would misread them
// (each inner array of numbers as 0) rather than refuse them.
func (d Encoder) encodeWithSchema(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if e.Relation == nil {
		return nil, errNoRelation(e)
	}
	schemas := d.schemasOf(e)
	w := connectWriter{buf: append(dst, schemas.value...)}
	d.NullNestedArrays = true
	if err := d.writeEnvelope(&w, e, schemas); err != nil {
		return nil, err
	}
	return append(w.buf, '}'), nil
}

var _ kafkasink.AllKeysEncoder = Encoder{}

// EncodesAllKeys implements kafkasink.AllKeysEncoder: with SchemasEnable
// the encoder writes every record key, with its Connect schema, and the
// JSON payload of the other key of a key change
// (__debezium.oldkey/newkey). Without it the sink keys the records.
func (d Encoder) EncodesAllKeys() bool { return d.SchemasEnable }

// EncodeKey implements kafkasink.KeyEncoder: Debezium's key document with
// its schema, as JsonConverter writes it with schemas.enable, whatever
// SchemasEnable (which says whether the sink asks for it). A truncate, or
// an event without key columns (columns and e.Key empty), is keyed as
// AppendKey keys it in KeyJSON, under a string schema.
func (d Encoder) EncodeKey(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	return d.appendKey(dst, e, columns, true)
}

// appendKey writes Debezium's key: the key columns' values in Debezium's
// forms (writeTyped), with withSchema under the Key struct. A truncate,
// or a table without key columns, is keyed as AppendKey keys it (its
// event id), with withSchema in a string schema.
func (d Encoder) appendKey(dst []byte, e *kafkasink.Event, columns []string, withSchema bool) ([]byte, error) {
	if len(columns) == 0 {
		columns = e.Key
	}
	if len(columns) == 0 || e.Op == kafkasink.OpTruncate {
		if !withSchema {
			return kafkasink.AppendKey(dst, e, columns, kafkasink.KeyJSON)
		}
		dst = debeziumNoKeySchema.appendJSON(append(dst, `{"schema":`...), "")
		dst = append(dst, `,"payload":`...)
		var err error
		if dst, err = kafkasink.AppendKey(dst, e, columns, kafkasink.KeyJSON); err != nil {
			return nil, err
		}
		return append(dst, '}'), nil
	}
	if e.Relation == nil {
		return nil, errNoRelation(e)
	}
	d.NullNestedArrays = true // as encodeWithSchema writes values
	w := connectWriter{buf: dst}
	if withSchema {
		ks, err := d.keySchemaOf(e, columns)
		if err != nil {
			return nil, err
		}
		w.buf = append(w.buf, ks.open...)
	}
	if err := d.writeKey(&w, e, columns); err != nil {
		return nil, err
	}
	if withSchema {
		w.buf = append(w.buf, '}')
	}
	return w.buf, nil
}

// keySchemaOf returns the Key schema of e's table version for columns,
// cached for the columns last asked for.
func (d Encoder) keySchemaOf(e *kafkasink.Event, columns []string) (*debeziumKeySchema, error) {
	schemas := d.schemasOf(e)
	ks := schemas.key.Load()
	if ks == nil || !slices.Equal(ks.columns, columns) {
		s, missing := d.keySchema(e, columns)
		if missing != "" {
			return nil, kafkasink.MissingKeyColumnError(e, missing, false)
		}
		ks = &debeziumKeySchema{columns: slices.Clone(columns), schema: s, open: schemaDocument(&s)}
		schemas.key.Store(ks)
	}
	return ks, nil
}

// writeKey writes the Key struct of e's key columns.
func (d Encoder) writeKey(w *connectWriter, e *kafkasink.Event, columns []string) error {
	row := e.Image()
	w.beginStruct()
	for i, name := range columns {
		c, ok := row.Get(name)
		if !ok || c.Unchanged {
			return kafkasink.MissingKeyColumnError(e, name, ok)
		}
		w.name(i == 0, name)
		if c.Value == nil {
			w.null()
		} else {
			ci, found := e.Relation.Column(name)
			if !found {
				return kafkasink.MissingKeyColumnError(e, name, false)
			}
			if err := d.writeTyped(w, ci.Type, c.Value, pathOf(e)); err != nil {
				return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: name, Err: err}
			}
		}
		if err := w.failed(); err != nil {
			return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: name, Err: err}
		}
	}
	w.endStruct()
	return nil
}

// AppendAvroKey appends e's Debezium key for columns in the Avro binary
// encoding of the Avro schema AvroData makes from the Key's Connect
// schema (see AppendAvro), for the kafkasinkavro module. Only a row
// change of a table with key columns has a Key (a truncate, or an event
// without key columns, is keyed by the sink: see KeyEncoder); a key
// column the image lacks, or whose value has no Debezium form, is an
// error as for AppendKey.
func (d Encoder) AppendAvroKey(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	if len(columns) == 0 || e.Op == kafkasink.OpTruncate {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: errors.New(
			"DebeziumEncoder.AppendAvroKey: a truncate, or an event without key columns, has no Debezium Key: the sink keys it (see KeyEncoder)")}
	}
	if e.Relation == nil {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: errNoAvroRelation}
	}
	d.NullNestedArrays = true
	ks, err := d.keySchemaOf(e, columns)
	if err != nil {
		return nil, err
	}
	w := avroWriter(dst, &ks.schema)
	if err := d.writeKey(&w, e, columns); err != nil {
		return nil, err
	}
	if err := w.failed(); err != nil {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: err}
	}
	return w.buf, nil
}

// AppendKeyPayload appends e's Debezium key for columns (Config.KeyColumns
// for the table, else e.Key) without its schema: a JSON object of the key
// columns' values in Debezium's forms under d's options, {"id":1}, the
// payload of the key JsonConverter writes with SchemasEnable. It is for
// encoders that write Debezium's key in another form from it, such as
// the kafkasinkavro module's Avro (nested arrays are null there, as with
// SchemasEnable). A truncate, or an event without key columns, is keyed
// as AppendKey keys it in KeyJSON; a key column the image lacks, or whose
// value has no Debezium form, is an error as for AppendKey.
func (d Encoder) AppendKeyPayload(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	return d.appendKey(dst, e, columns, false)
}

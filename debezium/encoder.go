package debezium

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/annotation"
)

// Encoder writes Debezium's PostgreSQL connector envelope in its
// JSON form without schema (value.converter.schemas.enable=false), or with
// SchemasEnable in Kafka Connect's schema-carrying form
// (schemas.enable=true, keys included), so consumers written for Debezium
// read kafkasink topics unchanged. Its zero value is ready to use and it
// is safe for concurrent use as long as Now is.
//
// The envelope and its source block are those Debezium 3.6.1 writes by
// default (testdata/debezium holds its captured output; a format change
// from earlier kafkasink versions, whose source.lsn was a string and which
// had no ts_us, ts_ns, sequence, xmin, origin or origin_lsn). The fields,
// always in this order:
//
//	before       the old row object, or null
//	after        the new row object, or null
//	source       an object:
//	  version      Version ("3.6.1.Final"), the release whose
//	               output this is
//	  connector    "postgresql"
//	  name         Name, or "kafkasink" when empty (Debezium's topic prefix)
//	  ts_ms        the commit time (a snapshot row: the time the snapshot's
//	               transaction started, kafkasink.Event.Source.SnapshotTime) in Unix
//	               milliseconds; 0 when unknown
//	  snapshot     "false" for a change; for a snapshot row (kafkasink.OpRead), by
//	               kafkasink.Event.Source.Snapshot: "incremental" (a row of a
//	               backfill read while the stream ran), "last" (the run's last row),
//	               "first" (its first), "last_in_data_collection" (a
//	               table's last), "first_in_data_collection" (a table's
//	               first), else "true"
//	  db           kafkasink.Event.Source.Database ("" when the source does not say)
//	  sequence     a string holding a JSON array of two strings: the end
//	               of the previous transaction's commit record
//	               (kafkasink.Event.Source.PrevCommitEnd; null when unknown and on
//	               snapshot rows) and the lsn below
//	  ts_us, ts_ns ts_ms in microseconds and nanoseconds
//	  schema       the source schema
//	  table        the source table
//	  txId         the source transaction id (a snapshot row: the
//	               snapshot's, kafkasink.Event.Source.SnapshotXID), a number
//	  lsn          the change's LSN (e.LSN, or the commit LSN when the
//	               change has none; a snapshot row: the snapshot's LSN), a
//	               number as Debezium writes it (LSNs above 2^53 lose
//	               digits in JavaScript and other float-based readers;
//	               sequence holds them as strings, and LSNAsString writes
//	               lsn as one); txId and lsn are null on a row of an
//	               incremental snapshot (kafkasink.SnapshotIncremental),
//	               as Debezium writes them
//	  xmin         null
//	  origin       null
//	  origin_lsn   null
//	transaction  null; with ProvideTransactionMetadata, on a change,
//	             {"id","total_order","data_collection_order"}
//	op           "c" insert, "u" update, "d" delete, "r" snapshot read,
//	             "t" truncate
//	ts_ms        the time the event was encoded (Now) in Unix milliseconds
//	ts_us, ts_ns the same in microseconds and nanoseconds
//	annotations  with WriteAnnotations only (an extension, not
//	             Debezium's): kafkasink.Config.Annotations as an object of strings
//	             in sorted key order, when the sink's AnnotationsIn puts
//	             them in the value
//
// Besides the value, as Debezium by default (see kafkasink.RecordShaper, and the
// options below): each delete is followed by a tombstone with the same
// key (tombstones.on.delete), a TRUNCATE is not written
// (skipped.operations "t"), the delete and insert of a key change carry
// __debezium.newkey and __debezium.oldkey, and every record the
// __debezium.context.* headers (extended.headers.enabled), after the
// kafkasink.* headers that kafkasink.Config.Headers selects, which the tombstone
// shares with its delete. With kafkasink.HeadersNone a record carries Debezium's
// headers only, as Debezium writes them.
//
// Earlier kafkasink versions wrote no tombstone and no Debezium header,
// and wrote TRUNCATEs. A truncate, when written, is op "t" with null
// before and after, as Debezium writes it; its options (e.Truncate:
// CASCADE, RESTART IDENTITY) are not in the envelope, which Debezium
// defines without them and which strict readers bind to fixed fields.
// kafkasink.JSONEncoder carries them.
//
// Column values are written as Debezium 3.6.1's PostgreSQL connector
// writes them, by the column's declared type (kafkasink.Event.Relation, which pgcdc
// fills), under the options below, whose defaults are Debezium's: with
// the zero options, numeric and money are Connect Decimals (base64 of the
// unscaled value; {"scale","value"} for numeric without a declared
// scale; NaN and ±Infinity null), a date is days since the epoch, a time
// or timestamp milliseconds or microseconds by its precision, timetz and
// timestamptz ISO strings in UTC, an interval microseconds, bit(1) a
// boolean and other bit strings bytes, a point {"x","y","wkb","srid"},
// an hstore the text of a JSON object ({"a":"1","b":null}) in a string
// named io.debezium.data.Json, its keys in Debezium's order (Debezium's
// default hstore.handling.mode json; its mode map, a Connect map, is not
// supported); an unchanged TOAST column is the placeholder string, a delete's before
// image lists every column (those pgoutput did not send are null), and
// composite columns are left out, as Debezium leaves them out. This is a
// format change from earlier versions, which wrote the kafkasink forms of
// Encoder (decimal strings, ISO dates and times). Deliberate deviations
// from Debezium, each where Debezium loses or garbles the value: arrays of
// more than one dimension keep their nested values (Debezium writes each
// inner array as null), BC dates of snapshot rows stay BC (Debezium's
// snapshot drops the era: 44 BC becomes 44 AD), and name columns of
// streamed changes keep their value (Debezium's stream writes null), a
// NULL stays null in a column with a DEFAULT and the schemas declare no
// defaults (JsonConverter writes Debezium's declared default instead, so
// an explicit NULL, and every nullable non-key column of a delete's
// before image, reads as the default), arrays of money, interval, varbit, point,
// xml or a domain are written (Debezium leaves those columns out), and a
// numeric without a declared scale keeps its trailing zeros, so 1.50 is
// {"scale":2} (in the default decimal mode Debezium strips them, 1.5 at
// scale 1, losing the scale PostgreSQL keeps; a declared scale, and the
// string and double modes, Debezium keeps);
// MatchDebeziumLosses reproduces all six, NullNestedArrays the first. Infinite dates are
// Debezium's overflowed numbers, which differ between snapshot and
// stream as Debezium's do, so that typed readers read a number. Without a Relation
// (events built by hand) values are written as kafkasink.JSONEncoder writes them.
// With one, a value not in the form pgcdc gives its type (a money or
// interval text the server printed under other settings than pgcdc pins,
// another Go type), an after image lacking one of the Relation's columns
// and a row column the Relation does not list are each an *EncodeError:
// the event is rejected or dead-lettered, never written in a form a
// Debezium reader would misread.
type Encoder struct {
	// Name is the logical server name written to source.name. Empty means
	// "kafkasink".
	Name string
	// Now returns the time written to the top-level ts_ms. nil means
	// time.Now; tests set a fixed clock.
	Now func() time.Time

	// DisableTombstones is tombstones.on.delete=false: no tombstone after
	// a delete. By default (Debezium's true) each delete's record is
	// followed by a record with the same key and headers and a null
	// value, in the same transaction, so that a compacted topic can drop
	// the key.
	DisableTombstones bool
	// SkippedOperations is skipped.operations: the operations not
	// written, a comma-separated list of "c" (insert), "u" (update), "d"
	// (delete) and "t" (truncate), or "none". "" is Debezium's default,
	// "t": a TRUNCATE is not written. A skipped event is not delivered on
	// purpose; the sink counts it and reports it to HookEventsSkipped
	// (SkipInfo.ByEncoder), see RecordShaper.
	SkippedOperations string
	// DisableExtendedHeaders is extended.headers.enabled=false: without
	// it every record carries Debezium's headers
	// __debezium.context.connectorLogicalName (Name),
	// __debezium.context.taskId ("0"),
	// __debezium.context.connectorName ("postgresql") and
	// __debezium.context.runId (RunID).
	DisableExtendedHeaders bool
	// RunID is the __debezium.context.runId header, which Debezium makes
	// new for every start of the connector. "" means an id made once per
	// process.
	RunID string
	// ProvideTransactionMetadata is provide.transaction.metadata: each
	// change's transaction field is {"id","total_order",
	// "data_collection_order"} instead of null, and a BEGIN record
	// before a transaction's first event and an END record after its
	// last go to TransactionTopic, keyed {"id":<id>}, valued
	// {"status","id","event_count","data_collections","ts_ms"}, in the
	// same Write (with ExactlyOnce, the same Kafka transaction) as the
	// events. The id is "<txId>:<LSN>" (Debezium's: the event's LSN in
	// its block, the first event's in BEGIN, the end of the commit
	// record in END); ts_ms is the commit time. It needs the source to
	// place events in their transactions (Event.Txn, which pgcdc fills);
	// events it does not place, and snapshot rows, get a null block and
	// no BEGIN or END. The counts and orders leave out the events the
	// encoder skips (SkippedOperations), as Debezium's do; a
	// transaction whose events are all skipped (a TRUNCATE) still gets
	// its BEGIN and END, with event_count 0, as Debezium writes them. A
	// dead-lettered event keeps its place: BEGIN and END are written
	// around its dead-letter record and count it. END lists the tables
	// in Debezium's order, a Java HashMap's (see javaHashMapOrder).
	ProvideTransactionMetadata bool
	// TransactionTopic is transaction.topic: the topic of the BEGIN and
	// END records. Empty means Debezium's default, "<Name>.transaction"
	// ("kafkasink.transaction" when Name is empty). The sink creates or
	// checks it as its other topics (Topics), and refuses a table routed
	// to it.
	TransactionTopic string
	// LSNAsString writes source.lsn as a decimal string, the form earlier
	// kafkasink versions wrote, for readers that parse JSON numbers as
	// floats (JavaScript) and would round LSNs above 2^53. Not a Debezium
	// option: Debezium writes a number.
	LSNAsString bool

	// DecimalHandling is decimal.handling.mode: numeric and money as
	// Connect Decimals (precise, the default), numbers (double) or
	// strings (string).
	DecimalHandling DecimalMode
	// TimePrecision is time.precision.mode: adaptive (the default),
	// adaptive_time_microseconds, connect or isostring.
	TimePrecision TimePrecisionMode
	// IntervalHandling is interval.handling.mode: microseconds (numeric,
	// the default) or ISO 8601 durations (string).
	IntervalHandling IntervalMode
	// BinaryHandling is binary.handling.mode: bytes (the default; base64
	// in JSON), base64, base64-url-safe or hex.
	BinaryHandling BinaryMode
	// UnavailableValuePlaceholder is unavailable.value.placeholder: the
	// value written for an unchanged TOAST column whose value the change
	// does not carry. Empty means Debezium's "__debezium_unavailable_value".
	// It is written in the column's form, as Debezium writes it: its bytes
	// for a bytea (BinaryBytes; its text in the other modes), a list of
	// its text for a text, varchar, char, json or jsonb array, of its
	// bytes for a bytea array, of its bytes as signed integers for an
	// integer, bigint or date array, of its name-based UUID for a uuid
	// array, the text of the JSON object mapping it to itself for an
	// hstore, and its text for any other type (see writeUnchanged for
	// where Debezium writes null, and MatchDebeziumLosses). A "hex:"
	// prefix is not decoded, unlike Debezium's: the text is written as
	// given.
	UnavailableValuePlaceholder string
	// NullNestedArrays writes each element of an array of more than one
	// dimension as null, as Debezium 3.6.1 does (it loses the values), for
	// consumers that depend on that. false (the default) keeps the nested
	// values: a deliberate deviation from Debezium. SchemasEnable implies
	// it.
	NullNestedArrays bool
	// MatchDebeziumLosses writes what Debezium 3.6.1 writes where it
	// loses a value, for consumers that must see exactly Debezium's
	// output: it implies NullNestedArrays, writes a name column of a
	// streamed change as null (Debezium's stream does not read the name
	// type) and a BC date of a snapshot row as the same day AD (Debezium
	// reads snapshot dates through JDBC, which drops the era), a NULL
	// of a column with a DEFAULT Debezium declares (ColumnInfo.Default,
	// see SchemasEnable) as that default, whatever SchemasEnable, as
	// Kafka Connect's JsonConverter writes Debezium's records
	// (replace.null.with.default=true): an inserted or updated NULL, and
	// every non-key column of a REPLICA IDENTITY DEFAULT delete's before
	// image; with SchemasEnable the defaults are declared in the schemas;
	// it leaves out the array columns Debezium leaves out (arrays of
	// money, interval, varbit, point, xml, or of a domain); it strips
	// the trailing zeros of a numeric without a declared scale in
	// DecimalPrecise, as Debezium does (1.50 at scale 1, 1000.000 at
	// scale 0), in arrays too; and it
	// writes a TRUNCATE (skipped.operations "none") with a null key, as
	// Debezium does, where the sink keys it by its event id. Not a
	// Debezium property. false (the default) keeps the values: the
	// deliberate deviations listed in the type's doc.
	MatchDebeziumLosses bool

	// SchemasEnable is JsonConverter's schemas.enable for key and value:
	// every value is {"schema":<schema>,"payload":<the envelope above>}
	// and every key {"schema":<schema>,"payload":<the key object>}, with
	// the Kafka Connect schemas Debezium declares (debezium_schema.go):
	// the value's <Name>.<schema>.<table>.Envelope (version 2) with
	// before and after as the table's .Value struct, one field per
	// column in table order with its Connect type, optional unless the
	// column is NOT NULL, and Debezium's semantic type names and
	// parameters under the options above (io.debezium.time.MicroTimestamp,
	// org.apache.kafka.connect.data.Decimal with its scale and precision,
	// io.debezium.data.Bits with its length, ...); the key's .Key struct
	// of the key columns, whose values are written in the column forms
	// above (the encoder writes the keys: it needs the sink's KeyFormat
	// KeyJSON); the __debezium.oldkey and __debezium.newkey headers are
	// the other key's payload, without schema, as Debezium writes them.
	// Events need a Relation: an event without one is rejected (an
	// *EncodeError). Tombstones stay null values, as JsonConverter
	// writes a null value whatever schemas.enable. A truncate (unless
	// MatchDebeziumLosses), or a table without key columns, keeps its
	// event-id key (Debezium's is null) as a string-schema document. Nested arrays are written as
	// null (NullNestedArrays), since the array schema Debezium declares
	// cannot hold them. Column DEFAULTs are declared with
	// MatchDebeziumLosses, and for NOT NULL columns: JsonConverter reads
	// a NULL of a field with a default as the default, so a schema
	// declaring it for a nullable column would have a NULL the encoder
	// keeps read as the default (a NOT NULL column's only nulls, the
	// values a delete's before image lacks, are written as its default
	// whatever the options, as Debezium writes them). There, a column's
	// DEFAULT (ColumnInfo.Default, which pgcdc fills) is the field's
	// "default" where Debezium declares one, in the column's value form
	// and as Debezium parses it (see debezium_defaults.go: constants of
	// the integer, float, numeric with a scale, boolean, text, date and
	// timestamp types; a function call as the type's placeholder, now()
	// as the epoch, nextval as 0; 'x''y' as "x"; no default for
	// expressions, domains, enums and arrays). Each table version's
	// schemas are made once and cached, so encoding allocates nothing
	// more per event.
	SchemasEnable bool

	// WriteAnnotations lets the sink put Config.Annotations in the value
	// (AnnotationsIn AnnotateValue or AnnotateBoth): the envelope ends
	// with an "annotations" member, an object of strings in sorted key
	// order. It is an extension: Debezium's envelope has no such field.
	// Only in JSON without schemas: the Connect schema Debezium declares
	// has no place for it, so the sink refuses it with SchemasEnable (and
	// the Avro encoders of kafkasinkavro refuse value annotations), where
	// headers (AnnotateHeaders) carry them. false (the default) makes the
	// sink refuse annotations in the value.
	WriteAnnotations bool

	annotations string // the annotations member, made by Annotate
}

// The headers Encoder adds (see RecordShaper).
const (
	// On the two events of a key change (Event.Source.KeyChange): the
	// delete's record names the new key, the insert's the old one, in
	// the sink's key form (Config.KeyFormat; KeyJSON is Debezium's), or
	// with SchemasEnable as the key's payload.
	HeaderNewKey = "__debezium.newkey"
	HeaderOldKey = "__debezium.oldkey"

	headerDebeziumLogicalName   = "__debezium.context.connectorLogicalName"
	headerDebeziumTaskID        = "__debezium.context.taskId"
	headerDebeziumConnectorName = "__debezium.context.connectorName"
	headerDebeziumRunID         = "__debezium.context.runId"
)

// debeziumRunID is Encoder.RunID when it is empty: a random UUID
// made once per process.
var debeziumRunID = func() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}()

var _ kafkasink.RecordShaper = Encoder{}

// Shape implements RecordShaper: SkippedOperations, the tombstone after a
// delete, and with ProvideTransactionMetadata the BEGIN and END records.
func (d Encoder) Shape(e *kafkasink.Event) kafkasink.RecordShape {
	return kafkasink.RecordShape{
		Skip:         d.skips(e.Op),
		Tombstone:    e.Op == kafkasink.OpDelete && !d.DisableTombstones,
		NullKey:      e.Op == kafkasink.OpTruncate && d.MatchDebeziumLosses,
		RecordBefore: d.ProvideTransactionMetadata && e.Txn.First,
		RecordAfter:  d.ProvideTransactionMetadata && e.Txn.End != nil,
	}
}

// skips reports whether SkippedOperations names op. Snapshot reads are
// never skipped, as in Debezium.
func (d Encoder) skips(op kafkasink.Op) bool {
	list := d.SkippedOperations
	switch {
	case list == "":
		list = "t"
	case list == "none" || op == kafkasink.OpRead || !op.Valid():
		return false
	}
	code := debeziumOps[op]
	for list != "" {
		var item string
		item, list, _ = strings.Cut(list, ",")
		if strings.TrimSpace(item) == code {
			return true
		}
	}
	return false
}

// AppendHeaders implements RecordShaper: the key-change headers and the
// extended headers.
func (d Encoder) AppendHeaders(dst []kafkasink.Header, arena []byte, e *kafkasink.Event, otherKey []byte) ([]kafkasink.Header, []byte) {
	if e.Source.KeyChange != nil && otherKey != nil {
		key := HeaderOldKey
		if e.Op == kafkasink.OpDelete {
			key = HeaderNewKey
		}
		dst = append(dst, kafkasink.Header{Key: key, Value: otherKey})
	}
	if d.DisableExtendedHeaders {
		return dst, arena
	}
	add := func(key, value string) {
		start := len(arena)
		arena = append(arena, value...)
		dst = append(dst, kafkasink.Header{Key: key, Value: arena[start:len(arena):len(arena)]})
	}
	name := d.Name
	if name == "" {
		name = "kafkasink"
	}
	runID := d.RunID
	if runID == "" {
		runID = debeziumRunID
	}
	add(headerDebeziumLogicalName, name)
	add(headerDebeziumTaskID, "0")
	add(headerDebeziumConnectorName, "postgresql")
	add(headerDebeziumRunID, runID)
	return dst, arena
}

var (
	_ kafkasink.Encoder    = Encoder{}
	_ kafkasink.Annotator  = Encoder{}
	_ kafkasink.Validator  = Encoder{}
	_ kafkasink.ValueSizer = Encoder{}
)

// Validate implements kafkasink.Validator: a *kafkasink.ConfigError
// listing every option of d that is out of range, or nil.
func (d Encoder) Validate() error {
	if p := d.problems(); len(p) > 0 {
		return &kafkasink.ConfigError{Problems: p}
	}
	return nil
}

// MinValueSize implements kafkasink.ValueSizer: Encode writes every
// changed column value of both images at least at its length, as
// JSONEncoder does.
func (d Encoder) MinValueSize(e *kafkasink.Event) int {
	return kafkasink.MinRowSize(e.Before) + kafkasink.MinRowSize(e.After)
}

var _ kafkasink.Explainer = Encoder{}

// Explain implements kafkasink.Explainer: the options behind what the
// sink's rules are about, with the program's flags for them.
func (d Encoder) Explain(f kafkasink.Feature) (why, fix string) {
	switch f {
	case kafkasink.FeatureAllKeys:
		return "debezium.Encoder.SchemasEnable (schemas.enable) writes JSON keys with their schema and JSON " +
			HeaderOldKey + "/newkey headers", ""
	case kafkasink.FeatureFrameTopic:
		return "debezium.Encoder.TransactionTopic (transaction.topic, flag -transaction.topic), of the BEGIN and END records", ""
	case kafkasink.FeatureNullKey:
		return "debezium.Encoder.MatchDebeziumLosses writes a TRUNCATE so, as Debezium does",
			`turn MatchDebeziumLosses off (flag -debezium-match-losses=false), skip truncates (SkippedOperations "t", flag -skipped.operations t)`
	}
	return "", ""
}

// problems returns the problems of the options, for Validate.
func (d Encoder) problems() []string {
	p := d.valueProblems()
	if t := d.FrameTopic(); t != "" {
		if err := kafkasink.ValidateTopicName(t); err != nil {
			p = append(p, fmt.Sprintf("Encoder: DebeziumEncoder.TransactionTopic (transaction.topic) %q: %v", t, err))
		}
	}
	list := d.SkippedOperations
	if list == "" || list == "none" {
		return p
	}
	for item := range strings.SplitSeq(list, ",") {
		switch strings.TrimSpace(item) {
		case "c", "u", "d", "t":
		default:
			return append(p, fmt.Sprintf("Encoder: DebeziumEncoder.SkippedOperations (skipped.operations) %q is not valid: want a comma-separated list of c, u, d and t, or \"none\"", list))
		}
	}
	return p
}

// Annotate implements Annotator, with WriteAnnotations and without
// SchemasEnable: the encoder it returns writes annotations as the
// envelope's last member.
func (d Encoder) Annotate(annotations map[string]string) (kafkasink.Encoder, error) {
	switch {
	case !d.WriteAnnotations:
		return nil, errors.New("DebeziumEncoder writes Debezium's envelope, which has no annotations field: " +
			"set DebeziumEncoder.WriteAnnotations to add one (an extension of the envelope), or carry them in headers (AnnotateHeaders)")
	case d.SchemasEnable:
		return nil, errAnnotationsNoSchema
	}
	d.annotations = annotation.Member(annotations)
	return d, nil
}

// invalidOpError reports an event whose Op is not one of the defined
// operations, as the root's encoders do: Write refuses such events before
// encoding; an Encoder called directly reports it the same way.
func invalidOpError(e *kafkasink.Event) error {
	return fmt.Errorf("%w: event %s of %s.%s has invalid op %s", kafkasink.ErrInvalidBatch, e.Position, e.Schema, e.Table, e.Op)
}

// errAnnotationsNoSchema refuses annotations in a value whose schema
// Debezium declares: Connect's and Avro's.
var errAnnotationsNoSchema = errors.New("DebeziumEncoder.WriteAnnotations writes annotations in JSON without schemas only: " +
	"the Connect schema Debezium declares (SchemasEnable, Avro) has no annotations field; carry them in headers (AnnotateHeaders)")

// debeziumOps maps an Op to Debezium's single-letter operation code.
// Version is what Encoder writes to source.version: the
// Debezium release whose default output it reproduces, so that a consumer
// that checks the version reads the format it expects. The records' own
// kafkasink.* headers, unless Config.Headers is HeadersNone, tell them
// apart from Debezium's.
const Version = "3.6.1.Final"

var (
	debeziumOps = [...]string{kafkasink.OpInsert: "c", kafkasink.OpUpdate: "u", kafkasink.OpDelete: "d", kafkasink.OpTruncate: "t", kafkasink.OpRead: "r"}
	// debeziumOpMembers are the envelope's op members in JSON.
	debeziumOpMembers = [...]string{kafkasink.OpInsert: `,"op":"c"`, kafkasink.OpUpdate: `,"op":"u"`, kafkasink.OpDelete: `,"op":"d"`, kafkasink.OpTruncate: `,"op":"t"`, kafkasink.OpRead: `,"op":"r"`}
)

// Encode implements Encoder. It never returns a tombstone: Debezium's
// tombstone after a delete is a second record, which the sink writes as
// Shape asks (RecordShaper).
func (d Encoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if !e.Op.Valid() {
		return nil, invalidOpError(e)
	}
	if d.SchemasEnable {
		return d.encodeWithSchema(dst, e)
	}
	var schemas *debeziumSchemas
	if e.Relation != nil {
		schemas = d.schemasOf(e)
	}
	w := connectWriter{buf: dst}
	if err := d.writeEnvelope(&w, e, schemas); err != nil {
		return nil, err
	}
	return w.buf, nil
}

// AppendAvro appends e's envelope in the Avro binary encoding of the
// Avro schema Kafka Connect's AvroData (Debezium's AvroConverter) makes
// from the envelope's Connect schema, the one SchemasEnable declares.
// It is for the kafkasinkavro module, which registers that schema and
// writes the record's wire-format header. The values are those Encode
// writes, nested arrays null as with SchemasEnable; a value the schema
// cannot hold is an *EncodeError, as is an event without a Relation.
func (d Encoder) AppendAvro(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if !e.Op.Valid() {
		return nil, invalidOpError(e)
	}
	if e.Relation == nil {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: errNoAvroRelation}
	}
	d.NullNestedArrays = true
	schemas := d.schemasOf(e)
	w := avroWriter(dst, &schemas.envelope)
	if err := d.writeEnvelope(&w, e, schemas); err != nil {
		return nil, err
	}
	if err := w.failed(); err != nil {
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: err}
	}
	return w.buf, nil
}

// writeEnvelope writes the envelope of e, with schemas those of its
// table version (nil without a Relation).
func (d Encoder) writeEnvelope(w *connectWriter, e *kafkasink.Event, schemas *debeziumSchemas) error {
	if d.annotations != "" && (w.avro || d.SchemasEnable) {
		// Annotate refused SchemasEnable; an annotated encoder set to
		// SchemasEnable afterwards, or asked for Avro, lands here.
		return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: errAnnotationsNoSchema}
	}
	w.beginStruct()
	w.key(`"before":`)
	if err := d.writeRow(w, e, schemas, e.Before, true); err != nil {
		return err
	}
	w.key(`,"after":`)
	if err := d.writeRow(w, e, schemas, e.After, false); err != nil {
		return err
	}
	w.key(`,"source":`)
	lsn := debeziumLSN(e)
	d.writeSource(w, e, lsn, schemas)
	w.key(`,"transaction":`)
	d.writeTxnBlock(w, e, lsn)
	w.fixedText(debeziumOpMembers[e.Op], debeziumOps[e.Op])
	now := d.Now
	if now == nil {
		now = time.Now
	}
	// The instant is formatted once; the other units are cut from that
	// text (see scaled).
	ns := now().UnixNano()
	var nsBuf [20]byte
	var nsText []byte // JSON's
	if !w.avro {
		nsText = strconv.AppendInt(nsBuf[:0], ns, 10)
	}
	w.key(`,"ts_ms":`)
	w.scaled(nsText, ns, -6)
	w.key(`,"ts_us":`)
	w.scaled(nsText, ns, -3)
	w.key(`,"ts_ns":`)
	w.scaled(nsText, ns, 0)
	w.buf = append(w.buf, d.annotations...)
	w.endStruct()
	return nil
}

// writeSource writes the source block of e, whose LSN is lsn.
func (d Encoder) writeSource(w *connectWriter, e *kafkasink.Event, lsn kafkasink.LSN, schemas *debeziumSchemas) {
	src := &e.Source
	at, xid := e.Commit, e.XID
	if e.Op == kafkasink.OpRead {
		at, xid = src.SnapshotTime, src.SnapshotXID
	}
	var us int64
	if !at.IsZero() {
		us = at.UnixMicro()
	}
	// Each instant and the LSN are formatted once; the other units are
	// cut from or padded to that text (see appendScaled).
	var usBuf, lsnBuf [20]byte
	var usText []byte // JSON's
	if !w.avro {
		usText = strconv.AppendInt(usBuf[:0], us, 10)
	}
	lsnText := strconv.AppendUint(lsnBuf[:0], uint64(lsn), 10)
	w.beginStruct()
	if schemas != nil {
		w.chunk(&schemas.sourceHead)
	} else {
		d.writeSourceHead(w)
	}
	w.key(`,"ts_ms":`)
	w.scaled(usText, us, -3)
	w.key(`,"snapshot":`)
	w.text(debeziumSnapshot(e))
	w.key(`,"db":`)
	w.str(src.Database)
	// sequence is a string holding a JSON array of two strings: the end
	// of the previous transaction's commit record (null when unknown)
	// and the change's LSN.
	w.key(`,"sequence":`)
	quote := `"` // inside the string: \" in JSON
	if !w.avro {
		quote = `\"`
	}
	mark := w.beginText()
	w.buf = append(w.buf, '[')
	if src.PrevCommitEnd == 0 || e.Op == kafkasink.OpRead {
		w.buf = append(w.buf, "null"...)
	} else {
		w.buf = append(w.buf, quote...)
		w.buf = strconv.AppendUint(w.buf, uint64(src.PrevCommitEnd), 10)
		w.buf = append(w.buf, quote...)
	}
	w.buf = append(append(append(append(w.buf, ','), quote...), lsnText...), quote...)
	w.buf = append(w.buf, ']')
	w.endText(mark)
	w.key(`,"ts_us":`)
	w.scaled(usText, us, 0)
	w.key(`,"ts_ns":`)
	w.scaled(usText, us, 3)
	if schemas != nil {
		w.chunk(&schemas.sourceTable)
	} else {
		writeSourceTable(w, e)
	}
	switch {
	case e.Op == kafkasink.OpRead && src.Snapshot&kafkasink.SnapshotIncremental != 0:
		// A row of an incremental snapshot belongs to no transaction
		// and no WAL position, and Debezium writes both as null.
		w.nulls(`,"txId":null,"lsn":null`, 2)
	default:
		w.key(`,"txId":`)
		w.uint(uint64(xid))
		w.key(`,"lsn":`)
		if d.LSNAsString {
			mark := w.beginText()
			w.buf = append(w.buf, lsnText...)
			w.endText(mark)
		} else {
			w.uintText(uint64(lsn), lsnText)
		}
	}
	w.nulls(`,"xmin":null,"origin":null,"origin_lsn":null`, 3)
	w.endStruct()
}

// The source block's members that are the same in every record of a
// table version, which debeziumSchemas holds written (connectChunk).

// writeSourceHead writes the source's first members: version,
// connector, name.
func (d Encoder) writeSourceHead(w *connectWriter) {
	w.fixedText(`"version":"`+Version+`"`, Version)
	w.fixedText(`,"connector":"postgresql"`, "postgresql")
	w.key(`,"name":`)
	w.str(d.name())
}

// sourceTableField is the index of the source's schema member.
const sourceTableField = 9

// writeSourceTable writes the source's schema and table members.
func writeSourceTable(w *connectWriter, e *kafkasink.Event) {
	w.key(`,"schema":`)
	w.str(e.Schema)
	w.key(`,"table":`)
	w.str(e.Table)
}

// scaled writes n·10^exp (exp in -6..3), rounded down, given text, n's
// decimal form (see appendScaled).
func (w *connectWriter) scaled(text []byte, n int64, exp int) {
	if !w.avro {
		w.buf = appendScaled(w.buf, text, n, exp)
		return
	}
	if exp >= 0 {
		w.int(n * pow10[exp])
	} else {
		w.int(floorDiv(n, pow10[-exp]))
	}
}

// appendScaled appends n·10^exp (exp in -6..3), rounded down, given text,
// n's decimal form: text without its last -exp digits, or with exp
// zeros added, when that is the value (n at least 10^-exp, or not 0).
// Debezium writes each instant in three units (ts_ms, ts_us, ts_ns);
// cutting one formatted text is several times cheaper than formatting
// three integers of up to 19 digits.
func appendScaled(dst, text []byte, n int64, exp int) []byte {
	switch {
	case exp > 0 && n != 0:
		dst = append(dst, text...)
		return append(dst, "000"[:exp]...)
	case exp > 0:
		return append(dst, '0')
	case n >= pow10[-exp]:
		return append(dst, text[:len(text)+exp]...)
	}
	return strconv.AppendInt(dst, floorDiv(n, pow10[-exp]), 10)
}

// floorDiv is a/b rounded down, as Java's Instant arithmetic rounds times
// before 1970.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// debeziumSnapshot is source.snapshot: where a snapshot row stands in its
// run, with Debezium's precedence (the last row of the run is "last" even
// when it is also the first of its table), or "false" for a change.
func debeziumSnapshot(e *kafkasink.Event) string {
	if e.Op != kafkasink.OpRead {
		return "false"
	}
	switch m := e.Source.Snapshot; {
	case m&kafkasink.SnapshotIncremental != 0:
		return "incremental"
	case m&kafkasink.SnapshotLast != 0:
		return "last"
	case m&kafkasink.SnapshotFirst != 0:
		return "first"
	case m&kafkasink.SnapshotLastInTable != 0:
		return "last_in_data_collection"
	case m&kafkasink.SnapshotFirstInTable != 0:
		return "first_in_data_collection"
	}
	return "true"
}

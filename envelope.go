package kafkasink

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kafkasink/kafkasink/encoding/jsonw"
	"github.com/kafkasink/kafkasink/internal/annotation"
)

// Encoder turns an event into the value of its Kafka record.
//
// Encode appends the record value for e to dst and returns the extended
// slice. Returning a nil slice with a nil error means a tombstone: the
// record's value is null, which log compaction treats as a delete of the
// key. The sink always passes a non-nil dst, so any non-nil result, even an
// empty one, is a value.
//
// A value the encoder cannot represent is reported as an *EncodeError
// naming the table and the column; the event is then rejected (see
// RejectedError), not dropped. On error the returned slice is ignored.
//
// Encoders must be safe for concurrent use, as the built-in ones are.
// Encode must not keep dst or the slice it returns: once the batch is
// delivered, the sink reuses that memory for the next one.
//
// Column values are written by the same rules in every built-in encoder:
// the output rules of package encoding/jsonw (docs/records.md repeats
// them), with Decimal as a JSON string (see Decimal). Unchanged TOAST
// columns are left out of row objects, because their value is unknown,
// and listed by name where the envelope has a place for them. LSNs are
// written as decimal strings: they are 64-bit and exceed 2^53, beyond
// which JavaScript and many JSON libraries silently round.
type Encoder interface {
	Encode(dst []byte, e *Event) ([]byte, error)
}

// Compile-time checks that the built-in encoders satisfy Encoder.
var (
	_ Encoder = JSONEncoder{}
	_ Encoder = UpsertEncoder{}
)

// Validator is an optional interface of an Encoder whose options can be
// out of range or in conflict. New calls Validate once and reports what
// it returns with its own problems, in one *ConfigError: each of the
// Problems of a *ConfigError Validate returns, else the error's text.
type Validator interface {
	Validate() error
}

// ValueSizer is an optional interface of an Encoder that knows, before
// encoding, a size its value for an event reaches at least, so that a
// record too large for its topic is refused before it is encoded:
// encoding a 100 MB value takes a few times that in memory, only to be
// thrown away. MinValueSize must be cheap, and must not exceed the size
// of the value Encode writes (MinRowSize helps an encoder that writes
// every changed column value at least at its length).
type ValueSizer interface {
	MinValueSize(e *Event) int
}

// Explainer is an optional interface of an Encoder that names the
// options of its own behind what a rule of the sink is about, so that
// the problem the sink reports says which option to change, and the
// program's flag for it. The sink's messages name the interface at
// issue (see Feature) and add what Explain says.
type Explainer interface {
	// Explain returns why the Encoder does what f names, naming its
	// options, and the ways to make it stop besides the sink's own
	// fixes; "" for either when it has nothing to add.
	Explain(f Feature) (why, fix string)
}

// Feature is what an Encoder does that a rule of the sink is about.
type Feature uint8

// The features an Explainer explains.
const (
	// FeatureAllKeys: the Encoder writes every record key itself
	// (AllKeysEncoder.EncodesAllKeys reports true), which New refuses
	// unless Config.KeyFormat is KeyJSON.
	FeatureAllKeys Feature = iota + 1
	// FeatureFrameTopic: the Encoder writes records around events to a
	// topic of its own (Framer.FrameTopic), which New refuses when it is
	// Config.CheckpointTopic or Config.DeadLetterTopic.
	FeatureFrameTopic
	// FeatureNullKey: the Encoder writes events with a null key
	// (RecordShape.NullKey), which a compacted topic refuses: the sink
	// rejects them there (ReasonNoKey).
	FeatureNullKey
)

// explain returns how the sink's messages name f: the interface at
// issue, with the reason enc's Explainer gives, and the fix it adds.
func explain(enc Encoder, f Feature, iface string) (what, fix string) {
	x, ok := enc.(Explainer)
	if !ok {
		return iface, ""
	}
	why, fix := x.Explain(f)
	if why != "" {
		iface += ": " + why
	}
	return iface, fix
}

// JSONEncoder writes the change event itself as one JSON object. It is the
// default Encoder. Its zero value is ready to use and it is safe for
// concurrent use.
//
// The fields, always in this order:
//
//	id               the event id, e.Position's text form ("16/B374D848:3"),
//	                 unique per change: use it to deduplicate
//	op               "insert", "update", "delete", "truncate" or "read"
//	                 (a snapshot row)
//	schema, table    the source table
//	lsn              the change's own LSN as a decimal string ("0" when the
//	                 source has none)
//	commit_lsn       the commit LSN of its transaction (e.Position.LSN) as a
//	                 decimal string
//	index            the event's index within its transaction, a number
//	xid              the source transaction id, a number (0 when none)
//	commit_time      the commit time in RFC 3339 UTC, or null when unknown
//	key              the names of the key columns, an array (possibly empty)
//	before           the old row image as an object, or null
//	after            the new row image as an object, or null
//	unchanged        the names of unchanged TOAST columns, which before and
//	                 after leave out; omitted when there are none
//	truncate         the options of a truncate, an object
//	                 {"cascade":bool,"restart_identity":bool}
//	                 (e.Truncate); omitted for every other op
//	backfill_run_id  the snapshot run of an OpRead row; omitted when empty
//	annotations      Config.Annotations as an object of strings, keys in
//	                 sorted order, when the sink's AnnotationsIn puts them
//	                 in the value (see Annotate); omitted otherwise
//
// A row object maps column names to values in column order.
type JSONEncoder struct {
	annotations string // the annotations member, made by Annotate
}

// Annotate implements Annotator: the encoder it returns writes
// annotations as the value's last member.
func (j JSONEncoder) Annotate(annotations map[string]string) (Encoder, error) {
	j.annotations = annotation.Member(annotations)
	return j, nil
}

// Encode implements Encoder. It never returns a tombstone.
func (j JSONEncoder) Encode(dst []byte, e *Event) ([]byte, error) {
	if !e.Op.Valid() {
		return nil, invalidOpError(e)
	}
	dst = append(dst, `{"id":"`...)
	dst = e.Position.AppendText(dst) // hex digits, '/' and ':' need no escaping
	dst = append(dst, `","op":"`...)
	dst = append(dst, e.Op.String()...)
	dst = append(dst, `","schema":`...)
	dst = jsonw.AppendString(dst, e.Schema)
	dst = append(dst, `,"table":`...)
	dst = jsonw.AppendString(dst, e.Table)
	dst = append(dst, `,"lsn":"`...)
	dst = strconv.AppendUint(dst, uint64(e.LSN), 10)
	dst = append(dst, `","commit_lsn":"`...)
	dst = strconv.AppendUint(dst, uint64(e.Position.LSN), 10)
	dst = append(dst, `","index":`...)
	dst = strconv.AppendUint(dst, e.Position.Index, 10)
	dst = append(dst, `,"xid":`...)
	dst = strconv.AppendUint(dst, uint64(e.XID), 10)
	dst = append(dst, `,"commit_time":`...)
	dst = appendCommitTime(dst, e.Commit)
	dst = append(dst, `,"key":[`...)
	for i, k := range e.Key {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonw.AppendString(dst, k)
	}
	dst = append(dst, `],"before":`...)
	var err error
	if dst, err = AppendJSONRow(dst, e, e.Before); err != nil {
		return nil, err
	}
	dst = append(dst, `,"after":`...)
	if dst, err = AppendJSONRow(dst, e, e.After); err != nil {
		return nil, err
	}
	dst = appendUnchanged(dst, `,"unchanged":[`, e)
	if e.Op == OpTruncate {
		dst = append(dst, `,"truncate":{"cascade":`...)
		dst = jsonw.AppendBool(dst, e.Truncate.Cascade)
		dst = append(dst, `,"restart_identity":`...)
		dst = jsonw.AppendBool(dst, e.Truncate.RestartIdentity)
		dst = append(dst, '}')
	}
	if e.BackfillRunID != "" {
		dst = append(dst, `,"backfill_run_id":`...)
		dst = jsonw.AppendString(dst, e.BackfillRunID)
	}
	dst = append(dst, j.annotations...)
	return append(dst, '}'), nil
}

// UpsertEncoder writes the row as a document to upsert, for consumers that
// keep the latest state of each row (search indexes, caches, compacted
// topics). Deletes and truncates are tombstones (nil value): with the row's
// key as the message key, compaction then removes the row. A truncate has
// no key of its own, so its tombstone carries the event id key and only
// tells consumers that a truncate happened; they must clear the table
// themselves if they care. A tombstone has no room for the truncate's
// options (e.Truncate): consumers that need them use JSONEncoder. Its
// zero value is ready to use and it is safe for concurrent use.
//
// The fields of a value, always in this order:
//
//	operation   "upsert" when the document is the whole row: replace the
//	            stored document with it; "partial" when unchanged TOAST
//	            columns are left out of it (metadata.unchanged names
//	            them): merge it into the stored document, keeping the
//	            stored values of those columns. A partial document never
//	            claims to be the whole row.
//	id          the event id (e.Position's text form)
//	document    the row object of e.After (column names to values, in
//	            column order, unchanged TOAST columns left out), or null
//	            when the event has no After image
//	metadata    an object:
//	  schema, table    the source table
//	  action           "insert", "update" or "read"
//	  commit_lsn       the commit LSN as a decimal string
//	  commit_index     the event's index within its transaction, a number
//	  commit_time      RFC 3339 UTC, or null when unknown
//	  is_backfill      true for snapshot rows (OpRead)
//	  backfill_run_id  the snapshot run; omitted when empty
//	  unchanged        names of unchanged TOAST columns that the document
//	                   leaves out; omitted when there are none. A consumer
//	                   that replaces whole documents must keep the old
//	                   values of these columns (a partial update).
//	annotations as JSONEncoder writes it; a tombstone has none (see
//	            AnnotateValue)
//
// A partial document with action "insert" is the new row of an update
// that changed the row's key (see pgcdc): the key it is stored under is
// new, so no earlier record under it holds the missing values; the last
// document of the old key, which the tombstone just before it removed,
// did. Sources avoid this by sending the whole old row: in PostgreSQL,
// REPLICA IDENTITY FULL, with which pgcdc fills unchanged columns from the
// old row so documents are whole.
type UpsertEncoder struct {
	annotations string // the annotations member, made by Annotate
}

// Annotate implements Annotator: the encoder it returns writes
// annotations after metadata.
func (u UpsertEncoder) Annotate(annotations map[string]string) (Encoder, error) {
	u.annotations = annotation.Member(annotations)
	return u, nil
}

// Encode implements Encoder.
func (u UpsertEncoder) Encode(dst []byte, e *Event) ([]byte, error) {
	switch e.Op {
	case OpDelete, OpTruncate:
		return nil, nil
	case OpInsert, OpUpdate, OpRead:
	default:
		return nil, invalidOpError(e)
	}
	if partialRow(e.After) {
		dst = append(dst, `{"operation":"partial","id":"`...)
	} else {
		dst = append(dst, `{"operation":"upsert","id":"`...)
	}
	dst = e.Position.AppendText(dst)
	dst = append(dst, `","document":`...)
	var err error
	if dst, err = AppendJSONRow(dst, e, e.After); err != nil {
		return nil, err
	}
	dst = append(dst, `,"metadata":{"schema":`...)
	dst = jsonw.AppendString(dst, e.Schema)
	dst = append(dst, `,"table":`...)
	dst = jsonw.AppendString(dst, e.Table)
	dst = append(dst, `,"action":"`...)
	dst = append(dst, e.Op.String()...)
	dst = append(dst, `","commit_lsn":"`...)
	dst = strconv.AppendUint(dst, uint64(e.Position.LSN), 10)
	dst = append(dst, `","commit_index":`...)
	dst = strconv.AppendUint(dst, e.Position.Index, 10)
	dst = append(dst, `,"commit_time":`...)
	dst = appendCommitTime(dst, e.Commit)
	dst = append(dst, `,"is_backfill":`...)
	dst = jsonw.AppendBool(dst, e.Op == OpRead)
	if e.BackfillRunID != "" {
		dst = append(dst, `,"backfill_run_id":`...)
		dst = jsonw.AppendString(dst, e.BackfillRunID)
	}
	dst = appendUnchanged(dst, `,"unchanged":[`, e)
	dst = append(dst, '}')
	dst = append(dst, u.annotations...)
	return append(dst, '}'), nil
}

// valueExt teaches jsonw the root package's value types, which jsonw cannot
// import without a cycle.
var valueExt = &jsonw.Extension{Append: appendExtValue, Types: "kafkasink.Decimal"}

func appendExtValue(dst []byte, v any) ([]byte, bool, error) {
	if d, ok := v.(Decimal); ok {
		return jsonw.AppendString(dst, string(d)), true, nil
	}
	return dst, false, nil
}

// AppendJSONValue appends v, one column value, in JSON as JSONEncoder
// writes it (see JSONEncoder for the forms), for encoders that write some
// values as it does. A value of a type it cannot write is an error.
func AppendJSONValue(dst []byte, v any) ([]byte, error) {
	return jsonw.AppendValueExt(dst, v, valueExt)
}

// AppendJSONRow appends row as JSONEncoder writes an image: an object of
// its changed columns in order (unchanged TOAST columns left out), or
// null for a nil row. A value it cannot write is an *EncodeError naming
// e's table and the column.
func AppendJSONRow(dst []byte, e *Event, row Row) ([]byte, error) {
	if row == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '{')
	first := true
	for i := range row {
		c := &row[i]
		if c.Unchanged {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsonw.AppendString(dst, c.Name)
		dst = append(dst, ':')
		var err error
		if dst, err = AppendJSONValue(dst, c.Value); err != nil {
			return nil, &EncodeError{Schema: e.Schema, Table: e.Table, Column: c.Name, Err: err}
		}
	}
	return append(dst, '}'), nil
}

// appendUnchanged appends open (such as `,"unchanged":[`), the names of the
// unchanged TOAST columns of e.After and then those of e.Before not already
// listed, and the closing bracket; it appends nothing when there are none.
// A column is listed once even when both images mark it.
func appendUnchanged(dst []byte, open string, e *Event) []byte {
	n := 0
	add := func(name string) {
		if n == 0 {
			dst = append(dst, open...)
		} else {
			dst = append(dst, ',')
		}
		n++
		dst = jsonw.AppendString(dst, name)
	}
	for i := range e.After {
		if e.After[i].Unchanged {
			add(e.After[i].Name)
		}
	}
	for i := range e.Before {
		if c := &e.Before[i]; c.Unchanged && !unchangedIn(e.After, c.Name) {
			add(c.Name)
		}
	}
	if n > 0 {
		dst = append(dst, ']')
	}
	return dst
}

// partialRow reports whether row leaves out an unchanged TOAST column.
func partialRow(row Row) bool {
	for i := range row {
		if row[i].Unchanged {
			return true
		}
	}
	return false
}

func unchangedIn(row Row, name string) bool {
	for i := range row {
		if row[i].Unchanged && row[i].Name == name {
			return true
		}
	}
	return false
}

// appendCommitTime appends t in RFC 3339 UTC, or null for the zero time,
// which means the source did not report one.
func appendCommitTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, "null"...)
	}
	return jsonw.AppendTime(dst, t)
}

// invalidOpError reports an event whose Op is not one of the defined
// operations. Write refuses such events before encoding; an Encoder called
// directly reports it the same way.
func invalidOpError(e *Event) error {
	return fmt.Errorf("%w: event %s of %s.%s has invalid op %s", ErrInvalidBatch, e.Position, e.Schema, e.Table, e.Op)
}

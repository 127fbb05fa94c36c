package kafkasink

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/kafkasink/kafkasink/encoding/jsonw"
	"github.com/kafkasink/kafkasink/internal/keytext"
)

// KeyFormat selects how message keys are rendered.
type KeyFormat uint8

// The key formats. The zero value is KeyText.
const (
	// KeyText renders the key column values as text joined with '|' (see
	// AppendKey for the exact form). It is compact, readable in kcat, and
	// equal rows give equal bytes, so compaction and partitioning work.
	KeyText KeyFormat = iota
	// KeyJSON renders the key as a JSON object of the key columns, for
	// consumers that parse keys (Kafka Connect sinks, ksqlDB).
	KeyJSON
)

// String returns "text", "json", or "KeyFormat(N)" for an unknown value.
func (f KeyFormat) String() string {
	switch f {
	case KeyText:
		return "text"
	case KeyJSON:
		return "json"
	}
	return "KeyFormat(" + strconv.Itoa(int(f)) + ")"
}

// errMissingKeyColumn is wrapped by the EncodeError AppendKey returns when
// a key column has no usable value, so the sink can classify the rejection
// as ReasonNoKey. It carries no "kafkasink:" prefix because it is always
// wrapped in an EncodeError, whose message starts with one.
var errMissingKeyColumn = errors.New("key column has no value")

// AllKeysEncoder is an optional interface of a KeyEncoder that, under its
// options, writes every record key itself, not only those of row changes
// with key columns, such as an Encoder whose keys carry their schema. New
// and each Write ask EncodesAllKeys; when it reports false, the sink keys
// every record itself (AppendKey in Config.KeyFormat), as for an Encoder
// without a KeyEncoder.
//
// When it reports true, the sink calls EncodeKey for every record of a
// row change or truncate, with columns Config.KeyColumns for the table
// (empty when unset: the encoder falls back to Event.Key, and keys a
// truncate or an event without key columns itself), and
// AppendKeyPayload for the other key of a key change
// (Source.KeyChange), which RecordShaper.AppendHeaders receives. A key
// column the image lacks is the error of MissingKeyColumnError; any
// other error rejects the event with ReasonUnencodable.
type AllKeysEncoder interface {
	KeyEncoder
	// EncodesAllKeys reports whether the encoder writes every record
	// key under its options.
	EncodesAllKeys() bool
	// AppendKeyPayload appends e's key for columns in the form a
	// RecordShaper's headers carry it, as EncodeKey's contract says.
	AppendKeyPayload(dst []byte, e *Event, columns []string) ([]byte, error)
}

// MissingKeyColumnError returns the error AppendKey returns when key
// column name has no usable value in e's image: absent from it, or
// (present) an unchanged TOAST value the source did not send. It is an
// *EncodeError, and the sink rejects an event whose KeyEncoder returns
// it with ReasonNoKey.
func MissingKeyColumnError(e *Event, name string, present bool) error {
	image := "after"
	if e.After == nil {
		image = "before"
	}
	var err error
	if present {
		err = fmt.Errorf("%w: key column %q of %s.%s is an unchanged TOAST value the source did not send; "+
			"use key columns that are not TOASTed, or set the table's REPLICA IDENTITY to FULL",
			errMissingKeyColumn, name, e.Schema, e.Table)
	} else {
		err = fmt.Errorf("%w: key column %q is not in the %s image of %s.%s; "+
			"set the table's key columns in the sink config, or its REPLICA IDENTITY so deletes carry them",
			errMissingKeyColumn, name, image, e.Schema, e.Table)
	}
	return &EncodeError{Schema: e.Schema, Table: e.Table, Column: name, Err: err}
}

// AppendKey appends the message key of e to dst in the given format and
// returns the extended slice.
//
// The key columns are columns when it is non-empty, else e.Key (the
// table's primary key or replica identity). Their values are taken from
// e.After when it is non-nil, else from e.Before. When there are no key
// columns at all, the key is the event id (e.Position's text form), so the
// event still has a stable partition; such keys are unique per change and
// do not work with compaction.
//
// KeyText renders each value as text and joins them with '|':
//
//   - strings byte for byte, invalid UTF-8 included (a key is bytes, and
//     replacing bad bytes would give distinct rows the same key); Decimal
//     as its digits; json.RawMessage as it is
//   - integers in decimal; floats in their shortest round-trip form, the same
//     as in JSON (1e+21, 0.000001) but negative zero as -0, with NaN,
//     Infinity and -Infinity
//   - bool as true or false
//   - time.Time in RFC 3339 with nanoseconds, in UTC
//   - []byte as lower-case hexadecimal without prefix
//   - []any and map[string]any as their JSON form (see Encoder)
//   - NULL (nil, or a nil []byte) as \N
//
// and then escapes every value: a backslash becomes \\ and a '|' becomes
// \|. After escaping, a value never contains an unescaped '|', so the
// separators are unambiguous; and a string whose text is \N is written \\N,
// so it cannot be mistaken for NULL. A reader splits on '|' not preceded by
// an escaping backslash, reads a field of exactly \N as NULL, and replaces
// \\ and \| by \ and | in the others. The event-id key is written as it is
// (it holds neither character). Example: (42, NULL, "a|b") is 42|\N|a\|b.
//
// KeyJSON renders an object of the key columns in key-column order,
// {"tenant":7,"id":"a"}, with values written as the encoders write them
// (so invalid UTF-8 in a string becomes U+FFFD, and two keys that differ
// only there coincide); an event-id key is a JSON string ("16/B374D848:3").
//
// An event of a table without a key (Event.Keyless) and without key
// columns has a null key: AppendKey appends nothing, and the sink writes
// the record with a null key (not an empty one) to partition 0 of its
// topic, so the table's changes stay in commit order and a redelivery
// goes where the first delivery went. A compacted topic refuses records
// with a null key: such a table needs key columns there.
//
// A truncate, which has no row, is always keyed by its event id. A key
// column missing from the row, or marked Unchanged (an unchanged
// TOAST value, whose content the source did not send), is an error: an
// *EncodeError naming the table and the column. So is a value whose type is
// not supported (see Column). On error the returned slice is nil.
func AppendKey(dst []byte, e *Event, columns []string, format KeyFormat) ([]byte, error) {
	if nullKey(e, columns) {
		return dst, nil
	}
	// A truncate has no row, so no key values: it is keyed by its id.
	if columns = eventKeyColumns(e, columns); columns == nil {
		if format == KeyJSON {
			dst = append(dst, '"')
			dst = e.Position.AppendText(dst)
			return append(dst, '"'), nil
		}
		return e.Position.AppendText(dst), nil
	}
	row := e.Image()
	switch format {
	case KeyText:
	case KeyJSON:
		dst = append(dst, '{')
	default:
		return nil, fmt.Errorf("kafkasink: unknown key format %s", format)
	}
	for i, name := range columns {
		c, ok := row.Get(name)
		if !ok || c.Unchanged {
			return nil, MissingKeyColumnError(e, name, ok)
		}
		var err error
		if format == KeyJSON {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonw.AppendString(dst, name)
			dst = append(dst, ':')
			dst, err = AppendJSONValue(dst, c.Value)
		} else {
			if i > 0 {
				dst = append(dst, '|')
			}
			dst, err = appendKeyText(dst, c.Value)
		}
		if err != nil {
			return nil, &EncodeError{Schema: e.Schema, Table: e.Table, Column: name, Err: err}
		}
	}
	if format == KeyJSON {
		dst = append(dst, '}')
	}
	return dst, nil
}

// nullKey reports whether the record of e has a null key: its table has
// none (Event.Keyless) and no key columns are configured or named, and e
// is a row change (a truncate is keyed by its event id).
func nullKey(e *Event, columns []string) bool {
	return e.Keyless && len(columns) == 0 && len(e.Key) == 0 && e.Op != OpTruncate
}

// nullKeyOnCompactedTopic says why a keyless event cannot go to topic.
func nullKeyOnCompactedTopic(e *Event, topic string) error {
	return fmt.Errorf("kafkasink: %s has no key, so its events have a null Kafka key (Event.Keyless; pgcdc Config.KeylessTables, "+
		"flag -keyless-tables), and topic %q is compacted (cleanup.policy), which refuses records without a key; "+
		"give the table key columns with Config.KeyColumns (flag -key-columns), or route it to a topic that is not compacted",
		TableName(e.Schema, e.Table), topic)
}

// shapedNullKeyOnCompactedTopic says why an event enc writes with a null
// key (RecordShape.NullKey) cannot go to topic.
func shapedNullKeyOnCompactedTopic(enc Encoder, e *Event, topic string) error {
	what, fix := explain(enc, FeatureNullKey, "RecordShape.NullKey")
	if fix != "" {
		fix += ", or "
	}
	return fmt.Errorf("kafkasink: the Encoder writes this %s of %s with a null Kafka key (%s), and topic %q is compacted (cleanup.policy), "+
		"which refuses records without a key; %sroute the table to a topic that is not compacted",
		e.Op, TableName(e.Schema, e.Table), what, topic, fix)
}

// appendKeyText appends the escaped text form of one key value; a
// Decimal is written as its digits, as a string is.
func appendKeyText(dst []byte, v any) ([]byte, error) {
	if d, ok := v.(Decimal); ok {
		v = string(d)
	}
	return keytext.AppendValue(dst, v, valueExt)
}

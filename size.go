package kafkasink

import "encoding/json"

// minValueSize returns a size in bytes that enc's value for e is known to
// reach, from the lengths of e's column values alone, so that a record too
// large for its topic is refused before it is encoded: encoding a 100 MB
// value takes a few times that in memory, only to be thrown away. It is 0
// for an Encoder it does not know, whose records are measured after
// encoding.
//
// The bound holds for the built-in encoders because each writes every
// changed column value of the images it includes at least at its length:
// a string escaped, []byte in base64, raw JSON verbatim.
func minValueSize(enc Encoder, e *Event) int {
	switch enc.(type) {
	case JSONEncoder, *JSONEncoder, DebeziumEncoder, *DebeziumEncoder:
		return minRowSize(e.Before) + minRowSize(e.After)
	case UpsertEncoder, *UpsertEncoder:
		if e.Op == OpDelete || e.Op == OpTruncate {
			return 0 // a tombstone
		}
		return minRowSize(e.After)
	}
	return 0
}

// minRowSize is the bytes a row's written values take at least: the
// values of the unchanged TOAST columns are not written.
func minRowSize(row Row) int {
	n := 0
	for i := range row {
		if !row[i].Unchanged {
			n += minJSONSize(row[i].Value)
		}
	}
	return n
}

// minJSONSize is the least a value takes in JSON. Only the types whose size
// grows with the data count; the rest are small.
func minJSONSize(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case Decimal:
		return len(v)
	case json.RawMessage:
		return len(v)
	case []byte:
		return (len(v) + 2) / 3 * 4
	case []any:
		n := 0
		for _, x := range v {
			n += minJSONSize(x)
		}
		return n
	case map[string]any:
		n := 0
		for k, x := range v {
			n += len(k) + minJSONSize(x)
		}
		return n
	}
	return 0
}

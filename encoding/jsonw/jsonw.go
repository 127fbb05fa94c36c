// Package jsonw is a small, reflection-free JSON writer that appends to a
// caller's buffer. It exists because the encoders run once per change event
// and encoding/json spends most of its time in reflection and allocation;
// jsonw handles the closed set of value types a kafkasink row may hold with
// a type switch and writes nothing to the heap when dst has room.
//
// It is a supported package of the kafkasink module, shared with the
// kafkasinkavro module (whose decoders write the JSON the root's encoders
// write): its API follows the module's version like the rest of it, and
// the output rules below are part of it: a change to one is a change to
// what every encoder writes, listed in the changelog.
//
// Output rules, which kafkasink's docs/records.md repeats because consumers see them:
//
//   - Strings are escaped exactly as encoding/json's Encoder does with
//     SetEscapeHTML(false): '"' and '\\' get a backslash; \b, \f, \n, \r and
//     \t use their short escapes; other bytes below 0x20 become \u00XX;
//     U+2028 and U+2029 become \u2028 and \u2029 (they break JavaScript
//     parsers); '<', '>' and '&' are written as they are, because the
//     output is not meant for HTML and escaping them only hurts readability.
//   - Invalid UTF-8 is replaced exactly as encoding/json does: every byte
//     that does not start a valid UTF-8 sequence becomes \ufffd (U+FFFD),
//     one replacement per offending byte, so the output is always valid
//     UTF-8 while the valid parts of the string are kept.
//   - Floats use the shortest representation that round-trips, with
//     encoding/json's format: plain decimal for magnitudes in [1e-6, 1e21),
//     exponent form (1e+21, 1e-7) outside it. float32 values are formatted
//     at 32-bit precision. Negative zero is -0.0 (see AppendFloat). NaN,
//     +Inf and -Inf have no JSON number form; they are written as the
//     strings "NaN", "Infinity" and "-Infinity", which is how PostgreSQL
//     prints them.
//   - Integers of every size are JSON numbers.
//   - []byte is a string in standard base64 with padding, as encoding/json
//     writes it; a nil []byte is null.
//   - time.Time is a string in RFC 3339 with nanoseconds, converted to UTC
//     and with trailing zero digits of the fraction dropped
//     (time.RFC3339Nano). Years outside 0000–9999 have no RFC 3339 form and
//     are written as Go's time package formats them.
//   - json.RawMessage is a JSON document held as a value (a json or jsonb
//     column): it is written as a string holding its text, after checking
//     that the text is valid JSON in valid UTF-8 (anything else is an
//     error). Embedding it would make the document null and SQL NULL
//     the same null; as a string, the document null is "null" and a nil
//     RawMessage (SQL NULL) is null. Debezium writes json columns so too.
//   - []any is an array and map[string]any an object whose keys are sorted
//     (byte-wise), so equal values always encode to equal bytes. nil (SQL
//     NULL), nil slices and nil maps are null.
//
// Every function in this package is safe for concurrent use.
package jsonw

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// SupportedTypes names the types AppendValue accepts, for error messages.
const SupportedTypes = "nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, " +
	"float32, float64, string, []byte, time.Time, json.RawMessage, []any and map[string]any"

// UnsupportedTypeError is returned for a value whose type the writer does
// not know. Only the exact types listed in SupportedTypes (and those an
// Extension adds) are accepted: a named type such as `type Email string` or
// a pointer is refused rather than guessed at.
type UnsupportedTypeError struct {
	Type      string // the Go type of the value, as fmt's %T prints it
	Supported string // the types that would have been accepted
}

func (e *UnsupportedTypeError) Error() string {
	return "unsupported value type " + e.Type + " (supported: " + e.Supported + ")"
}

// InvalidRawError is returned for a json.RawMessage that is not valid JSON
// in valid UTF-8. Writing it verbatim would corrupt the whole document.
type InvalidRawError struct {
	Len     int  // length of the raw value in bytes
	BadUTF8 bool // the value is valid JSON syntax but not valid UTF-8
}

func (e *InvalidRawError) Error() string {
	if e.BadUTF8 {
		return "json.RawMessage of " + strconv.Itoa(e.Len) + " bytes is not valid UTF-8"
	}
	return "json.RawMessage of " + strconv.Itoa(e.Len) + " bytes is not valid JSON"
}

// Extension lets a caller add value types the writer cannot know about,
// such as types of a package that imports this one. Append is called for
// any value of a type the writer does not handle itself, also inside
// []any and map[string]any; it reports ok=false for a type it does not
// handle either. Types names the added types for error messages.
//
// An Extension must be safe for concurrent use; a package-level variable
// whose Append is a plain function is.
type Extension struct {
	Append func(dst []byte, v any) (out []byte, ok bool, err error)
	Types  string
}

// AppendValue appends the JSON encoding of v to dst. It is
// AppendValueExt without an extension.
func AppendValue(dst []byte, v any) ([]byte, error) {
	return AppendValueExt(dst, v, nil)
}

// AppendValueExt appends the JSON encoding of v to dst, consulting ext
// (which may be nil) for types the writer does not know. On error the
// returned slice is dst extended by a partial value and must be discarded.
func AppendValueExt(dst []byte, v any, ext *Extension) ([]byte, error) {
	if out, ok := AppendInteger(dst, v); ok {
		return out, nil
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return AppendBool(dst, x), nil
	case string:
		return AppendString(dst, x), nil
	case float64:
		return AppendFloat(dst, x, 64), nil
	case float32:
		return AppendFloat(dst, float64(x), 32), nil
	case []byte:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"'), nil
	case time.Time:
		return AppendTime(dst, x), nil
	case json.RawMessage:
		return AppendRawString(dst, x)
	case []any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendValueExt(dst, e, ext); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		return appendMap(dst, x, ext)
	}
	if ext != nil && ext.Append != nil {
		out, ok, err := ext.Append(dst, v)
		if ok || err != nil {
			return out, err
		}
	}
	return dst, unsupported(v, ext)
}

// unsupported builds the error for v. It is the only place the package
// uses reflection (through fmt's %T), and only on this failure path.
func unsupported(v any, ext *Extension) error {
	supported := SupportedTypes
	if ext != nil && ext.Types != "" {
		supported += ", and " + ext.Types
	}
	return &UnsupportedTypeError{Type: fmt.Sprintf("%T", v), Supported: supported}
}

// sortedKeysOnStack is how many map keys are sorted without a heap
// allocation; larger maps pay for one.
const sortedKeysOnStack = 32

func appendMap(dst []byte, m map[string]any, ext *Extension) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	// Go randomises map order; sorting the keys makes equal rows encode to
	// equal bytes, which compaction, deduplication and tests rely on.
	var buf [sortedKeysOnStack]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = AppendValueExt(dst, m[k], ext); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendBool appends true or false.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// AppendRawString appends raw as a JSON string holding its text, after
// checking that the text is valid JSON in valid UTF-8. A nil raw is
// written as null.
func AppendRawString(dst []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	if err := CheckRaw(raw); err != nil {
		return dst, err
	}
	// AppendString only reads the string, so viewing raw's bytes as one
	// spares a copy of what may be a large document.
	return AppendString(dst, unsafe.String(unsafe.SliceData(raw), len(raw))), nil
}

// CheckRaw returns the error AppendRawString gives raw when it is not
// valid JSON in valid UTF-8.
func CheckRaw(raw json.RawMessage) error {
	if !json.Valid(raw) {
		return &InvalidRawError{Len: len(raw)}
	}
	// json.Valid lets any byte through inside strings; invalid UTF-8
	// would not survive as the string's content.
	if !utf8.Valid(raw) {
		return &InvalidRawError{Len: len(raw), BadUTF8: true}
	}
	return nil
}

// AppendTime appends t as a JSON string in RFC 3339 with nanoseconds, in
// UTC.
func AppendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// AppendFloat appends f as a JSON number in the shortest form that
// round-trips at the given bit size (32 or 64), or as one of the strings
// "NaN", "Infinity", "-Infinity", which JSON numbers cannot express.
// Negative zero is -0.0, not encoding/json's -0: readers that type a JSON
// number by its spelling (Jackson, so Kafka Connect's JsonConverter, and
// Python's json) read -0 as the integer 0, losing the sign a float column
// keeps; -0.0 is also what Debezium writes.
func AppendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	case f == 0 && math.Signbit(f):
		return append(dst, "-0.0"...)
	}
	return AppendFloatText(dst, f, bits)
}

// AppendFloatText appends a finite f in the number form AppendFloat uses,
// but negative zero as -0 (a text key is not typed by its spelling, and
// keeping it keeps the partition of keys written before), and NaN, +Inf
// and -Inf as the bare words NaN, Infinity and -Infinity. It serves text
// renderings (message keys) that must agree with the JSON form.
func AppendFloatText(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	// The cut-offs are ECMAScript's number-to-string rule, the one
	// encoding/json follows, so every JSON reader prints the value back
	// the same way. float32 values are compared at float32 precision,
	// otherwise values next to the cut-offs would switch form.
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 32 {
			a := float32(abs)
			if a < 1e-6 || a >= 1e21 {
				format = 'e'
			}
		} else if abs < 1e-6 || abs >= 1e21 {
			format = 'e'
		}
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// strconv pads the exponent to two digits (1e-07); JSON readers
		// and encoding/json write 1e-7.
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// word is the first 8 bytes of s, little-endian: one load.
func word(s string) uint64 {
	_ = s[7] // one bounds check for the eight
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainWord reports whether the 8 bytes of w are all plain: ASCII, not a
// control character, quote or backslash. Testing a word at a time (the
// "has a zero byte" and "has a byte less than n" bit tricks) makes
// scanning long text faster than a byte at a time, which was most of
// what encoding a 1 KB text column cost.
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^('"'*ones), w^('\\'*ones)
	control := (w - 0x20*ones) &^ w
	zeros := (quote-ones)&^quote | (backslash-ones)&^backslash
	return (w|control|zeros)&highs == 0
}

// plain marks the ASCII bytes a JSON string holds as they are.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendStringMap appends m as a JSON object of strings, its keys in
// sorted order, so that the same map is always written the same way.
func AppendStringMap(dst []byte, m map[string]string) []byte {
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		dst = AppendString(dst, m[k])
	}
	return append(dst, '}')
}

// AppendString appends s as a JSON string, escaped as the package
// documentation describes (encoding/json's rules without HTML escaping,
// invalid UTF-8 bytes replaced by \ufffd).
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plainWord(word(s[i:i+8])) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendInteger appends v in decimal when it is one of Go's integer types,
// and reports whether it was. JSON numbers and the key text form write
// integers alike.
func AppendInteger(dst []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case uint64:
		return strconv.AppendUint(dst, x, 10), true
	}
	return dst, false
}

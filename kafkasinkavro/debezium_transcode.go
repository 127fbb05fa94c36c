package kafkasinkavro

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file writes a Debezium payload, the JSON kafkasink.DebeziumEncoder
// writes (its values in JsonConverter's forms: bytes in base64, NaN and
// infinities as "NaN" and "Infinity" strings), as the Avro binary
// encoding of its payloadNode tree, straight into the record's buffer
// without allocating. The JSON is the root encoder's own output: compact,
// well formed, its members in the schema's order; anything else is an
// error naming where it stopped, not a guess.

// transcoder reads one JSON document.
type transcoder struct {
	in  []byte
	pos int
}

// errPayload is the error for JSON the transcoder does not expect.
func (t *transcoder) errPayload(want string) error {
	end := min(t.pos+24, len(t.in))
	return fmt.Errorf("kafkasinkavro: the Debezium payload has %q at byte %d where %s was expected (a kafkasink.DebeziumEncoder the Avro schema was not made from?)",
		t.in[t.pos:end], t.pos, want)
}

func (t *transcoder) peek() byte {
	if t.pos < len(t.in) {
		return t.in[t.pos]
	}
	return 0
}

func (t *transcoder) expect(c byte) error {
	if t.peek() != c {
		return t.errPayload(strconv.QuoteRune(rune(c)))
	}
	t.pos++
	return nil
}

// value appends the JSON value at the cursor as n.
func (t *transcoder) value(dst []byte, n *payloadNode) ([]byte, error) {
	if t.peek() == 'n' {
		if !n.optional {
			return nil, t.errPayload("a value (the field is not optional)")
		}
		if err := t.literal("null"); err != nil {
			return nil, err
		}
		null, _ := n.unionBranches()
		return append(dst, null), nil
	}
	if n.optional {
		_, value := n.unionBranches()
		dst = append(dst, value)
	}
	switch n.kind {
	case nodeInt:
		v, err := t.integer()
		if err != nil {
			return nil, err
		}
		return appendLong(dst, v), nil
	case nodeFloat:
		f, err := t.float(32)
		if err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
	case nodeDouble:
		f, err := t.float(64)
		if err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case nodeBoolean:
		switch t.peek() {
		case 't':
			return append(dst, 1), t.literal("true")
		case 'f':
			return append(dst, 0), t.literal("false")
		}
		return nil, t.errPayload("a boolean")
	case nodeString:
		return t.str(dst)
	case nodeBytes:
		return t.bytes(dst)
	case nodeRecord:
		return t.record(dst, n)
	case nodeArray:
		return t.array(dst, n)
	}
	return nil, fmt.Errorf("kafkasinkavro: node kind %d", n.kind)
}

func (t *transcoder) literal(lit string) error {
	if !t.skip(lit) {
		return t.errPayload(lit)
	}
	return nil
}

// skip moves the cursor past lit, reporting whether the input has it
// there. Small enough to inline in the loops that match a member per
// field.
func (t *transcoder) skip(lit string) bool {
	end := t.pos + len(lit)
	if end > len(t.in) || string(t.in[t.pos:end]) != lit {
		return false
	}
	t.pos = end
	return true
}

// number returns the JSON number at the cursor.
func (t *transcoder) number() []byte {
	start := t.pos
	for t.pos < len(t.in) && isNumberByte(t.in[t.pos]) {
		t.pos++
	}
	return t.in[start:t.pos]
}

// isNumberByte reports whether c can be part of a JSON number.
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// integer reads the integer at the cursor. The root writes every
// integer with strconv (no sign but '-', no leading zeros): up to 19
// digits, which a uint64 holds, are read here; a number out of int64's
// range, or not an integer, goes to strconv, which refuses it.
func (t *transcoder) integer() (int64, error) {
	i := t.pos
	neg := i < len(t.in) && t.in[i] == '-'
	if neg {
		i++
	}
	start := i
	var u uint64
	for ; i < len(t.in) && i-start < 19; i++ {
		d := t.in[i] - '0'
		if d > 9 {
			break
		}
		u = u*10 + uint64(d)
	}
	if i > start && (i == len(t.in) || !isNumberByte(t.in[i])) {
		switch {
		case !neg && u <= math.MaxInt64:
			t.pos = i
			return int64(u), nil
		case neg && u <= -math.MinInt64:
			t.pos = i
			return -int64(u), nil
		}
	}
	at := t.pos
	num := t.number()
	v, err := strconv.ParseInt(unsafe.String(unsafe.SliceData(num), len(num)), 10, 64)
	if err != nil {
		t.pos = at
		return 0, t.errPayload("an integer")
	}
	return v, nil
}

// float reads a number as a float of bits (32: rounded once, to the
// float32 it was written from), or JsonConverter's "NaN", "Infinity" and
// "-Infinity".
func (t *transcoder) float(bits int) (float64, error) {
	if t.peek() == '"' {
		for _, special := range [...]struct {
			text string
			v    float64
		}{{`"NaN"`, math.NaN()}, {`"Infinity"`, math.Inf(1)}, {`"-Infinity"`, math.Inf(-1)}} {
			if t.literal(special.text) == nil {
				return special.v, nil
			}
		}
		return 0, t.errPayload("a number")
	}
	at := t.pos
	num := t.number()
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), bits)
	if err != nil {
		t.pos = at
		return 0, t.errPayload("a number")
	}
	return f, nil
}

// str appends the JSON string at the cursor as an Avro string. A
// string without escapes, nearly every one, is its own UTF-8 text (the
// root writes every other character as itself): found and copied whole.
func (t *transcoder) str(dst []byte) ([]byte, error) {
	if err := t.expect('"'); err != nil {
		return nil, err
	}
	rest := t.in[t.pos:]
	for end, c := range rest {
		if c == '"' {
			t.pos += end + 1
			return append(appendLong(dst, int64(end)), rest[:end]...), nil
		}
		if c == '\\' {
			break
		}
	}
	return t.escapedStr(dst)
}

// escapedStr appends the rest of the JSON string whose opening quote is
// before the cursor, decoding its escapes, in one pass: the text goes
// after room for the longest length it can have (the rest of the input's),
// whose prefix is then written in place, the text moved up when the
// prefix is shorter. The escapes the root writes most, \" and \\, are
// decoded here; the others by escape.
func (t *transcoder) escapedStr(dst []byte) ([]byte, error) {
	var prefix [binary.MaxVarintLen64]byte
	mark := len(dst)
	dst = append(dst, appendLong(prefix[:0], int64(len(t.in)-t.pos))...)
	text := len(dst)
	in := t.in
	for {
		run := t.pos
		for run < len(in) && in[run] != '"' && in[run] != '\\' {
			run++
		}
		dst = append(dst, in[t.pos:run]...)
		t.pos = run
		if run == len(in) {
			return nil, t.errPayload("the end of a string")
		}
		if in[run] == '"' {
			t.pos++
			break
		}
		if run+1 < len(in) && (in[run+1] == '"' || in[run+1] == '\\') {
			dst = append(dst, in[run+1])
			t.pos += 2
			continue
		}
		r, width, err := t.escape()
		if err != nil {
			return nil, err
		}
		dst = utf8.AppendRune(dst, r)
		t.pos += width
	}
	size := len(dst) - text
	length := appendLong(prefix[:0], int64(size))
	copy(dst[mark+len(length):], dst[text:])
	copy(dst[mark:], length)
	return dst[:mark+len(length)+size], nil
}

// escape decodes the escape sequence at the cursor (not moving it): the
// rune and the sequence's length. A surrogate pair is one rune.
func (t *transcoder) escape() (rune, int, error) {
	in := t.in[t.pos:]
	if len(in) < 2 {
		return 0, 0, t.errPayload("an escape sequence")
	}
	switch in[1] {
	case '"', '\\', '/':
		return rune(in[1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, ok := hex4(in[2:])
		if !ok {
			return 0, 0, t.errPayload(`a \u escape`)
		}
		if utf16.IsSurrogate(r) && len(in) >= 12 && in[6] == '\\' && in[7] == 'u' {
			if low, ok := hex4(in[8:]); ok {
				if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
					return pair, 12, nil
				}
			}
		}
		if utf16.IsSurrogate(r) {
			return utf8.RuneError, 6, nil
		}
		return r, 6, nil
	}
	return 0, 0, t.errPayload("an escape sequence")
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// bytes appends the base64 JSON string at the cursor (JsonConverter's
// form of bytes, standard alphabet, padded) as Avro bytes.
func (t *transcoder) bytes(dst []byte) ([]byte, error) {
	if err := t.expect('"'); err != nil {
		return nil, err
	}
	start := t.pos
	for t.pos < len(t.in) && t.in[t.pos] != '"' {
		t.pos++
	}
	if t.pos >= len(t.in) {
		return nil, t.errPayload("the end of a base64 string")
	}
	text := t.in[start:t.pos]
	t.pos++
	size := len(text) / 4 * 3
	if len(text) > 0 && text[len(text)-1] == '=' {
		size--
		if text[len(text)-2] == '=' {
			size--
		}
	}
	dst = appendLong(dst, int64(size))
	out, err := base64.StdEncoding.AppendDecode(dst, text)
	if err != nil || len(out)-len(dst) != size {
		t.pos = start
		return nil, t.errPayload("base64")
	}
	return out, nil
}

// record appends the JSON object at the cursor as n's record: its
// members must be n's fields, in order, each member's text the one
// payloadField.member holds.
func (t *transcoder) record(dst []byte, n *payloadNode) ([]byte, error) {
	if len(n.fields) == 0 {
		return dst, t.literal("{}")
	}
	for i := range n.fields {
		f := &n.fields[i]
		if !t.skip(f.member) {
			return nil, t.errPayload(f.member)
		}
		var err error
		if dst, err = t.value(dst, f.node); err != nil {
			return nil, err
		}
	}
	return dst, t.expect('}')
}

// array appends the JSON array at the cursor as one Avro block.
func (t *transcoder) array(dst []byte, n *payloadNode) ([]byte, error) {
	if err := t.expect('['); err != nil {
		return nil, err
	}
	if t.peek() == ']' {
		t.pos++
		return append(dst, 0), nil
	}
	count, err := t.countElements()
	if err != nil {
		return nil, err
	}
	dst = appendLong(dst, int64(count))
	for i := range count {
		if i > 0 {
			if err := t.expect(','); err != nil {
				return nil, err
			}
		}
		if dst, err = t.value(dst, n.items); err != nil {
			return nil, err
		}
	}
	if err := t.expect(']'); err != nil {
		return nil, err
	}
	return append(dst, 0), nil
}

// countElements counts the elements of the non-empty array whose first
// element is at the cursor, not moving it.
func (t *transcoder) countElements() (int, error) {
	depth, count, inString := 0, 1, false
	for i := t.pos; i < len(t.in); i++ {
		c := t.in[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return count, nil
			}
			depth--
		case ',':
			if depth == 0 {
				count++
			}
		}
	}
	return 0, errors.New("kafkasinkavro: the Debezium payload ends inside an array")
}

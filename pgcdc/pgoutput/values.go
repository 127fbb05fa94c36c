package pgoutput

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
)

// maxArrayDims is PostgreSQL's MAXDIM. A deeper array cannot come from the
// server, and the limit keeps a hostile input from recursing without bound.
const maxArrayDims = 6

// errSyntax is the cause of every value that does not parse for its type.
// Error messages never quote the value itself: row data may be personal or
// secret, and errors end up in logs.
var errSyntax = errors.New("invalid syntax")

// valueConverter turns the text (or binary) form of a column value into the
// Go value an Event carries. It is not safe for concurrent use because
// pgtype.Map is not.
type valueConverter struct {
	types *pgtype.Map

	// describe, when set, looks up a type pgx does not know in the
	// catalog; found is false when the catalog has no such type. resolve
	// uses it, and text converts the types it found as custom says.
	describe func(oid uint32) (t customType, found bool, err error)
	custom   map[uint32]customType
	// liveCatalog allows describe while values are converted, to catch
	// up with a type changed since it was described. The stream sets
	// it; the snapshot does not, as its connection is busy reading rows
	// then, and its values and catalog come from one snapshot anyway.
	liveCatalog bool
	// typeInfos are the declared types of Event.Relation, shared by the
	// relations of every table (see typeInfo).
	typeInfos map[typeKey]*kafkasink.TypeInfo
}

// customType is what text needs to know of a type that is not built in,
// from pg_type: domains convert as their base type, arrays element by
// element, composites attribute by attribute. Other types (enums, ranges,
// extension types) keep their text.
type customType struct {
	name      string // typname, for Event.Relation
	kind      byte   // typtype, for Event.Relation
	base      uint32 // a domain's base type; 0 for other types
	typmod    int32  // a domain's typtypmod: the modifier of its base type
	array     bool   // a true array type (typelem set, variable length)
	elem      uint32 // an array's element type
	delim     byte   // an array's element delimiter, its element type's typdelim
	composite bool
	attrs     []typeAttr // a composite's attributes, in order
	labels    []string   // an enum's labels in order, for Event.Relation
	// olderLayouts are attribute counts of values from before a change
	// of the composite, which keep their text.
	olderLayouts []int
}

// typeAttr is an attribute of a composite type.
type typeAttr struct {
	name string
	oid  uint32
}

// refs returns the types t is made of.
func (t customType) refs() []uint32 {
	switch {
	case t.base != 0:
		return []uint32{t.base}
	case t.array:
		return []uint32{t.elem}
	}
	refs := make([]uint32, len(t.attrs))
	for i, a := range t.attrs {
		refs[i] = a.oid
	}
	return refs
}

func newValueConverter() *valueConverter {
	return &valueConverter{types: pgtype.NewMap(), custom: make(map[uint32]customType)}
}

// resolve looks up oid, when pgx does not know it, and the types it is
// made of, and keeps what it finds for text. It looks again on every
// call, so a type changed since (an attribute added to a composite) is
// seen at the next Relation message or snapshot of a table using it; seen
// holds the types looked up in this round. Without describe it does
// nothing: such types keep their text.
func (c *valueConverter) resolve(oid uint32, seen map[uint32]bool) error {
	if c.describe == nil || seen[oid] {
		return nil
	}
	seen[oid] = true
	if _, ok := c.types.TypeForOID(oid); ok {
		return nil
	}
	t, found, err := c.describe(oid)
	if err != nil {
		return err
	}
	if !found {
		delete(c.custom, oid)
		return nil
	}
	if old, ok := c.custom[oid]; ok && (old.name != t.name || old.base != t.base || old.typmod != t.typmod || !slices.Equal(old.labels, t.labels)) {
		clear(c.typeInfos) // renamed, redefined or an enum label added: describe it anew
	}
	c.custom[oid] = t
	for _, ref := range t.refs() {
		if err := c.resolve(ref, seen); err != nil {
			return err
		}
	}
	return nil
}

// typeName names a type in error messages.
func (c *valueConverter) typeName(oid uint32, custom map[uint32]typeInfo) string {
	if t, ok := c.types.TypeForOID(oid); ok {
		return t.Name
	}
	if t, ok := custom[oid]; ok {
		return t.namespace + "." + t.name
	}
	return "oid " + strconv.FormatUint(uint64(oid), 10)
}

// text converts a value in PostgreSQL's text output format. Types without
// a listed conversion (enums, extension types, geometric types, ranges and
// the like) keep their text: it is exact, and a consumer that knows the
// type can parse it. Domains, arrays and composites that resolve found in
// the catalog convert through their base, element and attribute types.
func (c *valueConverter) text(oid uint32, src []byte) (any, error) {
	switch oid {
	case pgtype.BoolOID:
		switch string(src) {
		case "t":
			return true, nil
		case "f":
			return false, nil
		}
		return nil, errSyntax
	case pgtype.Int2OID:
		n, err := strconv.ParseInt(string(src), 10, 16)
		return int16(n), numErr(err)
	case pgtype.Int4OID:
		n, err := strconv.ParseInt(string(src), 10, 32)
		return int32(n), numErr(err)
	case pgtype.Int8OID:
		n, err := strconv.ParseInt(string(src), 10, 64)
		return n, numErr(err)
	case pgtype.OIDOID:
		n, err := strconv.ParseUint(string(src), 10, 32)
		return uint32(n), numErr(err)
	case pgtype.Float4OID:
		f, err := parseFloat(src, 32)
		return float32(f), err
	case pgtype.Float8OID:
		return parseFloat(src, 64)
	case pgtype.NumericOID:
		if !validNumeric(src) {
			return nil, errSyntax
		}
		return kafkasink.Decimal(src), nil
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.QCharOID:
		return string(src), nil
	case pgtype.UUIDOID:
		return parseUUID(src)
	case pgtype.JSONOID, pgtype.JSONBOID:
		if !json.Valid(src) {
			return nil, errSyntax
		}
		return json.RawMessage(bytes.Clone(src)), nil
	case pgtype.ByteaOID:
		return parseBytea(src)
	case pgtype.DateOID:
		return parseDate(src)
	case pgtype.TimestampOID:
		return parseTimestamp(src)
	case pgtype.TimestamptzOID:
		return parseTimestamptz(src)
	case pgtype.TimeOID, pgtype.TimetzOID, pgtype.IntervalOID:
		return string(src), nil
	}
	if t, ok := c.types.TypeForOID(oid); ok {
		if ac, ok := t.Codec.(*pgtype.ArrayCodec); ok && ac.ElementType != nil {
			delim := byte(',')
			if oid == pgtype.BoxArrayOID {
				// box is the one built-in type whose array delimiter is
				// not a comma: its own text contains commas.
				delim = ';'
			}
			elem := ac.ElementType.OID
			return parseArray(src, delim, func(b []byte) (any, error) { return c.text(elem, b) })
		}
	}
	if t, ok := c.custom[oid]; ok {
		switch {
		case t.base != 0:
			return c.text(t.base, src)
		case t.array:
			return parseArray(src, t.delim, func(b []byte) (any, error) { return c.text(t.elem, b) })
		case t.composite:
			return c.composite(oid, src)
		}
	}
	return string(src), nil
}

// composite converts a composite value's text into an object by
// attribute name. The text is the type's as of the change: pgoutput prints
// it with the catalog of that moment, and sends no new Relation message
// after an ALTER TYPE. So when the value does not fit the type as last
// described (another attribute count, or an attribute that does not parse
// for its type), the type is described again, when liveCatalog allows,
// and the value converted with that. A value that still has another
// attribute count is from before a change of the type (decoding lags
// behind the catalog): it keeps its text, and values with that count do
// not ask the catalog again.
func (c *valueConverter) composite(oid uint32, src []byte) (any, error) {
	fields, err := compositeFields(src)
	if err != nil {
		return nil, err
	}
	t := c.custom[oid]
	v, fits, err := c.compositeObject(t.attrs, fields)
	if fits && err == nil {
		return v, nil
	}
	if !c.liveCatalog || !fits && slices.Contains(t.olderLayouts, len(fields)) {
		if !fits {
			return string(src), nil
		}
		return nil, err
	}
	if err := c.resolve(oid, make(map[uint32]bool)); err != nil {
		return nil, &catalogError{err}
	}
	t = c.custom[oid]
	if v, fits, err = c.compositeObject(t.attrs, fields); !fits {
		t.olderLayouts = append(t.olderLayouts, len(fields))
		c.custom[oid] = t
		return string(src), nil
	}
	return v, err
}

// compositeObject converts the fields of a composite value by attrs; fits
// is false when their counts differ.
func (c *valueConverter) compositeObject(attrs []typeAttr, fields [][]byte) (v any, fits bool, err error) {
	if len(attrs) == 0 && len(fields) == 1 && fields[0] == nil {
		return map[string]any{}, true, nil // "()", a type without attributes
	}
	if len(fields) != len(attrs) {
		return nil, false, nil
	}
	out := make(map[string]any, len(attrs))
	for i, a := range attrs {
		if fields[i] == nil {
			out[a.name] = nil
			continue
		}
		v, err := c.text(a.oid, fields[i])
		if err != nil {
			return nil, true, fmt.Errorf("attribute %q: %w", a.name, err)
		}
		out[a.name] = v
	}
	return out, true, nil
}

// compositeFields splits a composite value's text, "(f1,f2,...)", into
// its fields, nil for NULL. A field is empty for NULL; otherwise it is the
// attribute's text, in double quotes when it is empty or holds a special
// character, with '"' and '\\' doubled or escaped by a backslash inside
// them.
func compositeFields(src []byte) ([][]byte, error) {
	if len(src) < 2 || src[0] != '(' || src[len(src)-1] != ')' {
		return nil, errSyntax
	}
	body := src[1 : len(src)-1]
	var fields [][]byte
	for i := 0; ; {
		var field []byte
		for i < len(body) && body[i] != ',' {
			switch b := body[i]; b {
			case '"':
				i++
				for {
					if i >= len(body) {
						return nil, errSyntax
					}
					if body[i] == '"' {
						if i+1 < len(body) && body[i+1] == '"' {
							field = append(field, '"')
							i += 2
							continue
						}
						i++
						break
					}
					if body[i] == '\\' {
						i++
						if i >= len(body) {
							return nil, errSyntax
						}
					}
					field = append(field, body[i])
					i++
				}
				if field == nil {
					field = []byte{} // "" is the empty string, not NULL
				}
			case '\\':
				if i+1 >= len(body) {
					return nil, errSyntax
				}
				field = append(field, body[i+1])
				i += 2
			default:
				field = append(field, b)
				i++
			}
		}
		fields = append(fields, field)
		if i == len(body) {
			return fields, nil
		}
		i++ // the comma
	}
}

// catalogError is a failure to read the catalog while converting a value.
// It is the catalog's failure, not the value's: the Decoder returns it
// unchanged (a lost connection is retryable) rather than as a DecodeError.
type catalogError struct{ err error }

func (e *catalogError) Error() string { return e.err.Error() }
func (e *catalogError) Unwrap() error { return e.err }

// binary converts a value in binary format. Types pgx can decode are decoded
// and re-rendered in text format, so that binary and text replication yield
// the same values; any other type keeps its raw bytes, because its binary
// form is only meaningful to code that knows the type.
func (c *valueConverter) binary(oid uint32, src []byte) (v any, err error) {
	switch oid {
	case pgtype.ByteaOID:
		return bytes.Clone(src), nil
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		// Their binary form is the text itself.
		return string(src), nil
	case pgtype.JSONOID:
		// pgx would unmarshal JSON into maps, losing key order and number
		// precision; the binary form of json is its text.
		return c.text(oid, src)
	case pgtype.NumericOID:
		// pgx goes through math/big, which takes seconds on a value with
		// a large weight or scale; the base-10000 digits convert to text
		// directly in linear time.
		txt, err := numericText(src)
		if err != nil {
			return nil, err
		}
		return kafkasink.Decimal(txt), nil
	case pgtype.JSONBOID:
		// jsonb's binary form is a version byte (1) and the text.
		if len(src) == 0 || src[0] != 1 {
			return nil, errors.New("unsupported jsonb binary version")
		}
		return c.text(oid, src[1:])
	}
	t, ok := c.types.TypeForOID(oid)
	if !ok || !t.Codec.FormatSupported(pgtype.BinaryFormatCode) {
		return bytes.Clone(src), nil
	}
	if ac, ok := t.Codec.(*pgtype.ArrayCodec); ok && ac.ElementType != nil {
		return c.binaryArray(ac.ElementType.OID, src)
	}
	// pgx validates lengths in its binary decoders, but a panic on input
	// it did not expect must not take the replication loop down with it.
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("pgx binary decoder failed: %v", r)
		}
	}()
	decoded, err := t.Codec.DecodeValue(c.types, oid, pgtype.BinaryFormatCode, src)
	if err != nil {
		return nil, err
	}
	switch f := decoded.(type) {
	case float32, float64:
		// pgx renders infinities as Go does ("+Inf"), not as the server.
		return f, nil
	case pgtype.InfinityModifier:
		// Infinite dates and timestamps, which pgx cannot re-encode.
		if f == pgtype.NegativeInfinity {
			return "-infinity", nil
		}
		return "infinity", nil
	}
	txt, err := c.types.Encode(oid, pgtype.TextFormatCode, decoded, nil)
	if err != nil {
		return nil, err
	}
	if oid == pgtype.TimeOID {
		// pgx pads the fraction to six digits; the server trims zeros.
		txt = trimFraction(txt)
	}
	return c.text(oid, txt)
}

// binaryArray decodes an array in binary format: dimension count, null
// flag, element type, then size and lower bound per dimension, then each
// element as a length (-1 for NULL) and its bytes. Elements go through
// binary, so arrays convert exactly as their elements do.
func (c *valueConverter) binaryArray(elemOID uint32, src []byte) (any, error) {
	r := wire{b: src}
	ndim := r.u32("array dimensions")
	r.u32("array null flag")
	got := r.u32("array element type")
	switch {
	case r.err != nil:
		return nil, r.err
	case got != elemOID:
		return nil, fmt.Errorf("array element type %d, want %d", got, elemOID)
	case ndim > maxArrayDims:
		return nil, errors.New("array has more than 6 dimensions")
	}
	dims := make([]int, ndim)
	total := 1
	for i := range dims {
		n := r.u32("array dimension size")
		r.u32("array lower bound")
		// Every element takes at least its 4-byte length, which bounds
		// the allocation below by the input's size.
		if r.err == nil && (n > uint32(len(src)) || total*int(n) > len(src)/4) {
			return nil, errors.New("array dimensions exceed the data")
		}
		dims[i] = int(n)
		total *= int(n)
	}
	if r.err != nil {
		return nil, r.err
	}
	if ndim == 0 {
		return []any{}, nil
	}
	var build func(dim int) ([]any, error)
	build = func(dim int) ([]any, error) {
		out := make([]any, dims[dim])
		for i := range out {
			if dim+1 < len(dims) {
				sub, err := build(dim + 1)
				if err != nil {
					return nil, err
				}
				out[i] = sub
				continue
			}
			n := r.u32("array element length")
			if r.err != nil {
				return nil, r.err
			}
			if n == math.MaxUint32 {
				continue // NULL
			}
			b := r.take("array element", int64(n))
			if r.err != nil {
				return nil, r.err
			}
			v, err := c.binary(elemOID, b)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	out, err := build(0)
	if err != nil {
		return nil, err
	}
	if len(r.b) != 0 {
		return nil, errors.New("unexpected bytes after the array")
	}
	return out, nil
}

// numericText renders numeric's binary form as the server's text output:
// digit count, weight of the first base-10000 digit, sign, display scale,
// then the digits.
func numericText(src []byte) ([]byte, error) {
	if len(src) < 8 {
		return nil, errors.New("numeric header too short")
	}
	ndigits := int(binary.BigEndian.Uint16(src))
	weight := int(int16(binary.BigEndian.Uint16(src[2:])))
	sign := binary.BigEndian.Uint16(src[4:])
	dscale := int(binary.BigEndian.Uint16(src[6:]))
	if len(src) != 8+2*ndigits {
		return nil, errors.New("numeric digit count does not match its length")
	}
	switch sign {
	case 0x0000, 0x4000:
	case 0xC000:
		return []byte("NaN"), nil
	case 0xD000:
		return []byte("Infinity"), nil
	case 0xF000:
		return []byte("-Infinity"), nil
	default:
		return nil, errors.New("invalid numeric sign")
	}
	if dscale > 0x3FFF {
		return nil, errors.New("numeric display scale out of range")
	}
	digit := func(i int) int {
		if i < 0 || i >= ndigits {
			return 0
		}
		return int(binary.BigEndian.Uint16(src[8+2*i:]))
	}
	for i := range ndigits {
		if digit(i) > 9999 {
			return nil, errors.New("numeric digit out of range")
		}
	}
	out := make([]byte, 0, 4*max(weight+1, 1)+dscale+2)
	if sign == 0x4000 {
		out = append(out, '-')
	}
	if weight < 0 {
		out = append(out, '0')
	}
	for i := 0; i <= weight; i++ {
		if i == 0 {
			out = strconv.AppendInt(out, int64(digit(0)), 10)
		} else {
			out = fmt.Appendf(out, "%04d", digit(i))
		}
	}
	if dscale > 0 {
		out = append(out, '.')
		start := len(out)
		for i := weight + 1; len(out)-start < dscale; i++ {
			out = fmt.Appendf(out, "%04d", digit(i))
		}
		out = out[:start+dscale]
	}
	return out, nil
}

// trimFraction removes trailing zeros from the fraction of a time of day,
// and the point when nothing is left of it.
func trimFraction(s []byte) []byte {
	dot := bytes.IndexByte(s, '.')
	if dot < 0 {
		return s
	}
	end := len(s)
	for end > dot+1 && s[end-1] == '0' {
		end--
	}
	if end == dot+1 {
		end = dot
	}
	return s[:end]
}

// numErr drops the input from strconv's errors (see errSyntax).
func numErr(err error) error {
	if err == nil {
		return nil // before errors.As, whose target escapes: this is the hot path
	}
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

// parseFloat parses PostgreSQL's float output: decimal or exponent notation,
// "NaN", "Infinity" and "-Infinity". strconv.ParseFloat accepts more (hex
// floats, underscores, "inf"), which the server never sends, so those are
// refused as malformed.
func parseFloat(src []byte, bits int) (float64, error) {
	switch string(src) {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	for _, b := range src {
		if !(b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E') {
			return 0, errSyntax
		}
	}
	f, err := strconv.ParseFloat(string(src), bits)
	return f, numErr(err)
}

// validNumeric reports whether src is numeric's text output: an optional
// minus, digits, an optional fraction, or one of the special values.
func validNumeric(src []byte) bool {
	switch string(src) {
	case "NaN", "Infinity", "-Infinity":
		return true
	}
	i := 0
	if len(src) > 0 && src[0] == '-' {
		i++
	}
	start := i
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	if i == start {
		return false
	}
	if i < len(src) && src[i] == '.' {
		i++
		start = i
		for i < len(src) && isDigit(src[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(src)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// parseUUID checks the canonical 8-4-4-4-12 form and lower-cases it.
func parseUUID(src []byte) (any, error) {
	if len(src) != 36 {
		return nil, errSyntax
	}
	out := make([]byte, 36)
	for i, b := range src {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if b != '-' {
				return nil, errSyntax
			}
		case isDigit(b) || b >= 'a' && b <= 'f':
		case b >= 'A' && b <= 'F':
			b += 'a' - 'A'
		default:
			return nil, errSyntax
		}
		out[i] = b
	}
	return string(out), nil
}

// parseBytea decodes bytea's hex output ("\x0102") and, for servers set to
// bytea_output = escape, the escape format (backslash-octal escapes).
func parseBytea(src []byte) (any, error) {
	if len(src) >= 2 && src[0] == '\\' && src[1] == 'x' {
		out := make([]byte, hex.DecodedLen(len(src)-2))
		if _, err := hex.Decode(out, src[2:]); err != nil {
			return nil, errors.New("invalid hex digits")
		}
		return out, nil
	}
	out := make([]byte, 0, len(src))
	for i := 0; i < len(src); i++ {
		b := src[i]
		if b != '\\' {
			out = append(out, b)
			continue
		}
		switch {
		case i+1 < len(src) && src[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(src) && isOctal(src[i+1]) && isOctal(src[i+2]) && isOctal(src[i+3]) && src[i+1] <= '3':
			out = append(out, (src[i+1]-'0')<<6|(src[i+2]-'0')<<3|(src[i+3]-'0'))
			i += 3
		default:
			return nil, errors.New("invalid escape")
		}
	}
	return out, nil
}

func isOctal(b byte) bool { return b >= '0' && b <= '7' }

// dateParts is a calendar date with an astronomical year (1 BC is year 0).
type dateParts struct{ year, month, day int }

// cutDate parses the ISO date at the start of s: at least four year
// digits, month and day. It returns the rest of s.
func cutDate(s []byte) (dateParts, []byte, bool) {
	var d dateParts
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i < 4 || i > 9 || len(s) < i+6 || s[i] != '-' || s[i+3] != '-' {
		return d, nil, false
	}
	d.year, _ = strconv.Atoi(string(s[:i]))
	var ok1, ok2 bool
	d.month, ok1 = twoDigits(s[i+1:])
	d.day, ok2 = twoDigits(s[i+4:])
	if !ok1 || !ok2 || d.month < 1 || d.month > 12 || d.day < 1 || d.day > 31 {
		return d, nil, false
	}
	return d, s[i+6:], true
}

func twoDigits(s []byte) (int, bool) {
	if len(s) < 2 || !isDigit(s[0]) || !isDigit(s[1]) {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

// cutEra removes PostgreSQL's " BC" suffix and turns the year astronomical.
func cutEra(s []byte, d *dateParts) []byte {
	if bytes.HasSuffix(s, []byte(" BC")) {
		d.year = 1 - d.year
		return s[:len(s)-3]
	}
	return s
}

// appendISODate writes d as ISO 8601 does: four digits at least, and a minus
// sign for years before 1 BC (year 0).
func appendISODate(dst []byte, d dateParts) []byte {
	y := d.year
	if y < 0 {
		dst = append(dst, '-')
		y = -y
	}
	ys := strconv.Itoa(y)
	for i := len(ys); i < 4; i++ {
		dst = append(dst, '0')
	}
	dst = append(dst, ys...)
	return fmt.Appendf(dst, "-%02d-%02d", d.month, d.day)
}

// parseDate returns the date as "YYYY-MM-DD" text: a date is a calendar day,
// not an instant, so it has no honest time.Time.
func parseDate(src []byte) (any, error) {
	switch string(src) {
	case "infinity", "-infinity":
		return string(src), nil
	}
	d, rest, ok := cutDate(src)
	if !ok {
		return nil, errSyntax
	}
	if rest = cutEra(rest, &d); len(rest) != 0 {
		return nil, errSyntax
	}
	return string(appendISODate(nil, d)), nil
}

// clock is a time of day with its fraction in nanoseconds.
type clock struct{ hour, min, sec, nsec int }

// cutClock parses "HH:MM:SS[.ffffff]" at the start of s and returns the
// rest, plus the text it consumed so that output can keep it verbatim.
func cutClock(s []byte) (clock, []byte, []byte, bool) {
	var c clock
	var ok1, ok2, ok3 bool
	if len(s) < 8 || s[2] != ':' || s[5] != ':' {
		return c, nil, nil, false
	}
	c.hour, ok1 = twoDigits(s)
	c.min, ok2 = twoDigits(s[3:])
	c.sec, ok3 = twoDigits(s[6:])
	if !ok1 || !ok2 || !ok3 || c.hour > 23 || c.min > 59 || c.sec > 59 {
		return c, nil, nil, false
	}
	i := 8
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) && i-start < 9 {
			c.nsec = c.nsec*10 + int(s[i]-'0')
			i++
		}
		if i == start {
			return c, nil, nil, false
		}
		for n := i - start; n < 9; n++ {
			c.nsec *= 10
		}
	}
	return c, s[:i], s[i:], true
}

func isInfinity(src []byte) bool {
	return string(src) == "infinity" || string(src) == "-infinity"
}

// cutTimestamp cuts the "date time" that both timestamp types print, with
// an era after the date when there is one, and returns the rest (the
// offset of a timestamptz). clk is the clock's text.
func cutTimestamp(src []byte) (d dateParts, c clock, clk, rest []byte, ok bool) {
	d, rest, ok = cutDate(src)
	if !ok || len(rest) == 0 || rest[0] != ' ' {
		return d, c, nil, nil, false
	}
	rest = cutEra(rest[1:], &d)
	c, clk, rest, ok = cutClock(rest)
	return d, c, clk, rest, ok
}

// parseTimestamp returns a timestamp without time zone as ISO text,
// "2006-01-02T15:04:05.999999": it names a wall-clock reading in no
// particular zone, so turning it into an instant would invent a zone.
func parseTimestamp(src []byte) (any, error) {
	if isInfinity(src) {
		return string(src), nil
	}
	d, _, clk, rest, ok := cutTimestamp(src)
	if !ok || len(rest) != 0 {
		return nil, errSyntax
	}
	out := appendISODate(make([]byte, 0, len(src)+1), d)
	out = append(out, 'T')
	return string(append(out, clk...)), nil
}

// parseTimestamptz returns a timestamp with time zone as a time.Time in UTC.
// PostgreSQL prints it in the session's zone with an offset of hours, and
// minutes and seconds when not zero ("+05:30", "-00:01:15" for local mean
// time); pgx's re-rendered binary values end in "Z".
func parseTimestamptz(src []byte) (any, error) {
	if isInfinity(src) {
		return string(src), nil
	}
	d, c, _, rest, ok := cutTimestamp(src)
	if !ok {
		return nil, errSyntax
	}
	offset, ok := parseOffset(rest)
	if !ok {
		return nil, errSyntax
	}
	t := time.Date(d.year, time.Month(d.month), d.day, c.hour, c.min, c.sec, c.nsec, time.UTC)
	return t.Add(-time.Duration(offset) * time.Second), nil
}

// parseOffset parses "Z", "+HH", "+HH:MM" or "+HH:MM:SS" into seconds east
// of UTC.
func parseOffset(s []byte) (int, bool) {
	if string(s) == "Z" {
		return 0, true
	}
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') {
		return 0, false
	}
	sign := 1
	if s[0] == '-' {
		sign = -1
	}
	s = s[1:]
	total := 0
	for i, mult := range []int{3600, 60, 1} {
		v, ok := twoDigits(s)
		if !ok || (i > 0 && v > 59) {
			return 0, false
		}
		total += v * mult
		s = s[2:]
		if len(s) == 0 {
			return sign * total, true
		}
		if s[0] != ':' {
			return 0, false
		}
		s = s[1:]
	}
	return 0, false
}

// parseArray parses an array's text output into []any, nested for each
// dimension; NULL elements are nil and the others go through elem. The
// optional "[lo:hi]=" prefix, which the server prints for lower bounds other
// than 1, is dropped: a slice has no lower bound.
func parseArray(src []byte, delim byte, elem func([]byte) (any, error)) (any, error) {
	if len(src) > 0 && src[0] == '[' {
		eq := bytes.IndexByte(src, '=')
		if eq < 0 || !validDims(src[:eq]) {
			return nil, errSyntax
		}
		src = src[eq+1:]
	}
	p := arrayParser{src: src, delim: delim, elem: elem}
	v, err := p.array(1)
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.src) {
		return nil, errSyntax
	}
	return v, nil
}

// validDims checks an array dimension decoration such as "[0:2][1:3]".
func validDims(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for len(s) > 0 {
		end := bytes.IndexByte(s, ']')
		if s[0] != '[' || end < 0 {
			return false
		}
		lo, hi, ok := bytes.Cut(s[1:end], []byte{':'})
		if !ok {
			return false
		}
		if _, err := strconv.Atoi(string(lo)); err != nil {
			return false
		}
		if _, err := strconv.Atoi(string(hi)); err != nil {
			return false
		}
		s = s[end+1:]
	}
	return true
}

type arrayParser struct {
	src   []byte
	pos   int
	delim byte
	elem  func([]byte) (any, error)
	buf   []byte
}

func (p *arrayParser) array(depth int) ([]any, error) {
	if depth > maxArrayDims {
		return nil, errors.New("array has more than 6 dimensions")
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		return nil, errSyntax
	}
	p.pos++
	out := []any{}
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return out, nil
	}
	for {
		if p.pos >= len(p.src) {
			return nil, errSyntax
		}
		var v any
		var err error
		switch p.src[p.pos] {
		case '{':
			v, err = p.array(depth + 1)
		case '"':
			v, err = p.quoted()
		default:
			v, err = p.unquoted()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if p.pos >= len(p.src) {
			return nil, errSyntax
		}
		switch p.src[p.pos] {
		case p.delim:
			p.pos++
		case '}':
			p.pos++
			return out, nil
		default:
			return nil, errSyntax
		}
	}
}

func (p *arrayParser) quoted() (any, error) {
	p.pos++ // opening quote
	p.buf = p.buf[:0]
	for p.pos < len(p.src) {
		b := p.src[p.pos]
		p.pos++
		switch b {
		case '\\':
			if p.pos >= len(p.src) {
				return nil, errSyntax
			}
			p.buf = append(p.buf, p.src[p.pos])
			p.pos++
		case '"':
			return p.elem(p.buf)
		default:
			p.buf = append(p.buf, b)
		}
	}
	return nil, errSyntax
}

func (p *arrayParser) unquoted() (any, error) {
	start := p.pos
	for p.pos < len(p.src) {
		b := p.src[p.pos]
		if b == p.delim || b == '}' {
			break
		}
		if b == '{' || b == '"' || b == '\\' {
			return nil, errSyntax
		}
		p.pos++
	}
	tok := p.src[start:p.pos]
	if len(tok) == 0 {
		return nil, errSyntax
	}
	if len(tok) == 4 && bytes.EqualFold(tok, []byte("NULL")) {
		return nil, nil
	}
	return p.elem(tok)
}

package debezium

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/encoding/jsonw"
)

// Encoder's value forms: how a column value is written for its
// declared type (Event.Relation), as Debezium 3.6.1's PostgreSQL connector
// writes it with Kafka Connect's JsonConverter, under the options Debezium
// has for them. The forms were taken from the connector's records in
// testdata/debezium.

// DecimalMode is Debezium's decimal.handling.mode: how numeric and money
// values are written.
type DecimalMode uint8

const (
	// DecimalPrecise ("precise", the default) writes Connect's Decimal:
	// the base64 of the unscaled value's big-endian two's-complement
	// bytes, for numeric with a declared scale and money (scale 2);
	// {"scale":s,"value":"<base64>"} (io.debezium.data.VariableScaleDecimal)
	// for numeric without. NaN and ±Infinity are null.
	DecimalPrecise DecimalMode = iota
	// DecimalDouble ("double") writes a JSON number, which rounds values
	// a float64 cannot hold.
	DecimalDouble
	// DecimalString ("string") writes the plain decimal text; NaN and
	// ±Infinity are "NAN", "POSITIVE_INFINITY", "NEGATIVE_INFINITY".
	DecimalString
)

// TimePrecisionMode is Debezium's time.precision.mode: how date, time and
// timestamp (without time zone) values are written. timetz and
// timestamptz are ISO strings in UTC in every mode.
type TimePrecisionMode uint8

const (
	// TimeAdaptive ("adaptive", the default): a date is days since
	// 1970-01-01; a time or timestamp of fractional precision 0 to 3 is
	// milliseconds (since midnight, since the epoch), of 4 to 6
	// microseconds.
	TimeAdaptive TimePrecisionMode = iota
	// TimeAdaptiveTimeMicroseconds ("adaptive_time_microseconds"): as
	// adaptive, but a time is always microseconds.
	TimeAdaptiveTimeMicroseconds
	// TimeConnect ("connect"): Kafka Connect's own types: days, and
	// milliseconds for times and timestamps whatever their precision.
	TimeConnect
	// TimeIsostring ("isostring"): ISO 8601 strings ending in Z:
	// "2024-02-29Z", "13:45:59.123Z", "2024-02-29T13:45:59.123456Z".
	TimeIsostring
)

// IntervalMode is Debezium's interval.handling.mode.
type IntervalMode uint8

const (
	// IntervalNumeric ("numeric", the default) writes microseconds, a
	// month counted as 30.4375 days and a year as 12 months, as Debezium
	// does; a value beyond the int64 range is clamped to it.
	IntervalNumeric IntervalMode = iota
	// IntervalString ("string") writes an ISO 8601 duration with every
	// part: "P1Y2M3DT4H5M6.789S".
	IntervalString
)

// BinaryMode is Debezium's binary.handling.mode: how bytea values are
// written. The bytes of bit(n) and varbit values are not bytea to
// Debezium (their schema is io.debezium.data.Bits): they are standard
// base64 in every mode.
type BinaryMode uint8

const (
	// BinaryBytes ("bytes", the default): JsonConverter writes bytes as
	// standard base64.
	BinaryBytes BinaryMode = iota
	// BinaryBase64 ("base64"): a standard base64 string, the same text.
	BinaryBase64
	// BinaryBase64URLSafe ("base64-url-safe"): URL-safe base64, padded.
	BinaryBase64URLSafe
	// BinaryHex ("hex"): lower-case hexadecimal.
	BinaryHex
)

var (
	decimalModeNames   = [...]string{DecimalPrecise: "precise", DecimalDouble: "double", DecimalString: "string"}
	timePrecisionNames = [...]string{TimeAdaptive: "adaptive", TimeAdaptiveTimeMicroseconds: "adaptive_time_microseconds", TimeConnect: "connect", TimeIsostring: "isostring"}
	intervalModeNames  = [...]string{IntervalNumeric: "numeric", IntervalString: "string"}
	binaryModeNames    = [...]string{BinaryBytes: "bytes", BinaryBase64: "base64", BinaryBase64URLSafe: "base64-url-safe", BinaryHex: "hex"}
)

// String returns the mode's Debezium name.
func (m DecimalMode) String() string { return modeName(decimalModeNames[:], int(m)) }

// String returns the mode's Debezium name.
func (m TimePrecisionMode) String() string { return modeName(timePrecisionNames[:], int(m)) }

// String returns the mode's Debezium name.
func (m IntervalMode) String() string { return modeName(intervalModeNames[:], int(m)) }

// String returns the mode's Debezium name.
func (m BinaryMode) String() string { return modeName(binaryModeNames[:], int(m)) }

func modeName(names []string, m int) string {
	if m < len(names) {
		return names[m]
	}
	return "invalid(" + strconv.Itoa(m) + ")"
}

// ParseDecimalMode returns the DecimalMode Debezium names name.
func ParseDecimalMode(name string) (DecimalMode, bool) {
	i, ok := parseMode(decimalModeNames[:], name)
	return DecimalMode(i), ok
}

// ParseTimePrecisionMode returns the TimePrecisionMode Debezium names name.
func ParseTimePrecisionMode(name string) (TimePrecisionMode, bool) {
	i, ok := parseMode(timePrecisionNames[:], name)
	return TimePrecisionMode(i), ok
}

// ParseIntervalMode returns the IntervalMode Debezium names name.
func ParseIntervalMode(name string) (IntervalMode, bool) {
	i, ok := parseMode(intervalModeNames[:], name)
	return IntervalMode(i), ok
}

// ParseBinaryMode returns the BinaryMode Debezium names name.
func ParseBinaryMode(name string) (BinaryMode, bool) {
	i, ok := parseMode(binaryModeNames[:], name)
	return BinaryMode(i), ok
}

func parseMode(names []string, name string) (int, bool) {
	for i, n := range names {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// valueProblems lists the value options of d that are out of range, for
// Config validation.
func (d Encoder) valueProblems() []string {
	var out []string
	check := func(field, property string, m int, names []string) {
		if m >= len(names) {
			out = append(out, "Encoder: DebeziumEncoder."+field+" ("+property+") is "+strconv.Itoa(m)+
				", which is not a mode: use one of "+strings.Join(names, ", ")+" (the "+field+" constants)")
		}
	}
	check("DecimalHandling", "decimal.handling.mode", int(d.DecimalHandling), decimalModeNames[:])
	check("TimePrecision", "time.precision.mode", int(d.TimePrecision), timePrecisionNames[:])
	check("IntervalHandling", "interval.handling.mode", int(d.IntervalHandling), intervalModeNames[:])
	check("BinaryHandling", "binary.handling.mode", int(d.BinaryHandling), binaryModeNames[:])
	return out
}

// writeRow writes a row image, with schemas those of e's table version
// (nil without a Relation). With a Relation it writes every column
// of the relation in table order: an unchanged TOAST column is the
// placeholder, and composite columns are left out, as Debezium leaves them
// out. A column a before image lacks (the non-key columns of a delete's
// old key under REPLICA IDENTITY DEFAULT) is null, as in Debezium's
// record; one an after image lacks is an error, as is a row column the
// Relation does not list: writing null for a value the event does not
// carry, or leaving out one it does, would pass a wrong row for the row.
// Without a Relation (events built by hand) it writes the row's columns
// in their forms for JSONEncoder.
func (d *Encoder) writeRow(w *connectWriter, e *kafkasink.Event, schemas *debeziumSchemas, row kafkasink.Row, before bool) error {
	if row == nil {
		w.null()
		return nil
	}
	if e.Relation == nil { // JSON only: AppendAvro requires a Relation
		var err error
		w.buf, err = kafkasink.AppendJSONRow(w.buf, e, row)
		return err
	}
	w.beginStruct()
	first := true
	next := 0  // row is in table order: where the next column should be
	found := 0 // the row's columns the Relation lists
	for i := range e.Relation.Columns {
		ci := &e.Relation.Columns[i]
		var c *kafkasink.Column
		if next < len(row) && row[next].Name == ci.Name {
			c = &row[next]
			next++
		} else if j := columnIndex(row, ci.Name); j >= 0 {
			c = &row[j]
		}
		if c != nil {
			found++
		}
		if d.leavesOut(ci.Type) {
			continue
		}
		t := declaredBase(ci.Type)
		if c == nil && !before {
			return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: ci.Name, Err: errAfterLacksColumn}
		}
		w.member(schemas.members[i], first)
		first = false
		switch {
		case c == nil || c.Value == nil && !c.Unchanged:
			// The default Debezium declares, in place of NULL, as
			// JsonConverter writes it: with MatchDebeziumLosses, and for
			// a NOT NULL column whatever the options (see declaredDefault).
			if d.MatchDebeziumLosses || ci.NotNull {
				if def := schemas.defaults[i]; def.json != nil {
					w.precomputed(def.json, def.avro)
					break
				}
			}
			w.null()
		case c.Unchanged:
			d.writeUnchanged(w, ci.Type)
		default:
			if err := d.writeTyped(w, t, c.Value, pathOf(e)); err != nil {
				return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: c.Name, Err: err}
			}
		}
		if err := w.failed(); err != nil {
			return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: ci.Name, Err: err}
		}
	}
	if found < len(row) {
		for _, c := range row {
			if _, ok := e.Relation.Column(c.Name); !ok {
				return &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: c.Name, Err: errColumnNotInRelation}
			}
		}
	}
	w.endStruct()
	return nil
}

// columnIndex returns the index of the column named name in row, or -1.
func columnIndex(row kafkasink.Row, name string) int {
	for i := range row {
		if row[i].Name == name {
			return i
		}
	}
	return -1
}

var (
	errAfterLacksColumn = errors.New("DebeziumEncoder: the after image has no such column, which Event.Relation lists: " +
		"an after image must carry every column of the Relation (an unchanged TOAST column with Column.Unchanged set), " +
		"as pgcdc's events do; Debezium's record would claim the column is NULL")
	errColumnNotInRelation = errors.New("DebeziumEncoder: the row has this column but Event.Relation does not list it: " +
		"the Relation must describe the columns of the table the row was read from, as pgcdc's events do; " +
		"Debezium's record would leave the value out")
)

// leavesOut reports whether a column of declared type t is left out of
// rows and their schemas: a composite, which Debezium leaves out, and
// with MatchDebeziumLosses an array Debezium 3.6.1 leaves out (its
// PostgreSQL connector has no converter for it): of money, interval,
// varbit, point or xml, or of a domain (the workload's rare_arrays).
// Without MatchDebeziumLosses those arrays are written, a deliberate
// deviation.
func (d *Encoder) leavesOut(t *kafkasink.TypeInfo) bool {
	if b := declaredBase(t); b != nil && b.Kind == 'c' {
		return true
	}
	if !d.MatchDebeziumLosses || t == nil || t.Elem == nil {
		return false
	}
	if t.Elem.Base != nil {
		return true
	}
	switch t.Elem.Name {
	case "money", "interval", "varbit", "point", "xml":
		return true
	}
	return false
}

// declaredBase returns t, or the base type of a domain, through domains
// over domains.
func declaredBase(t *kafkasink.TypeInfo) *kafkasink.TypeInfo {
	for t != nil && t.Base != nil {
		t = t.Base
	}
	return t
}

// writeTyped writes v, a non-null value of declared type t, in
// Debezium's form. A value it cannot write in that form, of a Go type
// other than the one pgcdc gives the type or a text that is not
// PostgreSQL's output under the settings pgcdc pins, is an error
// (valueFormError): written in another form, a Debezium reader would
// misread it (a money text decoded as a base64 Decimal).
func (d *Encoder) writeTyped(w *connectWriter, t *kafkasink.TypeInfo, v any, path readPath) error {
	t = declaredBase(t)
	if t == nil {
		return writeValue(w, v)
	}
	if t.Elem != nil {
		if a, ok := v.([]any); ok {
			return d.writeArray(w, declaredBase(t.Elem), a)
		}
		return valueFormError(t, v)
	}
	s, isText := v.(string)
	ok := false
	switch t.Name {
	case "numeric":
		if n, isDecimal := v.(kafkasink.Decimal); isDecimal {
			ok = d.writeNumeric(w, string(n), t.Modifier)
		}
	case "money":
		if isText {
			ok = d.writeMoney(w, s)
		}
	case "date":
		if isText {
			ok = d.writeDate(w, s, path)
		}
	case "time":
		if isText {
			ok = d.writeTime(w, s, t.Modifier)
		}
	case "timetz":
		if isText {
			ok = writeTimetz(w, s)
		}
	case "timestamp":
		if isText {
			ok = d.writeTimestamp(w, s, t.Modifier)
		}
	case "timestamptz":
		if ts, isTime := v.(time.Time); isTime {
			writeTimestamptz(w, ts)
			ok = true
		} else if isText && isInfinity(s) {
			// Debezium writes PostgreSQL's text.
			w.text(s)
			ok = true
		}
	case "interval":
		if isText {
			ok = d.writeInterval(w, s)
		}
	case "bit", "varbit":
		if isText {
			ok = writeBits(w, s, t.Name == "bit" && t.Modifier == 1)
		}
	case "bytea":
		if b, isBytes := v.([]byte); isBytes {
			d.writeBinary(w, b)
			ok = true
		}
	case "point":
		if isText {
			ok = writePoint(w, s)
		}
	case "hstore":
		if isText {
			ok = writeHstore(w, s)
		}
	case "name":
		if d.MatchDebeziumLosses && path == readStreamed {
			w.null()
			return nil
		}
		return writeValue(w, v)
	default:
		return writeValue(w, v)
	}
	if !ok {
		return valueFormError(t, v)
	}
	return nil
}

func isInfinity(s string) bool { return s == "infinity" || s == "-infinity" }

// valueFormError says that v, of declared type t, is not in the form
// Encoder reads that type from, which it names, and what to do.
// A text is quoted with each digit shown as '#', which shows its form (a
// locale's money, another IntervalStyle) but not the value: row data may
// be confidential, and errors end up in logs and dead-letter headers.
func valueFormError(t *kafkasink.TypeInfo, v any) error {
	var given string
	switch v := v.(type) {
	case string:
		given = "the text " + maskDigits(v)
	case kafkasink.Decimal:
		given = "the kafkasink.Decimal " + maskDigits(string(v))
	default:
		return fmt.Errorf("DebeziumEncoder cannot write a Go %T, given for a value of type %s, in Debezium's form: it reads that type from %s, as pgcdc gives it",
			v, t.Name, debeziumValueForm(t))
	}
	msg := fmt.Sprintf("DebeziumEncoder cannot write %s, given for a value of type %s, in Debezium's form: it reads that type from %s, as pgcdc gives it",
		given, t.Name, debeziumValueForm(t))
	if setting := debeziumTextSetting(t); setting != "" {
		msg += "; pgcdc.Run pins " + setting + " on its connections, and a pgcdc.Decoder on a connection of your own needs the same (a startup parameter, e.g. options=-c " + setting + ")"
	}
	return errors.New(msg + "; if PostgreSQL printed this text under the settings pgcdc pins, please report it as a kafkasink issue")
}

// debeziumTextSetting is the server setting a type's text depends on,
// which pgcdc pins, or "".
func debeziumTextSetting(t *kafkasink.TypeInfo) string {
	switch t.Name {
	case "money":
		return "lc_monetary=C"
	case "interval":
		return "IntervalStyle=postgres"
	}
	return ""
}

// debeziumValueForm names the form Encoder reads a value of type
// t from.
func debeziumValueForm(t *kafkasink.TypeInfo) string {
	if t.Elem != nil {
		return "a []any of its elements"
	}
	switch t.Name {
	case "numeric":
		return `a kafkasink.Decimal of PostgreSQL's numeric text ("-123.45", "NaN", "Infinity")`
	case "money":
		return `a string of PostgreSQL's money text with two decimals ("-$1,234.56")`
	case "date":
		return `a string "2006-01-02" ("-0043-03-15" for 44 BC), "infinity" or "-infinity"`
	case "time":
		return `a string "15:04:05.999999"`
	case "timetz":
		return `a string "15:04:05.999999+05:30"`
	case "timestamp":
		return `a string "2006-01-02T15:04:05.999999", "infinity" or "-infinity"`
	case "timestamptz":
		return `a time.Time, or a string "infinity" or "-infinity"`
	case "interval":
		return `a string of PostgreSQL's interval text ("1 year 2 mons 3 days 04:05:06.789")`
	case "bit", "varbit":
		return `a string of 0s and 1s`
	case "bytea":
		return "a []byte"
	case "point":
		return `a string "(x,y)"`
	case "hstore":
		return `a string of PostgreSQL's hstore text ("\"a\"=>\"1\", \"b\"=>NULL"), as pgcdc gives it in text format, not binary`
	}
	return "its JSON form"
}

// maskDigits quotes s, cut to 64 bytes, with each ASCII digit replaced
// by '#', and says so when it replaced any.
func maskDigits(s string) string {
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:64], "") + "..."
	}
	b := []byte(s)
	masked := false
	for i, c := range b {
		if c >= '0' && c <= '9' {
			b[i], masked = '#', true
		}
	}
	if masked {
		return strconv.Quote(string(b)) + " (digits shown as #)"
	}
	return strconv.Quote(string(b))
}

// writeArray writes an array of element type elem. Debezium writes a
// numeric array holding NaN or ±Infinity as null, in every decimal mode
// (double too, where a scalar NaN is "NaN"). Arrays of more than one
// dimension are written nested, each element in its form: Debezium
// writes each inner array as null, losing the values (a documented
// deviation), which NullNestedArrays and MatchDebeziumLosses reproduce.
func (d *Encoder) writeArray(w *connectWriter, elem *kafkasink.TypeInfo, a []any) error {
	if elem != nil && elem.Name == "numeric" && hasSpecialNumeric(a) {
		w.null()
		return nil
	}
	nestedNull := d.NullNestedArrays || d.MatchDebeziumLosses
	w.beginArray(len(a))
	for i, v := range a {
		w.elem(i)
		var err error
		switch v := v.(type) {
		case nil:
			w.null()
		case []any:
			if nestedNull {
				w.null()
			} else {
				err = d.writeArray(w, elem, v)
			}
		default:
			err = d.writeTyped(w, elem, v, readByJDBC)
		}
		if err != nil {
			return err
		}
	}
	w.endArray()
	return nil
}

func hasSpecialNumeric(a []any) bool {
	for _, v := range a {
		switch v := v.(type) {
		case kafkasink.Decimal:
			if specialNumeric(string(v)) != "" {
				return true
			}
		case []any:
			if hasSpecialNumeric(v) {
				return true
			}
		}
	}
	return false
}

// specialNumeric returns Debezium's string-mode name of NaN and ±Infinity,
// or "" for a number.
func specialNumeric(s string) string {
	switch s {
	case "NaN":
		return "NAN"
	case "Infinity":
		return "POSITIVE_INFINITY"
	case "-Infinity":
		return "NEGATIVE_INFINITY"
	}
	return ""
}

// writeNumeric writes a numeric's text s (PostgreSQL's output: an
// optional minus, digits, an optional fraction) in the decimal mode.
// typmod is the declared modifier, -1 without precision and scale.
func (d *Encoder) writeNumeric(w *connectWriter, s string, typmod int32) bool {
	if special := specialNumeric(s); special != "" {
		switch d.DecimalHandling {
		case DecimalString:
			w.text(special)
		case DecimalDouble:
			f, _ := strconv.ParseFloat(s, 64)
			w.float(f, 64)
		default:
			w.null()
		}
		return true
	}
	neg, digits, scale, ok := splitDecimal(s)
	if !ok {
		return false
	}
	switch d.DecimalHandling {
	case DecimalString:
		w.text(s)
		return true
	case DecimalDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !math.IsInf(f, 0) {
			return false
		}
		w.float(f, 64)
		return true
	}
	if typmod < 4 && d.MatchDebeziumLosses {
		digits, scale = stripTrailingZeros(digits)
	}
	var stack unscaledBuffer
	value := unscaled(&stack, neg, digits)
	if typmod >= 4 {
		w.bytes(value)
		return true
	}
	w.beginStruct()
	w.key(`"scale":`)
	w.int(int64(scale))
	w.key(`,"value":`)
	w.bytes(value)
	w.endStruct()
	return true
}

// splitDecimal splits "-123.4500" into its sign, its digits without the
// point ("1234500") as a sequence of parts, and its scale (4).
func splitDecimal(s string) (neg bool, digits [2]string, scale int, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) {
		return false, digits, 0, false
	}
	return neg, [2]string{whole, frac}, len(frac), true
}

// stripTrailingZeros drops the trailing zeros of a numeric's fraction,
// and returns its digits and new scale: Debezium's variable-scale value
// (decimal.handling.mode precise, a numeric without a declared scale) is
// Java's BigDecimal.stripTrailingZeros with a negative scale raised to 0
// ("1000.000" becomes 1000 at scale 0, "0.00" 0, "1.50" 1.5), which
// loses the display scale PostgreSQL keeps and prints.
func stripTrailingZeros(digits [2]string) ([2]string, int) {
	digits[1] = strings.TrimRight(digits[1], "0")
	return digits, len(digits[1])
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxStackDigits bounds the digits converted without allocating: 384
// decimal digits fit in 160 bytes.
const maxStackDigits = 384

// unscaledBuffer is room for the bytes of an unscaled value of up to
// maxStackDigits digits, and a sign byte.
type unscaledBuffer [161]byte

// unscaled returns the big-endian two's-complement bytes of the integer
// whose decimal digits are the concatenation of digits, negated when
// neg, in the fewest bytes that hold its sign (Java's
// BigInteger.toByteArray, which Connect's Decimal writes), in stack
// unless it has more than maxStackDigits digits.
func unscaled(stack *unscaledBuffer, neg bool, digits [2]string) []byte {
	if len(digits[0])+len(digits[1]) <= 19 {
		// The common case, in a uint64: several times faster than
		// decimalBytes.
		var u uint64
		for _, part := range digits {
			for i := 0; i < len(part); i++ {
				u = u*10 + uint64(part[i]-'0')
			}
		}
		start := len(stack) - 8
		binary.BigEndian.PutUint64(stack[start:], u)
		return twosComplement(stack[:], start, neg)
	}
	buf, start := stack[:], 0
	if len(digits[0])+len(digits[1]) <= maxStackDigits {
		start = decimalBytes(buf, digits)
	} else {
		var n big.Int
		n.SetString(digits[0]+digits[1], 10)
		buf = append([]byte{0}, n.Bytes()...)
		start = 1
	}
	return twosComplement(buf, start, neg)
}

// decimalBytes writes the magnitude of the decimal digits big-endian at
// the end of buf and returns where they start (at least one byte, after
// at least one spare byte).
func decimalBytes(buf []byte, digits [2]string) int {
	start := len(buf) - 1
	buf[start] = 0
	for _, part := range digits {
		for i := 0; i < len(part); i++ {
			carry := uint(part[i] - '0')
			for j := len(buf) - 1; j >= start; j-- {
				x := uint(buf[j])*10 + carry
				buf[j], carry = byte(x), x>>8
			}
			if carry > 0 {
				start--
				buf[start] = byte(carry)
			}
		}
	}
	return start
}

// twosComplement returns the shortest big-endian two's-complement form of
// the magnitude buf[start:], negated when neg, as Java's
// BigInteger.toByteArray writes it. start must be at least 1: the byte
// before the magnitude is room for a sign byte. buf is modified.
func twosComplement(buf []byte, start int, neg bool) []byte {
	for start < len(buf)-1 && buf[start] == 0 {
		start++
	}
	if !neg || buf[start] == 0 {
		if buf[start] >= 0x80 {
			start--
			buf[start] = 0
		}
		return buf[start:]
	}
	start--
	buf[start] = 0
	out := buf[start:]
	carry := 1
	for i := len(out) - 1; i >= 0; i-- {
		x := int(^out[i]) + carry
		out[i], carry = byte(x), x>>8
	}
	for len(out) > 1 && out[0] == 0xFF && out[1] >= 0x80 {
		out = out[1:]
	}
	return out
}

// writeMoney writes a money value, which PostgreSQL prints in its
// lc_monetary locale ("$1,234.56", "-$0.01" under C): its digits are the
// value in cents, Debezium's scale 2. A text with a decimal part of other
// than two digits is not understood.
func (d *Encoder) writeMoney(w *connectWriter, s string) bool {
	var cents uint64
	neg, n, lastSep := false, 0, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if n == 19 {
				return false
			}
			cents = cents*10 + uint64(c-'0')
			n++
		case c == '-' || c == '(':
			neg = true
		case c == '.' || c == ',':
			lastSep = n
		}
	}
	if n == 0 || lastSep != n-2 {
		return false
	}
	switch d.DecimalHandling {
	case DecimalString:
		mark := w.beginText()
		if neg {
			w.buf = append(w.buf, '-')
		}
		w.buf = strconv.AppendUint(w.buf, cents/100, 10)
		w.buf = append(w.buf, '.', byte('0'+cents%100/10), byte('0'+cents%10))
		w.endText(mark)
	case DecimalDouble:
		f := float64(cents) / 100
		if neg {
			f = -f
		}
		w.float(f, 64)
	default:
		var buf [9]byte
		binary.BigEndian.PutUint64(buf[1:], cents)
		w.bytes(twosComplement(buf[:], 1, neg))
	}
	return true
}

// clockMicros parses "HH:MM:SS[.ffffff]" at the start of s (HH up to 24,
// or more for an interval) and returns microseconds since midnight, the
// fraction's text, and the rest of s.
func clockMicros(s string) (us int64, frac, rest string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i < 1 || len(s) < i+6 || s[i+3] != ':' {
		return 0, "", "", false
	}
	h, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || !allDigits(s[:i]) || !allDigits(s[i+1:i+3]) || !allDigits(s[i+4:i+6]) {
		return 0, "", "", false
	}
	m := int64(s[i+1]-'0')*10 + int64(s[i+2]-'0')
	sec := int64(s[i+4]-'0')*10 + int64(s[i+5]-'0')
	us = ((h*60+m)*60 + sec) * 1e6
	rest = s[i+6:]
	if strings.HasPrefix(rest, ".") {
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		frac = rest[1:j]
		if frac == "" || len(frac) > 6 {
			return 0, "", "", false
		}
		f, _ := strconv.ParseInt(frac, 10, 64)
		for k := len(frac); k < 6; k++ {
			f *= 10
		}
		us += f
		rest = rest[j:]
	}
	return us, frac, rest, true
}

// timePrecision returns a time's or timestamp's fractional precision from
// its modifier: 6 when it has none.
func timePrecision(typmod int32) int32 {
	if typmod < 0 {
		return 6
	}
	return typmod
}

// writeTime writes a time (without time zone) in the time precision
// mode. 24:00:00 is 86400000000 µs, and "00:00:00Z" in isostring mode, as
// Debezium writes it.
func (d *Encoder) writeTime(w *connectWriter, s string, typmod int32) bool {
	us, _, rest, ok := clockMicros(s)
	if !ok || rest != "" {
		return false
	}
	switch {
	case d.TimePrecision == TimeIsostring:
		writeISOClock(w, us%86400e6)
	case d.TimePrecision == TimeConnect,
		d.TimePrecision == TimeAdaptive && timePrecision(typmod) <= 3:
		w.int(us / 1000)
	default:
		w.int(us)
	}
	return true
}

// writeISOClock writes a time of day in µs as Debezium's ISO string:
// "HH:MM:SS", the fraction without trailing zeros, "Z".
func writeISOClock(w *connectWriter, us int64) {
	mark := w.beginText()
	dst := w.buf
	sec := us / 1e6
	dst = appendTwo(dst, sec/3600)
	dst = append(dst, ':')
	dst = appendTwo(dst, sec/60%60)
	dst = append(dst, ':')
	dst = appendTwo(dst, sec%60)
	dst = appendFraction(dst, us%1e6)
	w.buf = append(dst, 'Z')
	w.endText(mark)
}

func appendTwo(dst []byte, n int64) []byte {
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

// appendFraction appends ".ffffff" for µs, without trailing zeros; nothing
// for 0.
func appendFraction(dst []byte, us int64) []byte {
	if us == 0 {
		return dst
	}
	digits := 6
	for us%10 == 0 {
		us /= 10
		digits--
	}
	dst = append(dst, '.')
	for p := digits - 1; p >= 0; p-- {
		dst = append(dst, byte('0'+us/pow10[p]%10))
	}
	return dst
}

var pow10 = [...]int64{1, 10, 100, 1000, 10000, 100000, 1000000}

// writeTimetz writes a time with time zone, PostgreSQL's
// "13:45:59.5+05:30", as Debezium's UTC string "08:15:59.5Z".
func writeTimetz(w *connectWriter, s string) bool {
	us, _, rest, ok := clockMicros(s)
	if !ok || len(rest) < 3 || rest[0] != '+' && rest[0] != '-' {
		return false
	}
	// The offset is "+HH", "+HH:MM" or "+HH:MM:SS".
	var off int64
	parts := rest[1:]
	for _, unit := range [...]int64{3600, 60, 1} {
		if len(parts) < 2 || !allDigits(parts[:2]) {
			return false
		}
		off += (int64(parts[0]-'0')*10 + int64(parts[1]-'0')) * unit
		if parts = parts[2:]; parts == "" {
			break
		}
		if parts[0] != ':' {
			return false
		}
		parts = parts[1:]
	}
	if parts != "" {
		return false
	}
	if rest[0] == '-' {
		off = -off
	}
	utc := ((us-off*1e6)%86400e6 + 86400e6) % 86400e6
	writeISOClock(w, utc)
	return true
}

// civil parses "[-]YYYY-MM-DD" at the start of s, PostgreSQL's date (the
// form pgcdc gives dates and timestamps, BC years as negative ISO years).
func civil(s string) (y, m, day int, rest string, ok bool) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	i := strings.IndexByte(s, '-')
	if i < 4 || len(s) < i+6 || s[i+3] != '-' || !allDigits(s[:i]) || !allDigits(s[i+1:i+3]) || !allDigits(s[i+4:i+6]) {
		return 0, 0, 0, "", false
	}
	y, _ = strconv.Atoi(s[:i])
	if neg {
		y = -y
	}
	m = int(s[i+1]-'0')*10 + int(s[i+2]-'0')
	day = int(s[i+4]-'0')*10 + int(s[i+5]-'0')
	return y, m, day, s[i+6:], true
}

// appendISODateText appends the date part of s as Java's ISO form: a '+'
// before years past 9999.
func appendISODateText(dst []byte, y int, date string) []byte {
	if y > 9999 {
		dst = append(dst, '+')
	}
	return append(dst, date...)
}

// writeDate writes a date as days since 1970-01-01 (in the proleptic
// Gregorian calendar PostgreSQL uses: Debezium's streamed records agree,
// its snapshot records of BC dates do not), or "YYYY-MM-DDZ" in
// isostring mode. infinity and -infinity are the days Debezium writes for
// them (see infiniteDateDays), so that typed readers (a Connect INT32
// Date, a Flink INT column) read a number as they do from Debezium.
func (d *Encoder) writeDate(w *connectWriter, s string, path readPath) bool {
	if isInfinity(s) {
		days := infiniteDateDays(s == "infinity", path)
		if d.TimePrecision == TimeIsostring {
			mark := w.beginText()
			w.buf = append(appendISODate(w.buf, days), 'Z')
			w.endText(mark)
			return true
		}
		w.int(int64(int32(days)))
		return true
	}
	y, m, day, rest, ok := civil(s)
	if !ok || rest != "" {
		return false
	}
	if y <= 0 && path == readByJDBC && d.MatchDebeziumLosses {
		// Debezium's snapshot keeps the year of era and drops the era:
		// ISO year 0 is 1 BC, written as year 1.
		return d.writeDate(w, fmt.Sprintf("%04d-%02d-%02d", 1-y, m, day), readStreamed)
	}
	if d.TimePrecision == TimeIsostring {
		mark := w.beginText()
		w.buf = append(appendISODateText(w.buf, y, s), 'Z')
		w.endText(mark)
		return true
	}
	w.int(time.Date(y, time.Month(m), day, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	return true
}

// pathOf is how Debezium reads the scalar values of e.
func pathOf(e *kafkasink.Event) readPath {
	if e.Op == kafkasink.OpRead {
		return readByJDBC
	}
	return readStreamed
}

// readPath is how Debezium reads a value, which decides what it writes for
// an infinite date: the snapshot's rows and every array element through
// PostgreSQL's JDBC driver, a streamed scalar through its own parser of
// pgoutput's text.
type readPath uint8

const (
	readStreamed readPath = iota
	readByJDBC
)

// infiniteDateDays returns the day since 1970-01-01 Debezium writes for
// the date infinity (positive) or -infinity. Through JDBC it is the day of
// the driver's infinite instant (PGStatement.DATE_POSITIVE_INFINITY and
// DATE_NEGATIVE_INFINITY); streamed, PostgreSQL's own day number of it
// (the int32 bound) moved from 2000-01-01 to 1970-01-01 in int32
// arithmetic, which overflows. Debezium writes the int32 of either in
// days mode and the whole day in isostring mode; the golden files have
// infinity both ways (-622191234 and -2147472692, "+292278994-08-16Z" and
// "-5877611-06-21Z"); -infinity follows the same arithmetic.
func infiniteDateDays(positive bool, path readPath) int64 {
	const postgresEpochDays = 10957 // 1970-01-01 to 2000-01-01
	switch {
	case path == readByJDBC && positive:
		return floorDiv(pgjdbcPositiveInfinity, 86400000)
	case path == readByJDBC:
		return floorDiv(pgjdbcNegativeInfinity, 86400000)
	}
	pgDays := int32(math.MaxInt32) // PostgreSQL's day number of infinity, from 2000-01-01
	if !positive {
		pgDays = math.MinInt32
	}
	return int64(pgDays + postgresEpochDays) // wraps, as Java's int does
}

// appendISODate appends day n since 1970-01-01 as Java's LocalDate prints
// it: at least four year digits, a sign before years past 9999 and
// before years below zero (proleptic Gregorian, year 0 is 1 BC).
func appendISODate(dst []byte, n int64) []byte {
	// Howard Hinnant's civil_from_days, in int64 for Debezium's
	// far-away infinite dates.
	z := n + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	switch {
	case y > 9999:
		dst = append(dst, '+')
	case y < 0:
		dst = append(dst, '-')
		y = -y
	}
	for p := int64(1000); p > 1 && y < p; p /= 10 {
		dst = append(dst, '0')
	}
	dst = strconv.AppendInt(dst, y, 10)
	dst = append(dst, '-')
	dst = appendTwo(dst, m)
	dst = append(dst, '-')
	return appendTwo(dst, day)
}

// PostgreSQL's JDBC driver reads timestamp ±infinity as these instants
// (PGStatement.DATE_POSITIVE_INFINITY and DATE_NEGATIVE_INFINITY, in
// milliseconds), and Debezium writes them as if they were microseconds.
const (
	pgjdbcPositiveInfinity = 9223372036825200000
	pgjdbcNegativeInfinity = -9223372036832400000
)

// writeTimestamp writes a timestamp without time zone, pgcdc's
// "2024-02-29T13:45:59.123456", as µs or ms since the epoch, or the ISO
// text with "Z" in isostring mode.
func (d *Encoder) writeTimestamp(w *connectWriter, s string, typmod int32) bool {
	var us int64
	switch s {
	case "infinity":
		us = pgjdbcPositiveInfinity
	case "-infinity":
		us = pgjdbcNegativeInfinity
	default:
		y, m, day, rest, ok := civil(s)
		if !ok || !strings.HasPrefix(rest, "T") {
			return false
		}
		clock, _, rest, ok := clockMicros(rest[1:])
		if !ok || rest != "" {
			return false
		}
		us = time.Date(y, time.Month(m), day, 0, 0, 0, 0, time.UTC).Unix()*1e6 + clock
		if d.TimePrecision == TimeIsostring {
			mark := w.beginText()
			w.buf = append(appendISODateText(w.buf, y, s), 'Z')
			w.endText(mark)
			return true
		}
	}
	switch {
	case d.TimePrecision == TimeIsostring:
		// Only the infinities get here: Debezium writes the instants
		// above, in Java's ISO form.
		if us > 0 {
			w.text("+294247-01-10T04:00:25.2Z")
		} else {
			w.text("-290308-12-21T19:59:27.6Z")
		}
	case d.TimePrecision == TimeConnect || timePrecision(typmod) <= 3:
		w.int(floorDiv(us, 1000))
	default:
		w.int(us)
	}
	return true
}

// writeTimestamptz writes an instant as Debezium's ZonedTimestamp:
// UTC, always six fraction digits, "Z".
func writeTimestamptz(w *connectWriter, t time.Time) {
	mark := w.beginText()
	w.buf = appendTimestamptzText(w.buf, t)
	w.endText(mark)
}

// appendTimestamptzText appends the text of an instant's ZonedTimestamp.
func appendTimestamptzText(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		// Rare enough for the general formatter; Java's ISO form signs
		// years outside 0000-9999.
		if y > 9999 {
			dst = append(dst, '+')
		}
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000000Z")
	}
	// By hand: time's layout formatter is several times slower than this
	// for a layout other than RFC 3339's.
	h, mi, sec := t.Clock()
	dst = appendTwo(dst, int64(y/100))
	dst = appendTwo(dst, int64(y%100))
	dst = append(dst, '-')
	dst = appendTwo(dst, int64(mo))
	dst = append(dst, '-')
	dst = appendTwo(dst, int64(d))
	dst = append(dst, 'T')
	dst = appendTwo(dst, int64(h))
	dst = append(dst, ':')
	dst = appendTwo(dst, int64(mi))
	dst = append(dst, ':')
	dst = appendTwo(dst, int64(sec))
	dst = append(dst, '.')
	us := int64(t.Nanosecond() / 1000)
	dst = appendTwo(dst, us/10000)
	dst = appendTwo(dst, us/100%100)
	dst = appendTwo(dst, us%100)
	return append(dst, 'Z')
}

// writeInterval writes an interval in PostgreSQL's default output style
// ("1 year 2 mons 3 days 04:05:06.789", "-1 days -00:00:01") as
// microseconds, or as an ISO 8601 duration in string mode.
func (d *Encoder) writeInterval(w *connectWriter, s string) bool {
	var years, months, days, clock int64
	var clockNeg bool
	rest := s
	for rest != "" {
		field, after, _ := strings.Cut(rest, " ")
		if strings.IndexByte(field, ':') >= 0 {
			clockNeg = strings.HasPrefix(field, "-")
			us, _, tail, ok := clockMicros(strings.TrimLeft(field, "+-"))
			if !ok || tail != "" || after != "" {
				return false
			}
			clock = us
			break
		}
		unit, after2, _ := strings.Cut(after, " ")
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return false
		}
		switch unit {
		case "year", "years":
			years = n
		case "mon", "mons":
			months = n
		case "day", "days":
			days = n
		default:
			return false
		}
		rest = after2
	}
	if clockNeg {
		clock = -clock
	}
	if d.IntervalHandling == IntervalString {
		mark := w.beginText()
		w.buf = appendISODuration(w.buf, years, months, days, clock)
		w.endText(mark)
		return true
	}
	// A month is 30.4375 days, 2629800 seconds; Debezium computes in
	// floating point and Java's cast clamps to the long range.
	totalMonths := years*12 + months
	f := float64(totalMonths)*2629800e6 + float64(days)*86400e6 + float64(clock)
	switch {
	case f >= math.MaxInt64:
		w.int(math.MaxInt64)
	case f <= math.MinInt64:
		w.int(math.MinInt64)
	default:
		w.int(totalMonths*2629800e6 + days*86400e6 + clock)
	}
	return true
}

// appendISODuration appends the text of Debezium's interval string,
// "P<y>Y<m>M<d>DT<h>H<m>M<s>S", every part present and signed on its own.
func appendISODuration(dst []byte, years, months, days, clockUS int64) []byte {
	dst = append(dst, 'P')
	dst = strconv.AppendInt(dst, years, 10)
	dst = append(dst, 'Y')
	dst = strconv.AppendInt(dst, months, 10)
	dst = append(dst, 'M')
	dst = strconv.AppendInt(dst, days, 10)
	dst = append(dst, "DT"...)
	dst = strconv.AppendInt(dst, clockUS/3600e6, 10)
	dst = append(dst, 'H')
	dst = strconv.AppendInt(dst, clockUS/60e6%60, 10)
	dst = append(dst, 'M')
	secs := clockUS % 60e6
	if secs < 0 {
		dst = append(dst, '-')
		secs = -secs
	}
	dst = strconv.AppendInt(dst, secs/1e6, 10)
	dst = appendFraction(dst, secs%1e6)
	return append(dst, 'S')
}

// writeBits writes a bit string ("10101010"): bit(1) as a boolean, others
// as bytes the way Debezium reads them into a java.util.BitSet, the
// rightmost bit first, little-endian, trailing zero bytes dropped, in
// standard base64 whatever BinaryHandling says (see BinaryMode).
func writeBits(w *connectWriter, s string, boolean bool) bool {
	if boolean {
		if s != "1" && s != "0" {
			return false
		}
		w.bool(s == "1")
		return true
	}
	var stack [64]byte
	buf := stack[:]
	if n := (len(s) + 7) / 8; n > len(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:(len(s)+7)/8]
	clear(buf)
	for i := 0; i < len(s); i++ {
		bit := len(s) - 1 - i
		switch s[i] {
		case '1':
			buf[bit/8] |= 1 << (bit % 8)
		case '0':
		default:
			return false
		}
	}
	for len(buf) > 0 && buf[len(buf)-1] == 0 {
		buf = buf[:len(buf)-1]
	}
	w.bytes(buf)
	return true
}

// writeBinary writes bytes in the binary handling mode: Connect bytes
// in bytes mode, else a string of their text.
func (d *Encoder) writeBinary(w *connectWriter, b []byte) {
	if d.BinaryHandling == BinaryBytes {
		w.bytes(b)
		return
	}
	mark := w.beginText()
	switch d.BinaryHandling {
	case BinaryBase64URLSafe:
		w.buf = base64.URLEncoding.AppendEncode(w.buf, b)
	case BinaryHex:
		w.buf = hex.AppendEncode(w.buf, b)
	default:
		w.buf = base64.StdEncoding.AppendEncode(w.buf, b)
	}
	w.endText(mark)
}

// writePoint writes a point, "(1.5,-2.25)", as Debezium's
// io.debezium.data.geometry.Point: x, y, its WKB (little-endian, type 1)
// in base64 and a null SRID.
func writePoint(w *connectWriter, s string) bool {
	if len(s) < 5 || s[0] != '(' || s[len(s)-1] != ')' {
		return false
	}
	xs, ys, ok := strings.Cut(s[1:len(s)-1], ",")
	if !ok {
		return false
	}
	x, err1 := strconv.ParseFloat(xs, 64)
	y, err2 := strconv.ParseFloat(ys, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	var wkb [21]byte
	wkb[0], wkb[1] = 1, 1 // little-endian, wkbPoint
	putFloat64LE(wkb[5:], x)
	putFloat64LE(wkb[13:], y)
	w.beginStruct()
	w.key(`"x":`)
	w.float(x, 64)
	w.key(`,"y":`)
	w.float(y, 64)
	w.key(`,"wkb":`)
	w.bytes(wkb[:])
	w.key(`,"srid":`)
	w.null()
	w.endStruct()
	return true
}

func putFloat64LE(b []byte, f float64) {
	u := math.Float64bits(f)
	for i := range 8 {
		b[i] = byte(u >> (8 * i))
	}
}

// writeValue writes v, a value of a type Debezium writes as it is (text,
// integers, floats, booleans, uuid, json): in JSON as JSONEncoder writes
// it (appendValue); in Avro as the same Connect value.
func writeValue(w *connectWriter, v any) error {
	if !w.avro {
		var err error
		w.buf, err = kafkasink.AppendJSONValue(w.buf, v)
		return err
	}
	// One type switch over every kind, as jsonw.AppendValueExt's: a
	// string, the most common value, is found without a call first.
	switch x := v.(type) {
	case nil:
		w.null()
	case bool:
		w.bool(x)
	case string:
		w.str(x)
	case kafkasink.Decimal:
		w.str(string(x))
	case int:
		w.int(int64(x))
	case int8:
		w.int(int64(x))
	case int16:
		w.int(int64(x))
	case int32:
		w.int(int64(x))
	case int64:
		w.int(x)
	case uint:
		w.uint(uint64(x))
	case uint8:
		w.uint(uint64(x))
	case uint16:
		w.uint(uint64(x))
	case uint32:
		w.uint(uint64(x))
	case uint64:
		w.uint(x)
	case float64:
		w.float(x, 64)
	case float32:
		w.float(float64(x), 32)
	case []byte:
		switch {
		case x == nil:
			w.null()
		case w.slot != nil && w.slot.typ == "string":
			// JSON's base64 text, as a string.
			mark := w.beginText()
			w.buf = base64.StdEncoding.AppendEncode(w.buf, x)
			w.endText(mark)
		default:
			w.bytes(x)
		}
	case time.Time:
		mark := w.beginText()
		w.buf = x.UTC().AppendFormat(w.buf, time.RFC3339Nano)
		w.endText(mark)
	case json.RawMessage:
		if x == nil {
			w.null()
			break
		}
		if err := jsonw.CheckRaw(x); err != nil {
			return err
		}
		w.str(unsafe.String(unsafe.SliceData(x), len(x)))
	case []any:
		if x == nil {
			w.null()
			break
		}
		w.beginArray(len(x))
		for i, elem := range x {
			w.elem(i)
			if err := writeValue(w, elem); err != nil {
				return err
			}
		}
		w.endArray()
	default:
		if _, err := kafkasink.AppendJSONValue(nil, v); err != nil {
			return err
		}
		return fmt.Errorf("kafkasink: a Go %T has no form in Debezium's Avro record", v)
	}
	return nil
}

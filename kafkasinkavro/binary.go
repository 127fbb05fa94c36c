package kafkasinkavro

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/encoding/avrobin"
)

// This file writes Avro's binary encoding
// (https://avro.apache.org/docs/1.11.1/specification/#binary-encoding)
// straight into the record's buffer, as JSONEncoder writes JSON: no value
// is boxed, no map built, so a steady-state event costs no allocation.

// Union branches: every union this encoder writes is ["null", T, ...].
const (
	unionNull  = 0 // avrobin.AppendLong(0)
	unionValue = 2 // avrobin.AppendLong(1)
	unionArray = 4 // avrobin.AppendLong(2): an array element that is an array
)

// appendColumn appends c's field for value v; present is false when the
// image has no value for it: the column is missing from the row (a
// delete's old row has only the key under REPLICA IDENTITY DEFAULT) or
// an unchanged TOAST value. A nullable field is then null; a NOT NULL
// one holds its type's zero value, and the envelope's unchanged list
// names the unchanged ones.
func appendColumn(dst []byte, c *column, v any, present bool) ([]byte, error) {
	if !present || v == nil {
		if c.nullable {
			return append(dst, unionNull), nil
		}
		if present {
			return nil, errors.New("NULL in a column declared NOT NULL")
		}
		return appendZero(dst, c), nil
	}
	if c.nullable {
		dst = append(dst, unionValue)
	}
	if c.array {
		a, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("a %T value in an array column", v)
		}
		return appendArray(dst, c, a, maxArrayDims)
	}
	return appendScalar(dst, c, v)
}

// appendZero appends the zero value of c's type: an empty array, 0,
// false, an empty string or bytes, the decimal 0.
func appendZero(dst []byte, c *column) []byte {
	switch {
	case c.array:
		return append(dst, 0)
	case c.kind == kindFloat:
		return append(dst, 0, 0, 0, 0)
	case c.kind == kindDouble:
		return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	case c.kind == kindDecimal:
		return append(dst, 2, 0) // one byte, 0
	}
	return append(dst, 0) // boolean false, int and long 0, empty string and bytes
}

// appendArray appends a, whose elements may be NULL or, while dims
// allows, arrays of the next dimension.
func appendArray(dst []byte, c *column, a []any, dims int) ([]byte, error) {
	if len(a) > 0 {
		dst = avrobin.AppendLong(dst, int64(len(a)))
	}
	for _, v := range a {
		var err error
		switch v := v.(type) {
		case nil:
			dst = append(dst, unionNull)
		case []any:
			if dims == 1 {
				return nil, fmt.Errorf("an array of more than %d dimensions", maxArrayDims)
			}
			if dst, err = appendArray(append(dst, unionArray), c, v, dims-1); err != nil {
				return nil, err
			}
		default:
			if dst, err = appendScalar(append(dst, unionValue), c, v); err != nil {
				return nil, err
			}
		}
	}
	return append(dst, 0), nil
}

// appendScalar appends v as c's kind.
func appendScalar(dst []byte, c *column, v any) ([]byte, error) {
	switch c.kind {
	case kindBoolean:
		if b, ok := v.(bool); ok {
			return avrobin.AppendBool(dst, b), nil
		}
	case kindInt, kindLong:
		if n, ok := integer(v); ok {
			if c.kind == kindInt && (n < math.MinInt32 || n > math.MaxInt32) {
				return nil, fmt.Errorf("%d is out of the range of Avro's int", n)
			}
			return avrobin.AppendLong(dst, n), nil
		}
	case kindFloat:
		switch f := v.(type) {
		case float32:
			return avrobin.AppendFloat(dst, f), nil
		case float64:
			return avrobin.AppendFloat(dst, float32(f)), nil
		}
	case kindDouble:
		switch f := v.(type) {
		case float64:
			return avrobin.AppendDouble(dst, f), nil
		case float32:
			return avrobin.AppendDouble(dst, float64(f)), nil
		}
	case kindBytes:
		if b, ok := v.([]byte); ok {
			return avrobin.AppendString(dst, b), nil
		}
	case kindDecimal:
		if d, ok := v.(kafkasink.Decimal); ok {
			return appendDecimal(dst, string(d), c.scale)
		}
	case kindUUID:
		if s, ok := v.(string); ok {
			return avrobin.AppendString(dst, s), nil
		}
	case kindDate:
		if s, ok := v.(string); ok {
			days, err := dateDays(s)
			return avrobin.AppendLong(dst, days), err
		}
	case kindTimeMicros:
		if s, ok := v.(string); ok {
			us, ok := clockMicros(s)
			if !ok {
				return nil, errors.New("a time that is not HH:MM:SS[.ffffff]")
			}
			return avrobin.AppendLong(dst, us), nil
		}
	case kindTimestampMicros:
		switch t := v.(type) {
		case time.Time:
			return avrobin.AppendLong(dst, t.UnixMicro()), nil
		case string:
			us, err := infiniteMicros(t)
			return avrobin.AppendLong(dst, us), err
		}
	case kindLocalTimestampMicros:
		if s, ok := v.(string); ok {
			us, err := localTimestampMicros(s)
			return avrobin.AppendLong(dst, us), err
		}
	case kindString:
		return appendText(dst, v)
	}
	return nil, fmt.Errorf("a %T value for an Avro %s", v, c.typeName())
}

// appendText appends v as an Avro string: its text, and a composite or
// other structured value as JSON.
func appendText(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return avrobin.AppendString(dst, v), nil
	case kafkasink.Decimal:
		return avrobin.AppendString(dst, v), nil
	case json.RawMessage:
		return avrobin.AppendString(dst, v), nil
	case map[string]any, []any:
		b, err := json.Marshal(v) // composites: rare, so allocating is fine
		if err != nil {
			return nil, err
		}
		return avrobin.AppendString(dst, b), nil
	}
	return nil, fmt.Errorf("a %T value for an Avro string", v)
}

// integer returns an integer value as an int64.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), n <= math.MaxInt64
	case uint:
		return int64(n), uint64(n) <= math.MaxInt64
	}
	return 0, false
}

// appendDecimal appends the decimal text s at scale as Avro's decimal on
// bytes: the unscaled value in big-endian two's complement, as few bytes
// as hold it (as Java's BigInteger.toByteArray).
func appendDecimal(dst []byte, s string, scale int) ([]byte, error) {
	neg := len(s) > 0 && s[0] == '-'
	if neg || len(s) > 0 && s[0] == '+' {
		s = s[1:]
	}
	intPart, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			intPart, frac = s[:i], s[i+1:]
			break
		}
	}
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return nil, fmt.Errorf("the numeric %q has no Avro decimal (NaN and infinities have none)", s)
	}
	if len(frac) > scale {
		return nil, fmt.Errorf("the numeric %s has more than the column's %d decimal places", s, scale)
	}
	if len(intPart)+scale <= 18 { // fits an int64: no allocation
		var n int64
		for i := 0; i < len(intPart); i++ {
			n = n*10 + int64(intPart[i]-'0')
		}
		for i := 0; i < scale; i++ {
			n *= 10
			if i < len(frac) {
				n += int64(frac[i] - '0')
			}
		}
		if neg {
			n = -n
		}
		return appendTwosComplement(dst, n), nil
	}
	digits := make([]byte, 0, len(intPart)+scale)
	digits = append(append(digits, intPart...), frac...)
	for i := len(frac); i < scale; i++ {
		digits = append(digits, '0')
	}
	n, _ := new(big.Int).SetString(string(digits), 10)
	if neg {
		n.Neg(n)
	}
	return avrobin.AppendString(dst, bigTwosComplement(n)), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// appendTwosComplement appends n's bytes as Avro's bytes.
func appendTwosComplement(dst []byte, n int64) []byte {
	size := 1
	for size < 8 && n>>(8*size-1) != 0 && n>>(8*size-1) != -1 {
		size++
	}
	dst = avrobin.AppendLong(dst, int64(size))
	for i := size - 1; i >= 0; i-- {
		dst = append(dst, byte(n>>(8*i)))
	}
	return dst
}

// bigTwosComplement returns n in big-endian two's complement, minimal.
func bigTwosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -v is ^(v-1).
	m := new(big.Int).Neg(n)
	b := m.Sub(m, big.NewInt(1)).Bytes()
	for i := range b {
		b[i] = ^b[i]
	}
	if len(b) == 0 || b[0]&0x80 == 0 {
		b = append([]byte{0xff}, b...)
	}
	return b
}

// The values infinity and -infinity take: the largest and smallest of the
// Avro type, which no real date or time reaches.
func infiniteMicros(s string) (int64, error) {
	switch s {
	case "infinity":
		return math.MaxInt64, nil
	case "-infinity":
		return math.MinInt64, nil
	}
	return 0, fmt.Errorf("a timestamp %q that is neither a time nor an infinity", s)
}

// dateDays parses pgcdc's date text, "YYYY-MM-DD" with a '-' before years
// before 1 BC, or an infinity, into days since 1970-01-01.
func dateDays(s string) (int64, error) {
	switch s {
	case "infinity":
		return math.MaxInt32, nil
	case "-infinity":
		return math.MinInt32, nil
	}
	days, rest, ok := cutDate(s)
	if !ok || rest != "" {
		return 0, errors.New("a date that is not YYYY-MM-DD")
	}
	return days, nil
}

// cutDate parses the date at the start of s into days since 1970-01-01
// (proleptic Gregorian) and returns the rest.
func cutDate(s string) (days int64, rest string, ok bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	i := 0
	var y int64
	for i < len(s) && isDigit(s[i]) && i < 9 {
		y = y*10 + int64(s[i]-'0')
		i++
	}
	if i < 4 || len(s) < i+6 || s[i] != '-' || s[i+3] != '-' || !allDigits(s[i+1:i+3]) || !allDigits(s[i+4:i+6]) {
		return 0, "", false
	}
	if neg {
		y = -y
	}
	m := int64(s[i+1]-'0')*10 + int64(s[i+2]-'0')
	d := int64(s[i+4]-'0')*10 + int64(s[i+5]-'0')
	if m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, "", false
	}
	return daysFromCivil(y, m, d), s[i+6:], true
}

// daysFromCivil is Howard Hinnant's days_from_civil: the days from
// 1970-01-01 to y-m-d in the proleptic Gregorian calendar.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// clockMicros parses "HH:MM:SS[.ffffff]" (24:00:00 included) into
// microseconds since midnight.
func clockMicros(s string) (int64, bool) {
	if len(s) < 8 || s[2] != ':' || s[5] != ':' || !allDigits(s[:2]) || !allDigits(s[3:5]) || !allDigits(s[6:8]) {
		return 0, false
	}
	h := int64(s[0]-'0')*10 + int64(s[1]-'0')
	m := int64(s[3]-'0')*10 + int64(s[4]-'0')
	sec := int64(s[6]-'0')*10 + int64(s[7]-'0')
	us := ((h*60+m)*60 + sec) * 1e6
	if rest := s[8:]; rest != "" {
		if rest[0] != '.' || len(rest) == 1 || len(rest) > 7 || !allDigits(rest[1:]) {
			return 0, false
		}
		var frac int64
		for i := 1; i < 7; i++ {
			frac *= 10
			if i < len(rest) {
				frac += int64(rest[i] - '0')
			}
		}
		us += frac
	}
	return us, h < 24 || us == 24*3600*1e6
}

// localTimestampMicros parses pgcdc's timestamp text,
// "YYYY-MM-DDTHH:MM:SS[.ffffff]", or an infinity, into microseconds from
// 1970-01-01T00:00 on the same wall clock.
func localTimestampMicros(s string) (int64, error) {
	if s == "infinity" || s == "-infinity" {
		return infiniteMicros(s)
	}
	days, rest, ok := cutDate(s)
	if !ok || len(rest) < 1 || rest[0] != 'T' {
		return 0, errors.New("a timestamp that is not YYYY-MM-DDTHH:MM:SS[.ffffff]")
	}
	us, ok := clockMicros(rest[1:])
	if !ok {
		return 0, errors.New("a timestamp that is not YYYY-MM-DDTHH:MM:SS[.ffffff]")
	}
	return days*86400e6 + us, nil
}

package debezium

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink"
)

// Column DEFAULTs as Debezium 3.6.1 treats them. Its PostgreSQL connector
// reads each column's DEFAULT expression (ColumnInfo.Default) and, for
// the types it has a parser for, declares the value in the column's
// Connect schema ("default"), in the column's value form; Kafka Connect's
// JsonConverter (replace.null.with.default=true, its default) then writes
// that default in place of every NULL value of the column, whatever
// schemas.enable (testdata/debezium's mixed_defaults table holds both).
// Debezium does not evaluate expressions: it takes the text between the
// first two single quotes, or the whole expression when it has none, and
// a function call (now(), nextval(...)) as a fixed placeholder of the
// type (the epoch, 0). So 'x''y' is declared as "x", now() as
// "1970-01-01T00:00:00.000000Z", a serial's nextval as 0, and (1 + 2),
// CURRENT_DATE or anything else its parser refuses gets no default.

// debeziumFunctionDefault is Debezium's FUNCTION_DEFAULT_PATTERN: an
// expression that starts with a function call, optionally parenthesized.
var debeziumFunctionDefault = regexp.MustCompile(`^\(?[A-Za-z0-9_]+\(.*\)`)

// debeziumDefaultText is Debezium's extractDefault: the placeholder when
// expr starts with a function call, else the text between its first two
// single quotes, else expr itself; ok is false when expr has a single
// quote and no second one (Debezium's parser fails there).
func debeziumDefaultText(expr, placeholder string) (text string, ok bool) {
	if debeziumFunctionDefault.MatchString(expr) {
		return placeholder, true
	}
	_, quoted, found := strings.Cut(expr, "'")
	if !found {
		return expr, true
	}
	text, _, ok = strings.Cut(quoted, "'")
	return text, ok
}

// columnDefault returns the default Debezium declares for column ci
// under d's options, in the column's value form: its JSON, and its Avro
// under the column's Connect schema (AppendAvro). It is none (nil)
// when Debezium declares none: no DEFAULT, a type Debezium has no parser
// for (domains, enums, arrays, and the types not handled below), or an
// expression its parser refuses.
func (d *Encoder) columnDefault(ci *kafkasink.ColumnInfo) columnDefaultValue {
	w := connectWriter{}
	if !d.writeColumnDefault(&w, ci) {
		return columnDefaultValue{}
	}
	s := d.columnSchema(ci.Type) // the value alone; a row writes its union branch
	a := avroWriter(nil, &s)
	d.writeColumnDefault(&a, ci)
	if a.failed() != nil {
		// A default its own column's schema cannot hold is a bug here,
		// and so no default: the row writes the NULL.
		return columnDefaultValue{}
	}
	return columnDefaultValue{json: w.buf, avro: a.buf}
}

// columnDefaultValue is a column's declared default in both encodings;
// json is nil when the column has none.
type columnDefaultValue struct {
	json, avro []byte
}

// writeColumnDefault writes column ci's declared default and reports
// whether it has one (see columnDefault).
func (d *Encoder) writeColumnDefault(w *connectWriter, ci *kafkasink.ColumnInfo) bool {
	t := ci.Type
	if ci.Default == "" || t == nil || t.Base != nil || t.Elem != nil || t.Kind != 'b' {
		return false
	}
	expr := ci.Default
	// Debezium's numeric and boolean parsers take NULL::<type> for no
	// default.
	nullable := strings.HasPrefix(expr, "NULL::")
	switch t.Name {
	case "int2", "int4", "int8":
		bits := 64
		switch t.Name {
		case "int2":
			bits = 16
		case "int4":
			bits = 32
		}
		if s, found := debeziumDefaultText(expr, "0"); found && !nullable {
			if n, ok := parseJavaInt(s, bits); ok {
				w.int(n)
				return true
			}
		}
	case "float4", "float8":
		if s, found := debeziumDefaultText(expr, "0.0"); found && !nullable {
			bits := 64
			if t.Name == "float4" {
				bits = 32
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), bits); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				w.float(f, bits)
				return true
			}
		}
	case "numeric":
		if s, found := debeziumDefaultText(expr, "0.0"); found && !nullable {
			return d.writeNumericDefault(w, s, t.Modifier)
		}
	case "bool":
		if s, found := debeziumDefaultText(expr, "false"); found && !nullable {
			w.bool(strings.EqualFold(s, "true"))
			return true
		}
	case "text", "varchar", "bpchar":
		if s, found := debeziumDefaultText(expr, ""); found {
			w.str(s)
			return true
		}
	case "date":
		if s, found := debeziumDefaultText(expr, "1970-01-01"); found && !isInfinity(s) {
			return d.writeDate(w, s, readStreamed)
		}
	case "timestamp":
		if s, found := debeziumDefaultText(expr, "1970-01-01 00:00:00"); found && !isInfinity(s) {
			return d.writeTimestamp(w, strings.Replace(s, " ", "T", 1), t.Modifier)
		}
	case "timestamptz":
		if s, found := debeziumDefaultText(expr, "1970-01-01 00:00:00+00"); found {
			if ts, ok := parsePostgresTimestamptz(s); ok {
				writeTimestamptz(w, ts)
				return true
			}
		}
	}
	return false
}

// writeNumericDefault writes a numeric column's default: precise, a
// Decimal at the column's scale (Debezium raises the parsed value's scale
// to it), and none without a declared scale (Debezium's variable-scale
// value is a struct, which Connect cannot hold as a default); as the
// value otherwise.
func (d *Encoder) writeNumericDefault(w *connectWriter, s string, typmod int32) bool {
	_, digits, scale, ok := splitDecimal(s)
	if !ok || specialNumeric(s) != "" {
		return false
	}
	if d.DecimalHandling == DecimalPrecise {
		if typmod < 4 {
			return false
		}
		if want := int((typmod - 4) & 0xffff); scale < want {
			if digits[1] == "" {
				s += "."
			}
			s += strings.Repeat("0", want-scale)
		}
	}
	return d.writeNumeric(w, s, typmod)
}

// parseJavaInt parses s as Java's Short/Integer/Long.parseInt do: an
// optional sign and decimal digits, within bits.
func parseJavaInt(s string, bits int) (int64, bool) {
	if s == "" || strings.HasPrefix(s, "+") && len(s) == 1 || strings.ContainsAny(s, "_ ") {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, bits)
	return n, err == nil
}

// parsePostgresTimestamptz parses PostgreSQL's output of a timestamptz in
// the ISO DateStyle ("2024-02-29 08:15:59.5+00", "+05:30").
func parsePostgresTimestamptz(s string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999-07:00:00"} {
		if ts, err := time.Parse(layout, s); err == nil {
			return ts, true
		}
	}
	return time.Time{}, false
}

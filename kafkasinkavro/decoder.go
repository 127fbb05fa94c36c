package kafkasinkavro

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink/encoding/jsonw"
	"github.com/kafkasink/kafkasink/kafkasinkavro/internal/registry"
)

// Decoder reads back what an Encoder writes, for tests and for tools that
// want JSON: a value becomes the change event as kafkasink.JSONEncoder
// writes it for the same event, and a key the JSON object of its key
// columns (kafkasink.KeyJSON's form). It fetches each schema from the
// registry by the id in the record, once: the schemas of a Schema
// Registry's ids never change. It is safe for concurrent use.
//
// The event JSON is JSONEncoder's byte for byte, but where Avro cannot
// say what JSONEncoder says:
//   - a column an image has no value for (a delete's columns outside the
//     replica identity, which PostgreSQL does not send) is null, or its
//     type's zero value in a NOT NULL column, where JSONEncoder leaves it
//     out;
//   - a column the envelope lists as unchanged (an unchanged TOAST value)
//     is left out of both images, as the record does not say of which it
//     was;
//   - a composite is its JSON text in a string, where JSONEncoder writes
//     an object.
//
// A record of a schema that is not this package's envelope (another
// producer's) is decoded as its record with the same value forms, its
// fields in schema order.
type Decoder struct {
	schemas *registry.Schemas[*avroNode]
}

// NewDecoder returns a Decoder that fetches schemas from reg.
func NewDecoder(reg *sr.Client) *Decoder {
	return &Decoder{schemas: registry.NewSchemas(reg, sr.TypeAvro, parseSchema)}
}

// Value returns the JSON of value, a record value an Encoder wrote.
func (d *Decoder) Value(ctx context.Context, value []byte) ([]byte, error) {
	n, payload, err := d.schemas.Read(ctx, value)
	if err != nil {
		return nil, err
	}
	var out []byte
	if n.isEnvelope() {
		out, payload, err = n.decodeEnvelope(nil, payload)
	} else {
		out, payload, err = n.decode(nil, payload)
	}
	return finish(out, payload, err)
}

// Key returns the JSON of key, a record key an Encoder wrote in the
// Confluent wire format.
func (d *Decoder) Key(ctx context.Context, key []byte) ([]byte, error) {
	n, payload, err := d.schemas.Read(ctx, key)
	if err != nil {
		return nil, err
	}
	out, payload, err := n.decode(nil, payload)
	return finish(out, payload, err)
}

// Transcode returns a copy of r with its value and key in JSON (see Value
// and Key), for readers of JSON such as kafkasinktest.ReadCommittedWith.
// A null value stays null, and so does a key not in the Confluent wire
// format (a zero byte first): the sink writes a truncate's key, and that
// of a table without key columns, as it does without this encoder.
func (d *Decoder) Transcode(ctx context.Context, r *kgo.Record) (*kgo.Record, error) {
	return registry.Transcode(ctx, r, "kafkasinkavro", d.Value, d.Key)
}

func finish(out, rest []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the record", len(rest))
	}
	return out, nil
}

// avroNode is a parsed Avro schema.
type avroNode struct {
	typ      string // a primitive's name, or record, enum, array, map, fixed, union
	logical  string // logicalType
	scale    int    // a decimal's
	size     int    // a fixed's
	name     string // a named type's full name
	fields   []avroField
	items    *avroNode   // an array's items, a map's values
	branches []*avroNode // a union's
	symbols  []string    // an enum's
}

// avroField is a record's field; column is the PostgreSQL column it holds
// (its doc "column <name>", as the Encoder writes it), else its name.
type avroField struct {
	column string
	typ    *avroNode
}

// parseSchema parses an Avro schema's JSON text.
func parseSchema(text string) (*avroNode, error) {
	return parseNode(json.RawMessage(text), "", make(map[string]*avroNode))
}

var primitives = []string{"null", "boolean", "int", "long", "float", "double", "bytes", "string"}

func parseNode(raw json.RawMessage, ns string, named map[string]*avroNode) (*avroNode, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if slices.Contains(primitives, name) {
			return &avroNode{typ: name}, nil
		}
		if n := named[fullName(name, ns)]; n != nil {
			return n, nil
		}
		if n := named[name]; n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("unknown type %q", name)
	}
	var union []json.RawMessage
	if json.Unmarshal(raw, &union) == nil {
		n := &avroNode{typ: "union"}
		for _, b := range union {
			branch, err := parseNode(b, ns, named)
			if err != nil {
				return nil, err
			}
			n.branches = append(n.branches, branch)
		}
		return n, nil
	}
	var obj struct {
		Type        json.RawMessage `json:"type"`
		Name        string          `json:"name"`
		Namespace   *string         `json:"namespace"`
		LogicalType string          `json:"logicalType"`
		Scale       int             `json:"scale"`
		Size        int             `json:"size"`
		Symbols     []string        `json:"symbols"`
		Items       json.RawMessage `json:"items"`
		Values      json.RawMessage `json:"values"`
		Fields      []struct {
			Name string          `json:"name"`
			Doc  string          `json:"doc"`
			Type json.RawMessage `json:"type"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("not an Avro schema: %.60s", raw)
	}
	var typ string
	if json.Unmarshal(obj.Type, &typ) != nil {
		return parseNode(obj.Type, ns, named) // {"type": {...}}: the inner schema
	}
	var n *avroNode
	switch typ {
	case "record", "error", "enum", "fixed":
		full := fullName(obj.Name, ns)
		if obj.Namespace != nil && !strings.Contains(obj.Name, ".") {
			full = fullName(obj.Name, *obj.Namespace)
		}
		n = &avroNode{typ: typ, name: full, symbols: obj.Symbols, size: obj.Size}
		if typ == "error" {
			n.typ = "record"
		}
		named[full] = n // before the fields: a record may refer to itself
		inner := ns
		if i := strings.LastIndexByte(full, '.'); i >= 0 {
			inner = full[:i]
		}
		for _, f := range obj.Fields {
			ft, err := parseNode(f.Type, inner, named)
			if err != nil {
				return nil, fmt.Errorf("field %s of %s: %w", f.Name, full, err)
			}
			column := f.Name
			if c, ok := strings.CutPrefix(f.Doc, "column "); ok {
				column = c
			}
			n.fields = append(n.fields, avroField{column: column, typ: ft})
		}
	case "array", "map":
		items := obj.Items
		if typ == "map" {
			items = obj.Values
		}
		it, err := parseNode(items, ns, named)
		if err != nil {
			return nil, err
		}
		n = &avroNode{typ: typ, items: it}
	default:
		if !slices.Contains(primitives, typ) {
			if ref := named[fullName(typ, ns)]; ref != nil {
				return ref, nil
			}
			return nil, fmt.Errorf("unknown type %q", typ)
		}
		n = &avroNode{typ: typ}
	}
	n.logical, n.scale = obj.LogicalType, obj.Scale
	return n, nil
}

func fullName(name, ns string) string {
	if ns == "" || strings.Contains(name, ".") {
		return name
	}
	return ns + "." + name
}

// envelopeFields are the fields of the Encoder's envelope, in order;
// unchanged is the 13th.
var envelopeFields = [...]string{"id", "op", "schema", "table", "lsn", "commit_lsn", "index", "xid", "commit_time",
	"key", "before", "after", "unchanged", "truncate", "backfill_run_id"}

func (n *avroNode) isEnvelope() bool {
	if n.typ != "record" || !strings.HasSuffix(n.name, ".Envelope") || len(n.fields) != len(envelopeFields) {
		return false
	}
	for i := range n.fields {
		if n.fields[i].column != envelopeFields[i] {
			return false
		}
	}
	return true
}

var errShort = errors.New("the record ends early")

// readLong reads a zig-zag varint: Avro's int and long.
func readLong(src []byte) (int64, []byte, error) {
	u, k := binary.Uvarint(src)
	if k <= 0 {
		return 0, nil, errShort
	}
	return int64(u>>1) ^ -int64(u&1), src[k:], nil
}

// readBytes reads Avro's bytes and string: a length, then the bytes.
func readBytes(src []byte) ([]byte, []byte, error) {
	l, src, err := readLong(src)
	if err != nil {
		return nil, nil, err
	}
	if l < 0 || l > int64(len(src)) {
		return nil, nil, errShort
	}
	return src[:l], src[l:], nil
}

// decode appends the JSON of the value of n at the start of src.
func (n *avroNode) decode(dst, src []byte) ([]byte, []byte, error) {
	switch n.typ {
	case "null":
		return append(dst, "null"...), src, nil
	case "boolean":
		if len(src) < 1 {
			return nil, nil, errShort
		}
		return jsonw.AppendBool(dst, src[0] != 0), src[1:], nil
	case "int", "long":
		v, rest, err := readLong(src)
		if err != nil {
			return nil, nil, err
		}
		return appendLogicalLong(dst, n.logical, v), rest, nil
	case "float":
		if len(src) < 4 {
			return nil, nil, errShort
		}
		return jsonw.AppendFloat(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(src))), 32), src[4:], nil
	case "double":
		if len(src) < 8 {
			return nil, nil, errShort
		}
		return jsonw.AppendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(src)), 64), src[8:], nil
	case "bytes", "fixed":
		return n.decodeBytes(dst, src)
	case "string":
		s, rest, err := readBytes(src)
		if err != nil {
			return nil, nil, err
		}
		return jsonw.AppendString(dst, string(s)), rest, nil
	case "enum":
		i, rest, err := readLong(src)
		if err != nil || i < 0 || i >= int64(len(n.symbols)) {
			return nil, nil, fmt.Errorf("enum %s: symbol %d of %d", n.name, i, len(n.symbols))
		}
		return jsonw.AppendString(dst, n.symbols[i]), rest, nil
	case "union":
		i, rest, err := readLong(src)
		if err != nil || i < 0 || i >= int64(len(n.branches)) {
			return nil, nil, fmt.Errorf("union branch %d of %d", i, len(n.branches))
		}
		return n.branches[i].decode(dst, rest)
	case "record":
		return n.decodeRecord(dst, src)
	case "array", "map":
		return n.decodeBlocks(dst, src)
	}
	return nil, nil, fmt.Errorf("Avro type %q is not supported", n.typ)
}

// decodeBytes is decode of bytes and fixed: a decimal as its text, other
// bytes in base64.
func (n *avroNode) decodeBytes(dst, src []byte) ([]byte, []byte, error) {
	var b []byte
	var err error
	if n.typ == "fixed" {
		if len(src) < n.size {
			return nil, nil, errShort
		}
		b, src = src[:n.size], src[n.size:]
	} else if b, src, err = readBytes(src); err != nil {
		return nil, nil, err
	}
	if n.logical == "decimal" {
		return appendDecimalText(dst, b, n.scale), src, nil
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"'), src, nil
}

// decodeRecord is decode of a record: an object of its fields, each
// named after its column.
func (n *avroNode) decodeRecord(dst, src []byte) ([]byte, []byte, error) {
	dst = append(dst, '{')
	for i := range n.fields {
		f := &n.fields[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(jsonw.AppendString(dst, f.column), ':')
		var err error
		if dst, src, err = f.typ.decode(dst, src); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.column, err)
		}
	}
	return append(dst, '}'), src, nil
}

// decodeBlocks is decode of an array or a map, whose items Avro writes
// in blocks: a count, then that many items, until a count of 0.
func (n *avroNode) decodeBlocks(dst, src []byte) ([]byte, []byte, error) {
	open, end := byte('['), byte(']')
	if n.typ == "map" {
		open, end = '{', '}'
	}
	dst = append(dst, open)
	first := true
	for {
		count, rest, err := readLong(src)
		if err != nil {
			return nil, nil, err
		}
		src = rest
		if count == 0 {
			return append(dst, end), src, nil
		}
		if count < 0 { // a block with its size in bytes
			count = -count
			if _, src, err = readLong(src); err != nil {
				return nil, nil, err
			}
		}
		for ; count > 0; count-- {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if n.typ == "map" {
				var k []byte
				if k, src, err = readBytes(src); err != nil {
					return nil, nil, err
				}
				dst = append(jsonw.AppendString(dst, string(k)), ':')
			}
			if dst, src, err = n.items.decode(dst, src); err != nil {
				return nil, nil, err
			}
		}
	}
}

// appendLogicalLong appends an int or long as its logical type's value in
// the form pgcdc gives it (see the package documentation's table), so
// that JSONEncoder would write the same: dates, times and timestamps
// without zone as text, timestamps as RFC 3339 in UTC, the largest and
// smallest values as infinity and -infinity.
func appendLogicalLong(dst []byte, logical string, v int64) []byte {
	switch logical {
	case "date":
		switch v {
		case math.MaxInt32:
			return append(dst, `"infinity"`...)
		case math.MinInt32:
			return append(dst, `"-infinity"`...)
		}
		return append(appendDate(append(dst, '"'), v), '"')
	case "time-micros":
		return append(appendClock(append(dst, '"'), v), '"')
	case "timestamp-micros", "local-timestamp-micros":
		switch v {
		case math.MaxInt64:
			return append(dst, `"infinity"`...)
		case math.MinInt64:
			return append(dst, `"-infinity"`...)
		}
		if logical == "timestamp-micros" {
			return jsonw.AppendTime(dst, time.UnixMicro(v))
		}
		const day = 86400e6
		days, us := v/day, v%day
		if us < 0 {
			days, us = days-1, us+day
		}
		dst = append(appendDate(append(dst, '"'), days), 'T')
		return append(appendClock(dst, us), '"')
	}
	return strconv.AppendInt(dst, v, 10)
}

// appendDate appends the date days after 1970-01-01 as pgcdc writes
// dates: YYYY-MM-DD, at least four year digits, a '-' before years
// before 1 BC (year 0).
func appendDate(dst []byte, days int64) []byte {
	y, m, d := civilFromDays(days)
	if y < 0 {
		dst = append(dst, '-')
		y = -y
	}
	ys := strconv.FormatInt(y, 10)
	for i := len(ys); i < 4; i++ {
		dst = append(dst, '0')
	}
	dst = append(dst, ys...)
	return fmt.Appendf(dst, "-%02d-%02d", m, d)
}

// civilFromDays is Howard Hinnant's civil_from_days, daysFromCivil's
// inverse.
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// appendClock appends us microseconds since midnight as PostgreSQL
// prints a time: HH:MM:SS, and a fraction without trailing zeros.
func appendClock(dst []byte, us int64) []byte {
	sec := us / 1e6
	dst = fmt.Appendf(dst, "%02d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	if frac := us % 1e6; frac != 0 {
		digits := fmt.Sprintf("%06d", frac)
		dst = append(append(dst, '.'), strings.TrimRight(digits, "0")...)
	}
	return dst
}

// appendDecimalText appends the decimal of the big-endian two's
// complement unscaled value b at scale as a JSON string, as PostgreSQL
// prints a numeric(p,s): every decimal place of the scale.
func appendDecimalText(dst, b []byte, scale int) []byte {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	digits := n.String()
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	dst = append(dst, '"')
	if neg {
		dst = append(dst, '-')
	}
	return append(append(dst, digits...), '"')
}

// columnJSON is one column of a decoded row image.
type columnJSON struct {
	name  string
	value []byte // JSON
}

// decodeEnvelope appends the JSON of the Encoder's envelope at the start
// of src, as JSONEncoder writes the event: LSNs as decimal strings,
// unchanged, truncate and backfill_run_id left out when empty, and the
// unchanged columns left out of the row images.
func (n *avroNode) decodeEnvelope(dst, src []byte) ([]byte, []byte, error) {
	var (
		values [len(envelopeFields)][]byte
		rows   [len(envelopeFields)][]columnJSON
		err    error
	)
	for i := range n.fields {
		f := &n.fields[i]
		switch f.column {
		case "lsn", "commit_lsn":
			var lsn int64
			if lsn, src, err = readLong(src); err == nil {
				values[i] = append(strconv.AppendInt([]byte{'"'}, lsn, 10), '"')
			}
		case "before", "after":
			rows[i], src, err = f.typ.decodeRow(src)
		default:
			values[i], src, err = f.typ.decode(nil, src)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.column, err)
		}
	}
	var unchanged []string
	if err := json.Unmarshal(values[12], &unchanged); err != nil {
		return nil, nil, fmt.Errorf("unchanged: %w", err)
	}
	dst = append(dst, '{')
	for i, name := range envelopeFields {
		switch name {
		case "unchanged":
			if len(unchanged) == 0 {
				continue
			}
		case "truncate", "backfill_run_id":
			if string(values[i]) == "null" {
				continue
			}
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(jsonw.AppendString(dst, name), ':')
		if name != "before" && name != "after" {
			dst = append(dst, values[i]...)
			continue
		}
		if rows[i] == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = append(dst, '{')
		first := true
		for _, c := range rows[i] {
			if slices.Contains(unchanged, c.name) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(append(jsonw.AppendString(dst, c.name), ':'), c.value...)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), src, nil
}

// decodeRow decodes a row image, the union of null and the Value record:
// nil for null.
func (n *avroNode) decodeRow(src []byte) ([]columnJSON, []byte, error) {
	i, src, err := readLong(src)
	if err != nil || n.typ != "union" || i < 0 || i >= int64(len(n.branches)) {
		return nil, nil, fmt.Errorf("row image: union branch %d (%v)", i, err)
	}
	rec := n.branches[i]
	if rec.typ == "null" {
		return nil, src, nil
	}
	if rec.typ != "record" {
		return nil, nil, fmt.Errorf("row image: a %s, not a record", rec.typ)
	}
	row := make([]columnJSON, len(rec.fields))
	for j := range rec.fields {
		f := &rec.fields[j]
		row[j].name = f.column
		if row[j].value, src, err = f.typ.decode(nil, src); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.column, err)
		}
	}
	return row, src, nil
}

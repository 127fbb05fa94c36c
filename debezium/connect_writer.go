package debezium

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/kafkasink/kafkasink/encoding/avrobin"
	"github.com/kafkasink/kafkasink/encoding/jsonw"
)

// connectWriter writes the values of a Kafka Connect record, as
// Encoder's rules decide them, in one of two encodings: the JSON
// Kafka Connect's JsonConverter writes (every Encoder record's
// payload), or the Avro binary encoding of the schema Kafka Connect's
// AvroData makes from the record's Connect schema (AppendAvro, for the
// kafkasinkavro module). One set of rules writes both, so the two cannot
// disagree on a value.
//
// JSON needs no schema. Avro does: an optional field's union branch and a
// number's width (int or long, float or double) are the schema's. So in
// Avro the writer follows the record's Connect schema as it goes: slot is
// the schema of the value written next; a struct's members and an
// array's elements are taken in order. A value its slot cannot hold (an
// event whose Go value does not fit its column's declared type) is the
// writer's error, kept until the caller looks (failed).
type connectWriter struct {
	buf  []byte
	avro bool
	slot *connectSchema
	// open are the structs and arrays being written, innermost last
	// (Avro); depth counts them.
	open  [maxConnectDepth]openValue
	depth int
	err   error
}

// maxConnectDepth bounds the nesting of a Debezium record: the envelope,
// a row, an array column, a struct element (a point).
const maxConnectDepth = 6

// openValue is a struct or array being written in Avro: a struct's
// fields and the next one, or an array's items.
type openValue struct {
	fields []connectField
	next   int
	items  *connectSchema
}

// avroWriter returns a writer of Avro under the Connect schema s,
// appending to dst.
func avroWriter(dst []byte, s *connectSchema) connectWriter {
	return connectWriter{buf: dst, avro: true, slot: s}
}

// failed returns the writer's error, if a value did not fit its slot.
func (w *connectWriter) failed() error { return w.err }

func (w *connectWriter) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("kafkasink: writing Debezium's record in Avro: "+format, args...)
	}
}

// take writes the union branch of a value of Connect type typ (any
// type when "") in the current slot (Avro), and returns the slot; nil,
// failing, when there is none or it is of another type. The branches are
// AvroData's: an optional schema is the union ["null", T], or
// [T, "null"] when it has a default (a union's default is its first
// branch's).
func (w *connectWriter) take(typ string) *connectSchema {
	s := w.slot
	w.slot = nil
	if s == nil || typ != "" && s.typ != typ {
		w.mismatch(s, typ)
		return nil
	}
	if s.optional {
		w.buf = append(w.buf, s.valueBranch())
	}
	return s
}

// mismatch fails for a value of type typ that slot s cannot hold.
//
//go:noinline
func (w *connectWriter) mismatch(s *connectSchema, typ string) {
	if s == nil {
		w.fail("a value where the schema has none")
		return
	}
	w.fail("a %s where the schema has %s", typ, s.describe())
}

// valueBranch and nullBranch are the zig-zag bytes of the branches of
// an optional schema's union.
func (s *connectSchema) valueBranch() byte {
	if s.def == "" {
		return 2 // ["null", T]: branch 1
	}
	return 0
}

func (s *connectSchema) nullBranch() byte { return 2 - s.valueBranch() }

// null writes a null.
func (w *connectWriter) null() {
	if w.avro {
		w.avroNull()
		return
	}
	w.buf = append(w.buf, "null"...)
}

// The Avro halves of the writer's methods are functions of their own, so
// that the JSON halves are small enough for the compiler to inline.

func (w *connectWriter) avroNull() {
	s := w.slot
	w.slot = nil
	switch {
	case s == nil:
		w.mismatch(nil, "null")
	case !s.optional:
		w.fail("null where the schema (%s) requires a value", s.describe())
	default:
		w.buf = append(w.buf, s.nullBranch())
	}
}

// int writes an integer.
func (w *connectWriter) int(v int64) {
	if !w.avro {
		w.buf = strconv.AppendInt(w.buf, v, 10)
		return
	}
	w.avroNumber(v, float64(v), true)
}

// uint writes an unsigned integer.
func (w *connectWriter) uint(v uint64) {
	if !w.avro {
		w.buf = strconv.AppendUint(w.buf, v, 10)
		return
	}
	if v > math.MaxInt64 {
		w.fail("the integer %d is beyond Avro's long", v)
		return
	}
	w.avroNumber(int64(v), float64(v), true)
}

// uintText writes v, whose decimal text (JSON's) is text.
func (w *connectWriter) uintText(v uint64, text []byte) {
	if w.avro {
		w.uint(v)
		return
	}
	w.buf = append(w.buf, text...)
}

// float writes a float of bits 32 or 64; JSON writes NaN and the
// infinities as JsonConverter's strings.
func (w *connectWriter) float(f float64, bits int) {
	if !w.avro {
		w.buf = jsonw.AppendFloat(w.buf, f, bits)
		return
	}
	w.avroNumber(int64(f), f, false)
}

// avroNumber writes a number in its slot's type: an integer i (isInt)
// or a float f.
func (w *connectWriter) avroNumber(i int64, f float64, isInt bool) {
	s := w.take("")
	if s == nil {
		return
	}
	switch s.typ {
	case "int64":
		if isInt {
			w.buf = avrobin.AppendLong(w.buf, i)
			return
		}
	case "int8", "int16", "int32":
		if isInt {
			if int64(int32(i)) != i {
				w.fail("the integer %d is beyond Avro's int, the type of a Connect %s", i, s.typ)
				return
			}
			w.buf = avrobin.AppendLong(w.buf, i)
			return
		}
	case "float":
		w.buf = avrobin.AppendFloat(w.buf, float32(f))
		return
	case "double":
		w.buf = avrobin.AppendDouble(w.buf, f)
		return
	}
	w.fail("a number where the schema has %s", s.describe())
}

// bool writes a boolean.
func (w *connectWriter) bool(b bool) {
	if !w.avro {
		w.buf = jsonw.AppendBool(w.buf, b)
		return
	}
	if w.take("boolean") != nil {
		w.buf = avrobin.AppendBool(w.buf, b)
	}
}

// str writes a string; invalid UTF-8 becomes U+FFFD, byte by byte, as
// JSON strings write it.
func (w *connectWriter) str(s string) {
	if !w.avro {
		w.buf = jsonw.AppendString(w.buf, s)
		return
	}
	if w.take("string") != nil {
		w.buf = appendAvroText(w.buf, s)
	}
}

// appendAvroText appends s as an Avro string, each byte of invalid UTF-8
// replaced by U+FFFD (jsonw.AppendString's rule, encoding/json's).
func appendAvroText(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return avrobin.AppendString(dst, s)
	}
	size := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			size += len(string(utf8.RuneError))
		} else {
			size += n
		}
		i += n
	}
	dst = avrobin.AppendLong(dst, int64(size))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

// bytes writes Connect bytes: standard base64 in JSON, as JsonConverter
// writes them.
func (w *connectWriter) bytes(b []byte) {
	if !w.avro {
		w.buf = append(w.buf, '"')
		w.buf = base64.StdEncoding.AppendEncode(w.buf, b)
		w.buf = append(w.buf, '"')
		return
	}
	if w.take("bytes") != nil {
		w.buf = avrobin.AppendString(w.buf, b)
	}
}

// beginText starts a string the caller appends to buf itself, text that
// needs no JSON escape (digits, ISO times, base64, hex), and returns the
// mark to give endText.
func (w *connectWriter) beginText() int {
	if w.avro {
		return w.avroBeginText()
	}
	w.buf = append(w.buf, '"')
	return 0
}

//go:noinline
func (w *connectWriter) avroBeginText() int {
	w.take("string")
	w.buf = append(w.buf, 0) // room for a length below 64
	return len(w.buf)
}

// endText ends the string beginText started: in Avro its length goes in
// front, the text moved up when the length takes more than the byte
// beginText left.
func (w *connectWriter) endText(mark int) {
	if w.avro {
		w.avroEndText(mark)
		return
	}
	w.buf = append(w.buf, '"')
}

func (w *connectWriter) avroEndText(mark int) {
	size := len(w.buf) - mark
	if size < 64 {
		w.buf[mark-1] = byte(size << 1)
		return
	}
	var prefix [binary.MaxVarintLen64]byte
	length := avrobin.AppendLong(prefix[:0], int64(size))
	w.buf = append(w.buf, length[1:]...)
	copy(w.buf[mark-1+len(length):], w.buf[mark:mark+size])
	copy(w.buf[mark-1:], length)
}

// connectChunk is a run of a struct's members written once in both
// encodings, for the records that repeat them: from the field at, fields
// of them.
type connectChunk struct {
	json, avro []byte
	at, fields int
}

// writeChunk returns the members write writes, as the run of struct s's
// members from its field at.
func writeChunk(s *connectSchema, at int, write func(*connectWriter)) connectChunk {
	c := connectChunk{at: at}
	for _, avro := range [...]bool{false, true} {
		w := connectWriter{avro: avro, slot: s}
		w.beginStruct()
		w.open[0].next = at
		start := len(w.buf)
		write(&w)
		if err := w.failed(); err != nil {
			panic(err) // the members' schemas are the encoder's own: a bug
		}
		if avro {
			c.avro, c.fields = w.buf[start:], w.open[0].next-at
		} else {
			c.json = w.buf[start:]
		}
	}
	return c
}

// chunk writes the members of c, which must come next.
func (w *connectWriter) chunk(c *connectChunk) {
	if w.avro {
		w.avroChunk(c)
		return
	}
	w.buf = append(w.buf, c.json...)
}

func (w *connectWriter) avroChunk(c *connectChunk) {
	top := &w.open[w.depth-1]
	if top.next != c.at {
		w.fail("a run of members from field %d written at field %d", c.at, top.next)
		return
	}
	w.buf = append(w.buf, c.avro...)
	top.next += c.fields
}

// fixedText writes the next member of a struct and its value, a string
// known to need no JSON escape: json is the member's JSON text, its
// name and the string (`,"op":"c"`).
func (w *connectWriter) fixedText(json, text string) {
	if w.avro {
		w.avroFixedText(text)
		return
	}
	w.buf = append(w.buf, json...)
}

func (w *connectWriter) avroFixedText(text string) {
	w.nextField()
	w.avroText(text)
}

// text writes a string known to need no JSON escape.
func (w *connectWriter) text(s string) {
	if w.avro {
		w.avroText(s)
		return
	}
	w.buf = append(append(append(w.buf, '"'), s...), '"')
}

func (w *connectWriter) avroText(s string) {
	if w.take("string") != nil {
		w.buf = avrobin.AppendString(w.buf, s)
	}
}

// precomputed writes a value written before in both encodings: json, or
// avro, its Avro encoding without a union branch.
func (w *connectWriter) precomputed(json, avro []byte) {
	if w.avro {
		w.avroPrecomputed(avro)
		return
	}
	w.buf = append(w.buf, json...)
}

//go:noinline
func (w *connectWriter) avroPrecomputed(avro []byte) {
	if w.take("") != nil {
		w.buf = append(w.buf, avro...)
	}
}

// beginStruct starts a struct, whose members follow, in the schema's
// order, each after key or name.
func (w *connectWriter) beginStruct() {
	if w.avro {
		w.avroBeginStruct()
		return
	}
	w.buf = append(w.buf, '{')
}

func (w *connectWriter) avroBeginStruct() {
	if s := w.take("struct"); s != nil {
		w.push(openValue{fields: s.fields})
	}
}

// push opens a struct or an array. After a failure the writer writes
// nothing more (the caller gives up on the record at its next check), so
// an open that failed is not pushed, and members, elements and ends are
// not followed.
func (w *connectWriter) push(v openValue) {
	if w.depth == maxConnectDepth {
		w.fail("the record nests deeper than %d", maxConnectDepth)
		return
	}
	w.open[w.depth] = v
	w.depth++
}

// nulls writes the next n members of a struct as null: json is their
// JSON text (`,"xmin":null,"origin":null`).
func (w *connectWriter) nulls(json string, n int) {
	if w.avro {
		w.avroNulls(n)
		return
	}
	w.buf = append(w.buf, json...)
}

func (w *connectWriter) avroNulls(n int) {
	top := &w.open[w.depth-1]
	if top.next+n > len(top.fields) {
		w.extraMember()
		return
	}
	for i := range n {
		f := &top.fields[top.next+i].schema
		if !f.optional {
			w.fail("null where the schema (%s) requires a value", f.describe())
			return
		}
		w.buf = append(w.buf, f.nullBranch())
	}
	top.next += n
}

// key starts the next member of a struct: json is its JSON text, with
// the comma before it unless it is the first (`,"after":`).
func (w *connectWriter) key(json string) {
	if w.avro {
		w.nextField()
		return
	}
	w.buf = append(w.buf, json...)
}

// name starts the next member of a struct, named name, the first when
// first.
func (w *connectWriter) name(first bool, name string) {
	if !w.avro {
		if !first {
			w.buf = append(w.buf, ',')
		}
		w.buf = jsonw.AppendString(w.buf, name)
		w.buf = append(w.buf, ':')
		return
	}
	w.nextField()
}

// member starts the next member of a struct: json is its JSON text,
// with the comma before it (,"name":), which the first member goes
// without.
func (w *connectWriter) member(json string, first bool) {
	if w.avro {
		w.nextField()
		return
	}
	if first {
		json = json[1:]
	}
	w.buf = append(w.buf, json...)
}

func (w *connectWriter) nextField() {
	top := &w.open[w.depth-1] // a member is always inside a struct
	if top.next == len(top.fields) {
		w.extraMember()
		return
	}
	w.slot = &top.fields[top.next].schema
	top.next++
}

//go:noinline
func (w *connectWriter) extraMember() {
	w.fail("a member past the %d fields of its struct", len(w.open[w.depth-1].fields))
}

// endStruct ends a struct; in Avro every field must have been written.
func (w *connectWriter) endStruct() {
	if w.avro {
		w.avroEndStruct()
		return
	}
	w.buf = append(w.buf, '}')
}

func (w *connectWriter) avroEndStruct() {
	if w.err != nil {
		return
	}
	if top := &w.open[w.depth-1]; top.next != len(top.fields) {
		w.fail("%d of the %d fields of a struct written", top.next, len(top.fields))
	}
	w.depth--
}

// beginArray starts an array of n elements, each after elem.
func (w *connectWriter) beginArray(n int) {
	if w.avro {
		w.avroBeginArray(n)
		return
	}
	w.buf = append(w.buf, '[')
}

func (w *connectWriter) avroBeginArray(n int) {
	if s := w.take("array"); s != nil {
		if n > 0 {
			w.buf = avrobin.AppendLong(w.buf, int64(n)) // one block
		}
		w.push(openValue{items: s.items})
	}
}

// elem starts element i of an array.
func (w *connectWriter) elem(i int) {
	if !w.avro {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		return
	}
	if w.err == nil {
		w.slot = w.open[w.depth-1].items
	}
}

// endArray ends an array.
func (w *connectWriter) endArray() {
	if w.avro {
		w.avroEndArray()
		return
	}
	w.buf = append(w.buf, ']')
}

func (w *connectWriter) avroEndArray() {
	if w.err != nil {
		return
	}
	w.buf = append(w.buf, 0) // the end of the blocks
	w.depth--
}

// describe names s for an error: its type, and its name when it has one.
func (s *connectSchema) describe() string {
	out := s.typ
	if s.optional {
		out = "optional " + out
	}
	if s.name != "" {
		out += " " + s.name
	}
	return out
}

var errNoAvroRelation = errors.New("DebeziumEncoder writes Avro from the table's declared columns, and the event has none: set Event.Relation (pgcdc sets it)")

// joined writes the string a, sep, b (a table's "schema.table") without
// joining them first; sep needs no JSON escape.
func (w *connectWriter) joined(a string, sep byte, b string) {
	if !w.avro {
		// a's string reopened, then b's without its opening quote.
		w.buf = jsonw.AppendString(w.buf, a)
		w.buf = append(w.buf[:len(w.buf)-1], sep)
		n := len(w.buf)
		w.buf = jsonw.AppendString(w.buf, b)
		w.buf = append(w.buf[:n], w.buf[n+1:]...)
		return
	}
	if w.take("string") == nil {
		return
	}
	if !utf8.ValidString(a) || !utf8.ValidString(b) {
		w.buf = appendAvroText(w.buf, a+string(sep)+b)
		return
	}
	w.buf = avrobin.AppendLong(w.buf, int64(len(a)+1+len(b)))
	w.buf = append(append(append(w.buf, a...), sep), b...)
}

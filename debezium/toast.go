package debezium

import (
	"crypto/md5"

	"github.com/kafkasink/kafkasink"
)

// defaultUnavailablePlaceholder is Debezium's unavailable.value.placeholder.
const defaultUnavailablePlaceholder = "__debezium_unavailable_value"

// writeUnchanged writes the placeholder of an unchanged TOAST value (a
// value the change does not carry) in a column of declared type t, in
// the form Debezium 3.6.1 gives it (see toastFormOf), so that the value
// fits the column's schema: bytes for a bytea, a list for the arrays
// Debezium singles out, the string otherwise. Where Debezium writes null
// instead (its converters cannot take the placeholder: a bytea in the
// base64 and base64-url-safe modes, a bytea array in any mode but bytes,
// a date array under time.precision.mode connect or isostring), it writes
// the placeholder in the field's form, so that an unavailable value is
// not read as a NULL, and null only with MatchDebeziumLosses.
func (d *Encoder) writeUnchanged(w *connectWriter, t *kafkasink.TypeInfo) {
	p := d.UnavailableValuePlaceholder
	if p == "" {
		p = defaultUnavailablePlaceholder
	}
	base := declaredBase(t)
	var name, baseName string
	if t != nil {
		name = t.Name
	}
	if base != nil {
		baseName = base.Name
	}
	switch toastFormOf(name, baseName) {
	case toastBytes:
		switch {
		case d.BinaryHandling == BinaryBytes:
			d.writeBinary(w, []byte(p))
		case d.BinaryHandling != BinaryHex && d.MatchDebeziumLosses:
			w.null()
		default:
			// hex (and the string modes, when not matching Debezium's
			// loss): Debezium's hex converter writes the placeholder's
			// text.
			w.str(p)
		}
	case toastTextList:
		writeOneElement(w, p)
	case toastBytesList:
		switch {
		case d.BinaryHandling == BinaryBytes:
			w.beginArray(1)
			w.elem(0)
			d.writeBinary(w, []byte(p))
			w.endArray()
		case d.MatchDebeziumLosses:
			w.null()
		default:
			writeOneElement(w, p)
		}
	case toastIntList:
		if t.Elem != nil && t.Elem.Name == "date" && d.MatchDebeziumLosses &&
			(d.TimePrecision == TimeIsostring || d.TimePrecision == TimeConnect) {
			w.null()
			return
		}
		if t.Elem != nil && t.Elem.Name == "date" && d.TimePrecision == TimeIsostring {
			writeOneElement(w, p)
			return
		}
		writeSignedBytes(w, p)
	case toastUUIDList:
		writeOneElement(w, nameUUID(p))
	case toastHstoreMap:
		writeHstorePlaceholder(w, p)
	default:
		w.str(p)
	}
}

// writeOneElement writes the list of the one string s.
func writeOneElement(w *connectWriter, s string) {
	w.beginArray(1)
	w.elem(0)
	w.str(s)
	w.endArray()
}

// writeSignedBytes writes the list of the bytes of s, each as Java's
// signed byte (Debezium's int and bigint array placeholder).
func writeSignedBytes(w *connectWriter, s string) {
	w.beginArray(len(s))
	for i := 0; i < len(s); i++ {
		w.elem(i)
		w.int(int64(int8(s[i])))
	}
	w.endArray()
}

// nameUUID is Java's UUID.nameUUIDFromBytes of s: the version 3
// (MD5, name-based) UUID, in its lower-case text form.
func nameUUID(s string) string {
	sum := md5.Sum([]byte(s))
	sum[6] = sum[6]&0x0f | 0x30
	sum[8] = sum[8]&0x3f | 0x80
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, b := range sum {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, digits[b>>4], digits[b&0x0f])
	}
	return string(out)
}

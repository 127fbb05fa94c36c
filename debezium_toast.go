package kafkasink

import (
	"crypto/md5"
	"strconv"

	"github.com/kafkasink/kafkasink/internal/dbztoast"
	"github.com/kafkasink/kafkasink/internal/jsonw"
)

// defaultUnavailablePlaceholder is Debezium's unavailable.value.placeholder.
const defaultUnavailablePlaceholder = "__debezium_unavailable_value"

// appendUnchanged appends the placeholder of an unchanged TOAST value (a
// value the change does not carry) in a column of declared type t, in
// the form Debezium 3.6.1 gives it (see dbztoast.Of), so that the value
// fits the column's schema: bytes for a bytea, a list for the arrays
// Debezium singles out, the string otherwise. Where Debezium writes null
// instead (its converters cannot take the placeholder: a bytea in the
// base64 and base64-url-safe modes, a bytea array in any mode but bytes,
// a date array under time.precision.mode connect or isostring), it writes
// the placeholder in the field's form, so that an unavailable value is
// not read as a NULL, and null only with MatchDebeziumLosses.
func (d *DebeziumEncoder) appendUnchanged(dst []byte, t *TypeInfo) []byte {
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
	switch dbztoast.Of(name, baseName) {
	case dbztoast.Bytes:
		switch d.BinaryHandling {
		case BinaryBytes:
			return d.appendBinary(dst, []byte(p))
		case BinaryBase64, BinaryBase64URLSafe:
			if d.MatchDebeziumLosses {
				return append(dst, "null"...)
			}
		}
		// hex (and the string modes, when not matching Debezium's loss):
		// Debezium's hex converter writes the placeholder's text.
		return jsonw.AppendString(dst, p)
	case dbztoast.TextList:
		return appendOneElement(dst, p)
	case dbztoast.BytesList:
		if d.BinaryHandling == BinaryBytes {
			dst = append(dst, '[')
			return append(d.appendBinary(dst, []byte(p)), ']')
		}
		if d.MatchDebeziumLosses {
			return append(dst, "null"...)
		}
		return appendOneElement(dst, p)
	case dbztoast.IntList:
		if t.Elem != nil && t.Elem.Name == "date" {
			switch d.TimePrecision {
			case TimeIsostring:
				if d.MatchDebeziumLosses {
					return append(dst, "null"...)
				}
				return appendOneElement(dst, p)
			case TimeConnect:
				if d.MatchDebeziumLosses {
					return append(dst, "null"...)
				}
			}
		}
		return appendSignedBytes(dst, p)
	case dbztoast.UUIDList:
		return appendOneElement(dst, nameUUID(p))
	}
	return jsonw.AppendString(dst, p)
}

// appendOneElement appends the list of the one string s.
func appendOneElement(dst []byte, s string) []byte {
	dst = append(dst, '[')
	return append(jsonw.AppendString(dst, s), ']')
}

// appendSignedBytes appends the list of the bytes of s, each as Java's
// signed byte (Debezium's int and bigint array placeholder).
func appendSignedBytes(dst []byte, s string) []byte {
	dst = append(dst, '[')
	for i := 0; i < len(s); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(int8(s[i])), 10)
	}
	return append(dst, ']')
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

// Package avrobin appends values in Avro's binary encoding
// (https://avro.apache.org/docs/1.11.1/specification/#binary-encoding),
// for the debezium package's Connect writer and the kafkasinkavro
// module's encoders: straight into a record's buffer, nothing boxed.
//
// It is a supported package of the kafkasink module, which the
// kafkasinkavro module imports: its API follows the module's version
// like the rest of it (see the kafkasink package documentation), and
// what it writes is Avro's specification, which does not change.
package avrobin

import (
	"encoding/binary"
	"math"
)

// AppendLong appends n as a zig-zag varint: Avro's int and long, and the
// lengths and counts of strings, bytes, arrays and union branches.
func AppendLong(dst []byte, n int64) []byte {
	return binary.AppendUvarint(dst, uint64(n<<1)^uint64(n>>63))
}

// AppendString appends s as Avro's string (and bytes): its length, then
// its bytes.
func AppendString[T ~string | ~[]byte](dst []byte, s T) []byte {
	return append(AppendLong(dst, int64(len(s))), s...)
}

// AppendBool appends b as Avro's boolean: one byte, 0 or 1.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// AppendFloat appends f as Avro's float: its IEEE 754 bits, little-endian.
func AppendFloat(dst []byte, f float32) []byte {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
}

// AppendDouble appends f as Avro's double: its IEEE 754 bits,
// little-endian.
func AppendDouble(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

// Package pgoutputmsg builds pgoutput protocol messages byte by byte, for
// the tests of pgcdc and pgcdc/pgoutput. Each builder lays its message out
// as PostgreSQL's documentation, "Logical Replication Message Formats",
// describes it, so that a test feeds a Decoder what a server would send,
// malformed messages included (an Encoder writes any field in any order).
//
// Builders that take sx write a message that may stand inside a stream
// block (protocol version 2): sx is the transaction id such a message
// carries there, and 0 means outside one, where the field is absent (0 is
// InvalidTransactionId, never a real one).
//
// The package is for tests only: it checks nothing, and a message it
// builds is only as valid as the arguments it is given.
package pgoutputmsg

import (
	"encoding/binary"
	"time"

	"github.com/kafkasink/kafkasink"
)

// pgEpoch is the origin of the protocol's timestamps, which count
// microseconds since 2000-01-01 UTC.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// An Encoder appends the protocol's fields to a byte slice, big-endian as
// the protocol has them. Its zero value is an empty encoder, ready to use;
// every method returns the Encoder so that calls chain. An Encoder is not
// safe for concurrent use.
type Encoder struct{ b []byte }

// Message returns an Encoder holding the message type byte typ, the first
// field of every pgoutput message.
func Message(typ byte) *Encoder { return (&Encoder{}).Uint8(typ) }

// Bytes returns what e holds. The slice is e's own: appending to e may
// change it.
func (e *Encoder) Bytes() []byte { return e.b }

// Uint8 appends v (the protocol's Byte1 and Int8).
func (e *Encoder) Uint8(v byte) *Encoder { e.b = append(e.b, v); return e }

// Uint16 appends v (the protocol's Int16).
func (e *Encoder) Uint16(v uint16) *Encoder { e.b = binary.BigEndian.AppendUint16(e.b, v); return e }

// Uint32 appends v (the protocol's Int32).
func (e *Encoder) Uint32(v uint32) *Encoder { e.b = binary.BigEndian.AppendUint32(e.b, v); return e }

// Uint64 appends v (the protocol's Int64).
func (e *Encoder) Uint64(v uint64) *Encoder { e.b = binary.BigEndian.AppendUint64(e.b, v); return e }

// CString appends s and a terminating NUL byte (the protocol's String).
func (e *Encoder) CString(s string) *Encoder { e.b = append(append(e.b, s...), 0); return e }

// Raw appends b as it is (the protocol's Byten).
func (e *Encoder) Raw(b []byte) *Encoder { e.b = append(e.b, b...); return e }

// Time appends t as microseconds since 2000-01-01 UTC (the protocol's
// timestamps, an Int64).
func (e *Encoder) Time(t time.Time) *Encoder {
	return e.Uint64(uint64(t.Sub(pgEpoch).Microseconds()))
}

// XID appends the transaction id sx of a message inside a stream block,
// and nothing when sx is 0 (outside one).
func (e *Encoder) XID(sx uint32) *Encoder {
	if sx != 0 {
		e.Uint32(sx)
	}
	return e
}

// Tuple appends a TupleData: the number of columns, then each column.
func (e *Encoder) Tuple(cols []Value) *Encoder {
	e.Uint16(uint16(len(cols)))
	for _, c := range cols {
		e.Uint8(c.kind)
		if c.kind == 't' || c.kind == 'b' {
			e.Uint32(uint32(len(c.data))).Raw([]byte(c.data))
		}
	}
	return e
}

// Begin returns a Begin message ('B'): the final LSN of the transaction,
// its commit time and its xid.
func Begin(final kafkasink.LSN, ts time.Time, xid uint32) []byte {
	return Message('B').Uint64(uint64(final)).Time(ts).Uint32(xid).Bytes()
}

// Commit returns a Commit message ('C') with no flags: the commit's LSN,
// the end LSN of the transaction and its commit time.
func Commit(lsn, end kafkasink.LSN, ts time.Time) []byte {
	return Message('C').Uint8(0).Uint64(uint64(lsn)).Uint64(uint64(end)).Time(ts).Bytes()
}

// Origin returns an Origin message ('O') naming the origin name, at the
// origin's commit LSN 0x99.
func Origin(name string) []byte { return Message('O').Uint64(0x99).CString(name).Bytes() }

// Column describes one column of a Relation message.
type Column struct {
	// Key marks the column as part of the replica identity (flag 1).
	Key bool
	// Name is the column's name.
	Name string
	// TypeOID is the OID of the column's data type.
	TypeOID uint32
}

// Key returns the description of a column of the replica identity.
func Key(name string, typeOID uint32) Column { return Column{Key: true, Name: name, TypeOID: typeOID} }

// Col returns the description of a column outside the replica identity.
func Col(name string, typeOID uint32) Column { return Column{Name: name, TypeOID: typeOID} }

// Relation returns a Relation message ('R') for the relation oid named
// ns.name, with replica identity setting ident ('d', 'n', 'f' or 'i') and
// columns cols, each with type modifier -1.
func Relation(sx, oid uint32, ns, name string, ident byte, cols ...Column) []byte {
	e := Message('R').XID(sx).Uint32(oid).CString(ns).CString(name).Uint8(ident).Uint16(uint16(len(cols)))
	for _, c := range cols {
		flags := byte(0)
		if c.Key {
			flags = 1
		}
		e.Uint8(flags).CString(c.Name).Uint32(c.TypeOID).Uint32(0xFFFFFFFF)
	}
	return e.Bytes()
}

// Type returns a Type message ('Y') for the data type oid named ns.name.
func Type(sx, oid uint32, ns, name string) []byte {
	return Message('Y').XID(sx).Uint32(oid).CString(ns).CString(name).Bytes()
}

// Value is one column of a TupleData: its kind ('n', 'u', 't' or 'b') and,
// for 't' and 'b', its data.
type Value struct {
	kind byte
	data string
}

// Text returns a text-formatted value ('t').
func Text(s string) Value { return Value{'t', s} }

// Binary returns a binary-formatted value ('b').
func Binary(b []byte) Value { return Value{'b', string(b)} }

// Null returns a NULL value ('n').
func Null() Value { return Value{kind: 'n'} }

// Toast returns an unchanged TOASTed value ('u'), whose data the message
// leaves out.
func Toast() Value { return Value{kind: 'u'} }

// Tuple returns its arguments as a slice, for Update's old and new tuples.
func Tuple(v ...Value) []Value { return v }

// Insert returns an Insert message ('I') of the new tuple cols into
// relation rel.
func Insert(sx, rel uint32, cols ...Value) []byte {
	return Message('I').XID(sx).Uint32(rel).Uint8('N').Tuple(cols).Bytes()
}

// Update returns an Update message ('U') on relation rel. oldKind is 'K'
// (old key) or 'O' (old tuple) with the old tuple old, or 0 for none; new
// is the new tuple.
func Update(sx, rel uint32, oldKind byte, old, new []Value) []byte {
	e := Message('U').XID(sx).Uint32(rel)
	if oldKind != 0 {
		e.Uint8(oldKind).Tuple(old)
	}
	return e.Uint8('N').Tuple(new).Bytes()
}

// Delete returns a Delete message ('D') on relation rel, with the old key
// ('K') or old tuple ('O') as kind says.
func Delete(sx, rel uint32, kind byte, old ...Value) []byte {
	return Message('D').XID(sx).Uint32(rel).Uint8(kind).Tuple(old).Bytes()
}

// Truncate returns a Truncate message ('T') of relations rels with option
// bits opts (1 CASCADE, 2 RESTART IDENTITY).
func Truncate(sx uint32, opts byte, rels ...uint32) []byte {
	e := Message('T').XID(sx).Uint32(uint32(len(rels))).Uint8(opts)
	for _, r := range rels {
		e.Uint32(r)
	}
	return e.Bytes()
}

// Logical returns a logical decoding Message ('M') written at lsn with
// prefix and content, transactional or not.
func Logical(sx uint32, transactional bool, lsn kafkasink.LSN, prefix string, content string) []byte {
	flags := byte(0)
	if transactional {
		flags = 1
	}
	return Message('M').XID(sx).Uint8(flags).Uint64(uint64(lsn)).CString(prefix).
		Uint32(uint32(len(content))).Raw([]byte(content)).Bytes()
}

// StreamStart returns a Stream Start message ('S') for transaction xid;
// first marks the first stream block of that transaction.
func StreamStart(xid uint32, first bool) []byte {
	f := byte(0)
	if first {
		f = 1
	}
	return Message('S').Uint32(xid).Uint8(f).Bytes()
}

// StreamStop returns a Stream Stop message ('E').
func StreamStop() []byte { return Message('E').Bytes() }

// StreamCommit returns a Stream Commit message ('c') with no flags for
// transaction xid: the commit's LSN, the end LSN of the transaction and
// its commit time.
func StreamCommit(xid uint32, lsn, end kafkasink.LSN, ts time.Time) []byte {
	return Message('c').Uint32(xid).Uint8(0).Uint64(uint64(lsn)).Uint64(uint64(end)).Time(ts).Bytes()
}

// StreamAbort returns a Stream Abort message ('A') of subtransaction sub
// of transaction xid (sub == xid aborts the whole transaction).
func StreamAbort(xid, sub uint32) []byte { return Message('A').Uint32(xid).Uint32(sub).Bytes() }

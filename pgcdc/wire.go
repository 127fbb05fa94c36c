package pgcdc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/kafkasink/kafkasink"
)

// This file is pgoutput's byte layout: every message the Decoder receives
// is checked here before anything reads its fields, Insert, Update and
// Delete are parsed here, and the rest is handed to pglogrepl once its
// layout is known to be sound. Layouts follow PostgreSQL's "Logical
// Replication Message Formats".

// parse validates data and parses it: changes with parseChange into the
// reused d.changes, the other messages with pglogrepl.
func (d *Decoder) parse(lsn kafkasink.LSN, data []byte, inStream bool) (msg pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, &DecodeError{LSN: lsn, Err: errors.New("empty message")}
	}
	typ := data[0]
	if isChange(typ) {
		if err := parseChange(data, inStream, &d.changes); err != nil {
			return nil, &DecodeError{LSN: lsn, Type: typeName(typ), Err: err}
		}
		return &d.changes, nil
	}
	if err := validate(data, inStream, d.cfg.ProtocolVersion); err != nil {
		return nil, &DecodeError{LSN: lsn, Type: typeName(typ), Err: err}
	}
	// validate checks every length pglogrepl relies on; the recover is
	// only a backstop against parser panics validate does not foresee.
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, malformed(lsn, typ, "pglogrepl parser failed: %v", r)
		}
	}()
	msg, err = pglogrepl.ParseV2(data, inStream)
	if err != nil {
		return nil, &DecodeError{LSN: lsn, Type: typeName(typ), Err: err}
	}
	return msg, nil
}

// changeMsg is an Insert, Update or Delete message. The Decoder parses these
// itself rather than with pglogrepl: they are nearly every message of a
// stream, and pglogrepl allocates a struct and a copy per column, which was
// most of what decoding cost. A changeMsg is reused from message to message;
// its tuples point into the message bytes.
type changeMsg struct {
	typ      pglogrepl.MessageType // Insert, Update or Delete
	xid      uint32                // the (sub)transaction, inside a stream block; 0 outside
	relation uint32
	// oldKind says what old holds: 'K' the replica identity columns, 'O'
	// the whole old row, 0 that the message has no old tuple.
	oldKind byte
	old     tuple
	new     tuple
}

// Type implements pglogrepl.Message, so that parse returns every message
// kind alike.
func (m *changeMsg) Type() pglogrepl.MessageType { return m.typ }

// tuple is the TupleData of a change message, one entry per column.
type tuple []tupleColumn

type tupleColumn struct {
	kind byte   // 'n' null, 'u' unchanged TOAST, 't' text, 'b' binary
	data []byte // the value of a 't' or 'b' column, pointing into the message
}

const (
	columnNull      = 'n'
	columnUnchanged = 'u'
	columnText      = 't'
	columnBinary    = 'b'
)

func isChange(typ byte) bool {
	switch pglogrepl.MessageType(typ) {
	case pglogrepl.MessageTypeInsert, pglogrepl.MessageTypeUpdate, pglogrepl.MessageTypeDelete:
		return true
	}
	return false
}

// parseChange parses data, an Insert, Update or Delete message, into m,
// reusing m's column slices, and checks its layout the way validate checks
// the other messages. Layouts follow PostgreSQL's "Logical Replication
// Message Formats"; inStream adds the transaction id that messages inside a
// stream block carry.
func parseChange(data []byte, inStream bool, m *changeMsg) error {
	r := wire{b: data[1:]}
	m.typ, m.xid, m.oldKind = pglogrepl.MessageType(data[0]), 0, 0
	m.old, m.new = m.old[:0], m.new[:0]
	if inStream {
		m.xid = r.u32("transaction id")
	}
	m.relation = r.u32("relation OID")
	switch m.typ {
	case pglogrepl.MessageTypeInsert:
		r.tag("new tuple marker", 'N')
		m.new = r.tuple("new tuple", m.new)
	case pglogrepl.MessageTypeUpdate:
		switch kind := r.u8("tuple marker"); kind {
		case 'K', 'O':
			m.oldKind = kind
			m.old = r.tuple("old tuple", m.old)
			r.tag("new tuple marker", 'N')
		case 'N':
		default:
			r.fail(fmt.Errorf("tuple marker must be K, O or N"))
		}
		m.new = r.tuple("new tuple", m.new)
	case pglogrepl.MessageTypeDelete:
		switch kind := r.u8("old tuple marker"); kind {
		case 'K', 'O':
			m.oldKind = kind
		default:
			r.fail(fmt.Errorf("old tuple marker must be K or O"))
		}
		m.old = r.tuple("old tuple", m.old)
	default:
		return fmt.Errorf("message type %q is not a change", data[0])
	}
	return r.end()
}

// tuple reads a TupleData into cols, which it returns resliced.
func (r *wire) tuple(field string, cols tuple) tuple {
	if r.err == nil && len(r.b) < 2 {
		r.fail(fmt.Errorf("message too short: %s column count needs 2 bytes, %d left", field, len(r.b)))
	}
	n := r.u16("")
	for i := 0; i < int(n) && r.err == nil; i++ {
		if len(r.b) < 1 {
			r.fail(fmt.Errorf("message too short: %s column %d has no kind byte", field, i))
			break
		}
		c := tupleColumn{kind: r.b[0]}
		r.b = r.b[1:]
		switch c.kind {
		case columnNull, columnUnchanged:
		case columnText, columnBinary:
			if len(r.b) < 4 {
				r.fail(fmt.Errorf("message too short: %s column %d has no length", field, i))
				break
			}
			size := uint64(binary.BigEndian.Uint32(r.b))
			r.b = r.b[4:]
			if size > uint64(len(r.b)) {
				r.fail(fmt.Errorf("message too short: %s column %d is %d bytes long, %d left", field, i, size, len(r.b)))
				break
			}
			c.data, r.b = r.b[:size:size], r.b[size:]
		default:
			r.fail(fmt.Errorf("%s column %d has unknown kind %q", field, i, c.kind))
		}
		cols = append(cols, c)
	}
	return cols
}

// validate checks the layout of a pgoutput message, so that malformed input
// becomes an error naming what is wrong instead of a pglogrepl panic or a
// silently misread field. Layouts follow PostgreSQL's "Logical Replication
// Message Formats"; inStream adds the transaction id that messages inside a
// stream block carry. Insert, Update and Delete are not its business:
// parseChange checks them as it parses them.
func validate(data []byte, inStream bool, version int) error {
	r := wire{b: data[1:]}
	typ := data[0]
	xid := func() {
		if inStream {
			r.u32("transaction id")
		}
	}
	switch pglogrepl.MessageType(typ) {
	case pglogrepl.MessageTypeBegin:
		r.u64("final LSN")
		r.u64("commit time")
		r.u32("transaction id")
	case pglogrepl.MessageTypeCommit:
		r.u8("flags")
		r.u64("commit LSN")
		r.u64("end LSN")
		r.u64("commit time")
	case pglogrepl.MessageTypeOrigin:
		r.u64("origin LSN")
		r.cstring("origin name")
	case pglogrepl.MessageTypeRelation:
		xid()
		r.u32("relation OID")
		r.cstring("namespace")
		r.cstring("relation name")
		r.u8("replica identity")
		n := r.u16("column count")
		for i := 0; i < int(n) && r.err == nil; i++ {
			r.u8("column flags")
			r.cstring("column name")
			r.u32("column type OID")
			r.u32("column type modifier")
		}
	case pglogrepl.MessageTypeType:
		xid()
		r.u32("type OID")
		r.cstring("type namespace")
		r.cstring("type name")
	case pglogrepl.MessageTypeTruncate:
		xid()
		n := r.u32("relation count")
		r.u8("options")
		if n == 0 {
			r.fail(errors.New("truncate of no relation"))
		}
		if r.err == nil && uint64(n)*4 != uint64(len(r.b)) {
			r.fail(fmt.Errorf("relation count %d needs %d bytes of OIDs, %d left", n, uint64(n)*4, len(r.b)))
		}
		r.b = nil
	case pglogrepl.MessageTypeMessage:
		xid()
		if flags := r.u8("flags"); flags > 1 {
			r.fail(fmt.Errorf("flags %d: want 0 or 1", flags))
		}
		r.u64("message LSN")
		r.cstring("prefix")
		r.bytes("content", int64(r.u32("content length")))
	case pglogrepl.MessageTypeStreamStart, pglogrepl.MessageTypeStreamStop,
		pglogrepl.MessageTypeStreamCommit, pglogrepl.MessageTypeStreamAbort:
		if version < 2 {
			return errors.New("stream messages need protocol version 2")
		}
		r.streamControl(pglogrepl.MessageType(typ))
	default:
		return fmt.Errorf("unknown message type %q", typ)
	}
	return r.end()
}

// streamControl reads the fields of a Stream Start, Stop, Commit or Abort
// message.
func (r *wire) streamControl(typ pglogrepl.MessageType) {
	switch typ {
	case pglogrepl.MessageTypeStreamStart:
		r.u32("transaction id")
		if first := r.u8("first segment flag"); first > 1 {
			r.fail(fmt.Errorf("first segment flag %d: want 0 or 1", first))
		}
	case pglogrepl.MessageTypeStreamCommit:
		r.u32("transaction id")
		r.u8("flags")
		r.u64("commit LSN")
		r.u64("end LSN")
		r.u64("commit time")
	case pglogrepl.MessageTypeStreamAbort:
		r.u32("transaction id")
		r.u32("subtransaction id")
	}
}

// wire reads the fields of a message, remembering the first error.
type wire struct {
	b   []byte
	err error
}

// end returns the first error, or an error when bytes are left over.
func (r *wire) end() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d unexpected bytes after the message", len(r.b))
	}
	return nil
}

func (r *wire) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *wire) take(field string, n int64) []byte {
	if r.err != nil {
		return nil
	}
	if int64(len(r.b)) < n {
		r.fail(fmt.Errorf("message too short: %s needs %d bytes, %d left", field, n, len(r.b)))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *wire) u8(field string) uint8 {
	if b := r.take(field, 1); b != nil {
		return b[0]
	}
	return 0
}

func (r *wire) u16(field string) uint16 {
	if b := r.take(field, 2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *wire) u32(field string) uint32 {
	if b := r.take(field, 4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *wire) u64(field string) {
	r.take(field, 8)
}

func (r *wire) bytes(field string, n int64) {
	r.take(field, n)
}

func (r *wire) tag(field string, want byte) {
	if got := r.u8(field); r.err == nil && got != want {
		r.fail(fmt.Errorf("%s is %q, want %q", field, got, want))
	}
}

func (r *wire) cstring(field string) {
	if r.err != nil {
		return
	}
	i := bytes.IndexByte(r.b, 0)
	if i < 0 {
		r.fail(fmt.Errorf("%s is not NUL-terminated", field))
		return
	}
	r.b = r.b[i+1:]
}

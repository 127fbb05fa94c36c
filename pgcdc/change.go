package pgcdc

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pglogrepl"
)

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

// keyChanged reports whether an update moved its row to another key. A 'K'
// tuple holds the replica identity columns, an 'O' tuple the whole old row;
// the server also sends 'K' when the key did not change but is stored out
// of line, so the values are compared rather than the tuple's presence.
func keyChanged(rel *relInfo, m *changeMsg) bool {
	idx := rel.keyIdx
	if m.oldKind == 'K' {
		idx = rel.identIdx
	}
	for _, i := range idx {
		o, n := m.old[i], m.new[i]
		if o.kind == columnUnchanged || n.kind == columnUnchanged {
			continue // unchanged by definition
		}
		if o.kind != n.kind || !bytes.Equal(o.data, n.data) {
			return true
		}
	}
	return false
}

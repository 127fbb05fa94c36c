package pgoutput

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/kafkasink/kafkasink"
)

// This file is pgoutput's byte layout, parsed once: every message the
// Decoder receives is read here, field by field, into the struct the
// Decoder acts on, and a message whose layout is not sound becomes an error
// naming what is wrong, never a panic or a silently misread field. Layouts
// follow PostgreSQL's "Logical Replication Message Formats"; inStream adds
// the transaction id that messages inside a stream block carry.

// message is a parsed pgoutput message.
type message interface {
	Type() pglogrepl.MessageType
}

// parse parses data: changes into the reused d.changes, the other messages
// into a struct of their own.
func (d *Decoder) parse(lsn kafkasink.LSN, data []byte, inStream bool) (message, error) {
	if len(data) == 0 {
		return nil, &DecodeError{LSN: lsn, Err: errors.New("empty message")}
	}
	typ := data[0]
	var (
		msg message
		err error
	)
	if isChange(typ) {
		err = parseChange(data, inStream, &d.changes)
		msg = &d.changes
	} else {
		msg, err = parseMessage(data, inStream, d.cfg.ProtocolVersion)
	}
	if err != nil {
		return nil, &DecodeError{LSN: lsn, Type: typeName(typ), Err: err}
	}
	return msg, nil
}

// beginMsg is a Begin message.
type beginMsg struct {
	finalLSN kafkasink.LSN // the LSN of the commit record
	commit   time.Time
	xid      uint32
}

// commitMsg is a Commit message.
type commitMsg struct {
	commitLSN kafkasink.LSN
	endLSN    kafkasink.LSN // the end of the commit record
	commit    time.Time
}

// originMsg is an Origin message.
type originMsg struct{ name string }

// relationMsg is a Relation message.
type relationMsg struct {
	xid       uint32 // the (sub)transaction, inside a stream block; 0 outside
	oid       uint32
	namespace string
	name      string
	identity  byte // replica identity: 'd', 'n', 'f' or 'i'
	columns   []relationMsgColumn
}

type relationMsgColumn struct {
	flags  uint8 // 1: part of the replica identity
	name   string
	oid    uint32
	typmod int32
}

// typeDefMsg is a Type message (typeMsg builds one in the tests).
type typeDefMsg struct {
	xid       uint32
	oid       uint32
	namespace string
	name      string
}

// truncateMsg is a Truncate message.
type truncateMsg struct {
	xid       uint32
	options   uint8
	relations []uint32
}

// logicalMsg is a logical decoding Message; content points into the
// message bytes.
type logicalMsg struct {
	xid           uint32
	transactional bool
	lsn           kafkasink.LSN
	prefix        string
	content       []byte
}

// streamStartMsg is a Stream Start message.
type streamStartMsg struct {
	xid   uint32
	first bool // the transaction's first segment
}

// streamStopMsg is a Stream Stop message.
type streamStopMsg struct{}

// streamCommitMsg is a Stream Commit message.
type streamCommitMsg struct {
	xid       uint32
	commitLSN kafkasink.LSN
	endLSN    kafkasink.LSN
	commit    time.Time
}

// streamAbortMsg is a Stream Abort message.
type streamAbortMsg struct{ xid, subXid uint32 }

func (*beginMsg) Type() pglogrepl.MessageType        { return pglogrepl.MessageTypeBegin }
func (*commitMsg) Type() pglogrepl.MessageType       { return pglogrepl.MessageTypeCommit }
func (*originMsg) Type() pglogrepl.MessageType       { return pglogrepl.MessageTypeOrigin }
func (*relationMsg) Type() pglogrepl.MessageType     { return pglogrepl.MessageTypeRelation }
func (*typeDefMsg) Type() pglogrepl.MessageType      { return pglogrepl.MessageTypeType }
func (*truncateMsg) Type() pglogrepl.MessageType     { return pglogrepl.MessageTypeTruncate }
func (*logicalMsg) Type() pglogrepl.MessageType      { return pglogrepl.MessageTypeMessage }
func (*streamStartMsg) Type() pglogrepl.MessageType  { return pglogrepl.MessageTypeStreamStart }
func (*streamStopMsg) Type() pglogrepl.MessageType   { return pglogrepl.MessageTypeStreamStop }
func (*streamCommitMsg) Type() pglogrepl.MessageType { return pglogrepl.MessageTypeStreamCommit }
func (*streamAbortMsg) Type() pglogrepl.MessageType  { return pglogrepl.MessageTypeStreamAbort }

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

// Type implements message, so that parse returns every message kind
// alike.
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
// reusing m's column slices, and checks its layout the way parseMessage checks
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

// parseMessage parses data, any message but Insert, Update and Delete
// (parseChange's), and checks its layout: every length it reads is
// checked, and bytes left over are an error. version is the protocol
// version, which allows stream messages from 2 on.
func parseMessage(data []byte, inStream bool, version int) (message, error) {
	r := wire{b: data[1:]}
	typ := data[0]
	xid := func() uint32 {
		if inStream {
			return r.u32("transaction id")
		}
		return 0
	}
	var msg message
	switch pglogrepl.MessageType(typ) {
	case pglogrepl.MessageTypeBegin:
		msg = &beginMsg{finalLSN: r.lsn("final LSN"), commit: r.time("commit time"), xid: r.u32("transaction id")}
	case pglogrepl.MessageTypeCommit:
		r.u8("flags")
		msg = &commitMsg{commitLSN: r.lsn("commit LSN"), endLSN: r.lsn("end LSN"), commit: r.time("commit time")}
	case pglogrepl.MessageTypeOrigin:
		r.lsn("origin LSN")
		msg = &originMsg{name: r.cstring("origin name")}
	case pglogrepl.MessageTypeRelation:
		m := &relationMsg{xid: xid()}
		m.oid = r.u32("relation OID")
		m.namespace = r.cstring("namespace")
		m.name = r.cstring("relation name")
		m.identity = r.u8("replica identity")
		n := r.u16("column count")
		for i := 0; i < int(n) && r.err == nil; i++ {
			var c relationMsgColumn
			c.flags = r.u8("column flags")
			c.name = r.cstring("column name")
			c.oid = r.u32("column type OID")
			c.typmod = int32(r.u32("column type modifier"))
			m.columns = append(m.columns, c)
		}
		msg = m
	case pglogrepl.MessageTypeType:
		m := &typeDefMsg{xid: xid()}
		m.oid = r.u32("type OID")
		m.namespace = r.cstring("type namespace")
		m.name = r.cstring("type name")
		msg = m
	case pglogrepl.MessageTypeTruncate:
		m := &truncateMsg{xid: xid()}
		n := r.u32("relation count")
		m.options = r.u8("options")
		if n == 0 {
			r.fail(errors.New("truncate of no relation"))
		}
		if r.err == nil && uint64(n)*4 != uint64(len(r.b)) {
			r.fail(fmt.Errorf("relation count %d needs %d bytes of OIDs, %d left", n, uint64(n)*4, len(r.b)))
		}
		for r.err == nil && len(r.b) > 0 {
			m.relations = append(m.relations, r.u32("relation OID"))
		}
		msg = m
	case pglogrepl.MessageTypeMessage:
		m := &logicalMsg{xid: xid()}
		flags := r.u8("flags")
		if flags > 1 {
			r.fail(fmt.Errorf("flags %d: want 0 or 1", flags))
		}
		m.transactional = flags == 1
		m.lsn = r.lsn("message LSN")
		m.prefix = r.cstring("prefix")
		m.content = r.take("content", int64(r.u32("content length")))
		msg = m
	case pglogrepl.MessageTypeStreamStart, pglogrepl.MessageTypeStreamStop,
		pglogrepl.MessageTypeStreamCommit, pglogrepl.MessageTypeStreamAbort:
		if version < 2 {
			return nil, errors.New("stream messages need protocol version 2")
		}
		msg = r.streamControl(pglogrepl.MessageType(typ))
	default:
		return nil, fmt.Errorf("unknown message type %q", typ)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return msg, nil
}

// streamControl reads a Stream Start, Stop, Commit or Abort message.
func (r *wire) streamControl(typ pglogrepl.MessageType) message {
	switch typ {
	case pglogrepl.MessageTypeStreamStart:
		m := &streamStartMsg{xid: r.u32("transaction id")}
		first := r.u8("first segment flag")
		if first > 1 {
			r.fail(fmt.Errorf("first segment flag %d: want 0 or 1", first))
		}
		m.first = first == 1
		return m
	case pglogrepl.MessageTypeStreamCommit:
		m := &streamCommitMsg{xid: r.u32("transaction id")}
		r.u8("flags")
		m.commitLSN = r.lsn("commit LSN")
		m.endLSN = r.lsn("end LSN")
		m.commit = r.time("commit time")
		return m
	case pglogrepl.MessageTypeStreamAbort:
		return &streamAbortMsg{xid: r.u32("transaction id"), subXid: r.u32("subtransaction id")}
	}
	return &streamStopMsg{}
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

func (r *wire) u64(field string) uint64 {
	if b := r.take(field, 8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// lsn reads an LSN.
func (r *wire) lsn(field string) kafkasink.LSN { return kafkasink.LSN(r.u64(field)) }

// microsecFromUnixEpochToY2K is PostgreSQL's epoch, 2000-01-01, in
// microseconds since the Unix epoch.
const microsecFromUnixEpochToY2K = 946684800 * 1000000

// time reads a timestamp: microseconds since 2000-01-01, as pglogrepl
// converts them.
func (r *wire) time(field string) time.Time {
	return time.Unix(0, (microsecFromUnixEpochToY2K+int64(r.u64(field)))*1000)
}

func (r *wire) tag(field string, want byte) {
	if got := r.u8(field); r.err == nil && got != want {
		r.fail(fmt.Errorf("%s is %q, want %q", field, got, want))
	}
}

func (r *wire) cstring(field string) string {
	if r.err != nil {
		return ""
	}
	i := bytes.IndexByte(r.b, 0)
	if i < 0 {
		r.fail(fmt.Errorf("%s is not NUL-terminated", field))
		return ""
	}
	s := string(r.b[:i])
	r.b = r.b[i+1:]
	return s
}

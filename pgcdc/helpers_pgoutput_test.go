package pgcdc

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
)

// The helpers below encode pgoutput messages as PostgreSQL's "Logical
// Replication Message Formats" lays them out. sx is the transaction id a
// message carries inside a stream block; 0 means outside one (0 is
// InvalidTransactionId, never a real one). Package pgoutput's tests have
// the full set; these are the ones Run's tests feed a Decoder or a session.

type enc struct{ b []byte }

func (e *enc) u8(v byte) *enc      { e.b = append(e.b, v); return e }
func (e *enc) u16(v uint16) *enc   { e.b = binary.BigEndian.AppendUint16(e.b, v); return e }
func (e *enc) u32(v uint32) *enc   { e.b = binary.BigEndian.AppendUint32(e.b, v); return e }
func (e *enc) u64(v uint64) *enc   { e.b = binary.BigEndian.AppendUint64(e.b, v); return e }
func (e *enc) str(s string) *enc   { e.b = append(append(e.b, s...), 0); return e }
func (e *enc) raw(b []byte) *enc   { e.b = append(e.b, b...); return e }
func (e *enc) ts(t time.Time) *enc { return e.u64(uint64(t.Sub(pgEpoch).Microseconds())) }
func (e *enc) xid(sx uint32) *enc  { return e.cond(sx != 0, func() { e.u32(sx) }) }
func (e *enc) cond(c bool, f func()) *enc {
	if c {
		f()
	}
	return e
}

var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func msg(typ byte) *enc { return (&enc{}).u8(typ) }

func begin(final kafkasink.LSN, ts time.Time, xid uint32) []byte {
	return msg('B').u64(uint64(final)).ts(ts).u32(xid).b
}

func commit(lsn, end kafkasink.LSN, ts time.Time) []byte {
	return msg('C').u8(0).u64(uint64(lsn)).u64(uint64(end)).ts(ts).b
}

type relCol struct {
	key  bool
	name string
	oid  uint32
}

func relation(sx, oid uint32, ns, name string, ident byte, cols ...relCol) []byte {
	e := msg('R').xid(sx).u32(oid).str(ns).str(name).u8(ident).u16(uint16(len(cols)))
	for _, c := range cols {
		flags := byte(0)
		if c.key {
			flags = 1
		}
		e.u8(flags).str(c.name).u32(c.oid).u32(0xFFFFFFFF)
	}
	return e.b
}

// tcol is one column of a TupleData.
type tcol struct {
	kind byte
	data string
}

func txt(s string) tcol    { return tcol{'t', s} }
func null() tcol           { return tcol{kind: 'n'} }
func tup(c ...tcol) []tcol { return c }

func (e *enc) tuple(cols []tcol) *enc {
	e.u16(uint16(len(cols)))
	for _, c := range cols {
		e.u8(c.kind)
		if c.kind == 't' || c.kind == 'b' {
			e.u32(uint32(len(c.data))).raw([]byte(c.data))
		}
	}
	return e
}

func insert(sx, rel uint32, cols ...tcol) []byte {
	return msg('I').xid(sx).u32(rel).u8('N').tuple(cols).b
}

func update(sx, rel uint32, oldKind byte, old, new []tcol) []byte {
	e := msg('U').xid(sx).u32(rel)
	if oldKind != 0 {
		e.u8(oldKind).tuple(old)
	}
	return e.u8('N').tuple(new).b
}

func truncate(sx uint32, opts byte, rels ...uint32) []byte {
	e := msg('T').xid(sx).u32(uint32(len(rels))).u8(opts)
	for _, r := range rels {
		e.u32(r)
	}
	return e.b
}

func logical(sx uint32, transactional bool, lsn kafkasink.LSN, prefix string, content string) []byte {
	flags := byte(0)
	if transactional {
		flags = 1
	}
	return msg('M').xid(sx).u8(flags).u64(uint64(lsn)).str(prefix).u32(uint32(len(content))).raw([]byte(content)).b
}

func streamStart(xid uint32, first bool) []byte {
	f := byte(0)
	if first {
		f = 1
	}
	return msg('S').u32(xid).u8(f).b
}

func streamStop() []byte { return msg('E').b }

func streamCommit(xid uint32, lsn, end kafkasink.LSN, ts time.Time) []byte {
	return msg('c').u32(xid).u8(0).u64(uint64(lsn)).u64(uint64(end)).ts(ts).b
}

// wal is one XLogData: its WALStart and pgoutput payload.
type wal struct {
	lsn  kafkasink.LSN
	data []byte
}

// recorder collects what a Decoder delivers.
type recorder struct {
	events []kafkasink.Event
	txns   []Txn
	msgs   []Message
}

func newTestDecoder(t testing.TB, cfg DecoderConfig) (*Decoder, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg.OnEvent = func(ev kafkasink.Event) error { rec.events = append(rec.events, ev); return nil }
	cfg.OnCommit = func(tx Txn) error { rec.txns = append(rec.txns, tx); return nil }
	cfg.OnMessage = func(m Message) error { rec.msgs = append(rec.msgs, m); return nil }
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, rec
}

func feed(t *testing.T, d *Decoder, msgs ...wal) {
	t.Helper()
	for i, m := range msgs {
		if err := d.Decode(m.lsn, m.data); err != nil {
			t.Fatalf("message %d (%q at %s): %v", i, m.data[0], m.lsn, err)
		}
	}
}

var (
	t0     = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	usersR = relation(0, 16384, "public", "users", 'd',
		relCol{true, "id", pgtype.Int4OID}, relCol{false, "name", pgtype.TextOID}, relCol{false, "balance", pgtype.NumericOID})
)

func row(kv ...any) kafkasink.Row {
	var r kafkasink.Row
	for i := 0; i < len(kv); i += 2 {
		c := kafkasink.Column{Name: kv[i].(string), Value: kv[i+1]}
		if c.Value == unchanged {
			c.Value, c.Unchanged = nil, true
		}
		r = append(r, c)
	}
	return r
}

// unchanged marks an unchanged TOAST column in row.
var unchanged = &struct{ x int }{}

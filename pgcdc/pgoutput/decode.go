package pgoutput

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/kafkasink/kafkasink"
)

// ErrDecoderClosed is returned by Decoder.Decode after Decoder.Close. Test
// with errors.Is.
var ErrDecoderClosed = errors.New("pgcdc: decoder closed")

// DecoderConfig configures a Decoder. The zero value is not usable: OnEvent
// is required.
type DecoderConfig struct {
	// ProtocolVersion is the pgoutput proto_version the replication was
	// started with: 1, or 2 for streamed in-progress transactions
	// (PostgreSQL 14 and later, with the "streaming" option on). Zero
	// means 2. Version 1 refuses stream messages as malformed.
	ProtocolVersion int

	// SpoolDir is the directory for the temporary files that hold the
	// changes of streamed transactions until they commit. Empty means
	// os.TempDir(). The files hold row data and are created with mode
	// 0600.
	SpoolDir string
	// SpoolMaxBytes bounds the bytes the spool files hold at once, all
	// streamed transactions not yet committed together. A transaction
	// that would pass it stops decoding with a *kafkasink.ConfigError
	// saying so. Zero means DefaultSpoolMaxBytes; negative, no bound
	// but the disk's.
	SpoolMaxBytes int64

	// KeyColumns names the key columns of tables (see
	// kafkasink.TableKeys): for a table it names, they replace the replica
	// identity columns the Relation message flags. Tables with REPLICA
	// IDENTITY FULL flag every column, which names no row: without them,
	// their events have no Key (and their key changes go undetected)
	// unless Catalog.Key names one, as Run's names the primary key. Every
	// name it gives must be a column of the relation. Without them, the
	// replica identity columns are listed in the table's order, or with
	// a Catalog in their index's order (see pgcdc's documentation, "Decoding").
	KeyColumns kafkasink.TableKeys

	// OnEvent receives every row change, in order. Required. The Event
	// and its rows belong to the callee; Event.Key is shared between the
	// events of a relation and must not be modified. An error stops
	// decoding: Decode returns it unchanged.
	OnEvent func(kafkasink.Event) error

	// OnCommit, when set, is called after the last event of each committed
	// transaction. Only then is the transaction complete: see Decoder.
	OnCommit func(Txn) error

	// Counted, when set, says whether an event counts in the orders and
	// totals of its transaction (Event.Txn): those of the events a sink
	// delivers, as Debezium counts the events it emits. Run sets it to
	// its sink's Delivers method when the sink has one (*kafkasink.Sink
	// has: it leaves out the events its Encoder skips, such as
	// debezium.Encoder's SkippedOperations). nil counts every event.
	Counted func(*kafkasink.Event) bool

	// OnMessage, when set, receives logical decoding messages
	// (pg_logical_emit_message). Nil ignores them.
	OnMessage func(Message) error

	// IndexMessage, when set, says whether a transactional message with
	// this prefix takes the next index among its transaction's events
	// (Message.Position), for a source that delivers it as an event, as
	// Run does outbox messages. nil: no message takes one, so the
	// events' positions do not depend on the messages around them.
	IndexMessage func(prefix string) bool

	// OnRelation, when set, is called for every Relation message as it
	// takes effect, with the relation's schema, name and column names
	// in the order the server sends them: the columns the publication
	// publishes. The server describes a relation again after the table
	// or the publication changed, and after reconnecting. The slice
	// belongs to the callee.
	OnRelation func(schema, table string, columns []string)

	// Captures, when set, says whether the changes of a table are
	// delivered: those of a table it refuses are dropped before they are
	// placed in their transaction, so they take no Position index and
	// count in no Event.Txn order, as if the table were not published.
	// Run sets it from its Config's include and exclude lists.
	Captures func(schema, table string) bool

	// KeylessTables gives the events of a relation without key columns
	// (no KeyColumns entry, no replica identity that names its rows, no
	// answer from Catalog.Key) Event.Keyless, as pgcdc.Config.KeylessTables
	// does for Run. False, the default, leaves them without a Key.
	KeylessTables bool

	// PrevCommitEnd is the end of the commit record of the last
	// transaction delivered before the Decoder's first: the
	// Event.Source.PrevCommitEnd of the first transaction's events,
	// such as the last transaction a checkpoint records as written.
	// Zero, the default, means none is known. Reset returns to it. Run
	// sets it to the last transaction its cursor records as written.
	PrevCommitEnd kafkasink.LSN

	// Catalog, when set, answers what pgoutput does not say: the key of
	// a relation whose replica identity does not name its rows, the
	// order of the replica identity index's columns, the NOT NULL flags
	// and DEFAULTs of Event.Relation, and what types pgx does not know
	// are made of. Run sets it to one that reads the database's catalog
	// (see Catalog). Nil, the default, answers nothing: such relations
	// have no key, key columns follow the table's order, NOT NULL is
	// known of the replica identity columns only, and values of types
	// pgx does not know keep their text.
	Catalog Catalog
}

// Catalog answers a Decoder's questions about the database, which the
// Decoder asks at Relation messages (and, for a composite type whose
// values no longer fit its description, while it converts a value). Run's
// reads the catalog of the database it streams from, on a connection of
// its own; a Decoder given a Catalog that answers as Run's does yields the
// events Run writes. Its methods are called from Decode, which has no
// context: an implementation bounds its own queries (Run's uses the
// context of its replication session). An error it returns stops
// decoding: Decode returns it unchanged. A Decoder calls its Catalog from
// the goroutine that calls Decode only.
type Catalog interface {
	// Key returns the key columns, among columns, of a relation whose
	// replica identity does not name its rows (FULL, NOTHING, or DEFAULT
	// without a primary key) and that DecoderConfig.KeyColumns leaves
	// alone, or nil for none. Run's returns the primary key when all
	// its columns are published.
	Key(relation uint32, schema, table string, columns []string) ([]string, error)
	// IdentityIndex returns the columns of the relation's replica
	// identity index in the index's order: the index REPLICA IDENTITY
	// USING INDEX names when usingIndex, else the primary key; nil when
	// there is none. The Relation message flags these columns but lists
	// them in the table's order; Event.Key follows the index.
	IdentityIndex(relation uint32, usingIndex bool) ([]string, error)
	// Columns returns the NOT NULL flags and DEFAULT expressions of the
	// relation's columns, for Event.Relation. A column it leaves out is
	// nullable and has no DEFAULT.
	Columns(relation uint32) ([]CatalogColumn, error)
	// Type describes the type with OID oid, which pgx does not know;
	// found is false when there is no such type (dropped since).
	Type(oid uint32) (t CatalogType, found bool, err error)
}

// CatalogColumn is what a Catalog says of a column for Event.Relation
// (kafkasink.ColumnInfo), which a Relation message does not say.
type CatalogColumn struct {
	Name    string
	NotNull bool   // declared NOT NULL
	Default string // the DEFAULT expression; "" when none, and for a generated column
}

// CatalogType is what a Catalog says of a type pgx does not know, from
// pg_type. Domains convert as their base type, arrays element by element,
// composites attribute by attribute; other types (enums, ranges, extension
// types) keep their text.
type CatalogType struct {
	Name   string // typname, for Event.Relation
	Kind   byte   // typtype: 'c' composite, 'd' domain, 'e' enum, ...
	Base   uint32 // a domain's base type; 0 for other types
	Typmod int32  // a domain's typtypmod: the modifier of its base type
	// Array says the type is a true array type (typelem set, variable
	// length), of Elem, whose elements Delim (the element type's
	// typdelim) separates.
	Array      bool
	Elem       uint32
	Delim      byte
	Attributes []CatalogAttribute // a composite's attributes, in order
	Labels     []string           // an enum's labels in order, for Event.Relation
}

// CatalogAttribute is an attribute of a composite type.
type CatalogAttribute struct {
	Name string
	OID  uint32 // its type
}

// custom is t as the value converter keeps it.
func (t CatalogType) custom() customType {
	c := customType{name: t.Name, kind: t.Kind, base: t.Base, typmod: t.Typmod, array: t.Array, elem: t.Elem,
		delim: t.Delim, composite: t.Kind == 'c', labels: t.Labels}
	for _, a := range t.Attributes {
		c.attrs = append(c.attrs, typeAttr{name: a.Name, oid: a.OID})
	}
	return c
}

// Txn describes a committed transaction. It is passed to
// DecoderConfig.OnCommit after the transaction's last event.
type Txn struct {
	XID       uint32        // top-level transaction id
	CommitLSN kafkasink.LSN // LSN of the commit record: the Position.LSN of its events
	// EndLSN is the end of the commit record. Once every event of the
	// transaction is delivered, the replication loop may confirm it as
	// flushed.
	EndLSN   kafkasink.LSN
	Commit   time.Time // commit time
	Origin   string    // replication origin of the transaction, empty when none
	Events   int       // number of events delivered for the transaction
	Streamed bool      // the transaction was streamed while in progress and replayed at commit
}

// Message is a logical decoding message, written by pg_logical_emit_message.
type Message struct {
	LSN kafkasink.LSN // the message's own LSN
	// Transactional is pg_logical_emit_message's transactional argument.
	// A transactional message is part of its transaction: it is
	// delivered in order among the transaction's events, and never when
	// the transaction aborts. A non-transactional one is delivered as
	// soon as it is decoded, whether or not a transaction around it
	// commits.
	Transactional bool
	// XID is the top-level transaction a transactional message belongs
	// to; zero for a non-transactional message.
	XID uint32
	// Position is a transactional message's place among its
	// transaction's events: the commit LSN, and an index taken from the
	// events' indexes, so that a source turning the message into an
	// event (an outbox message) has a position in order with theirs.
	// Zero for a non-transactional message, and for one
	// DecoderConfig.IndexMessage does not pick.
	Position kafkasink.Position
	// Prefix is the prefix the message was emitted with, which tells the
	// messages of different programs apart; Run emits its heartbeats
	// with the prefix "kafkasink.heartbeat".
	Prefix string
	// Content is the message's payload, a copy that belongs to the
	// callee.
	Content []byte
}

// DecodeError is a pgoutput message the Decoder cannot decode: truncated or
// malformed bytes, a message out of protocol order, a change for a relation
// never described, a value that does not parse for its type. It is fatal:
// the server would send the same bytes again.
type DecodeError struct {
	LSN  kafkasink.LSN // WAL position of the message (XLogData WALStart)
	Type string        // message type, such as "Insert"; "" when unknown
	// Err says what is wrong with the message; errors.Is and errors.As
	// see through to it.
	Err error
}

// Error names the message type and position, then what is wrong.
func (e *DecodeError) Error() string {
	typ := e.Type
	if typ == "" {
		typ = "pgoutput"
	}
	return fmt.Sprintf("pgcdc: decoding %s message at %s: %v", typ, e.LSN, e.Err)
}

// Unwrap returns Err.
func (e *DecodeError) Unwrap() error { return e.Err }

// Decoder decodes a stream of pgoutput messages into events. It keeps the
// state the protocol depends on: the relation and type descriptions, the
// open transaction, and the spool files of streamed transactions.
//
// Events of an ordinary transaction are delivered as its changes arrive,
// each once the next change or the commit shows whether it is the
// transaction's last (see Event.Txn, which the Decoder fills), then
// OnCommit. Events of a streamed transaction are spooled to disk and
// delivered at its StreamCommit, followed by OnCommit; aborted streamed
// changes are never delivered. Either way a transaction is complete only
// when OnCommit is called. Each event's Position is (commit LSN, index from
// 0 within the transaction), so positions are the same every time the server
// sends the transaction and a partly written transaction can resume.
//
// After Decode returns an error, every call returns the same error until
// Reset: the state is no longer trustworthy. When the replication
// connection is lost, call Reset before decoding the new connection's
// messages: the server starts over from the confirmed position and repeats
// the open transaction, streamed ones from their first segment.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	cfg       DecoderConfig
	conv      *valueConverter
	relations map[uint32]*relInfo
	types     map[uint32]typeInfo

	state   protocolState
	spools  map[uint32]*txnSpool // streamed transactions not yet committed or aborted, by XID
	spooled spoolBudget          // what the spools may hold and hold

	// changes is reused by every Insert, Update and Delete message.
	changes changeMsg
	// columns is where newRow carves rows from.
	columns []kafkasink.Column

	// prevCommitEnd is the end of the commit record of the last
	// transaction delivered (Event.Source.PrevCommitEnd of the next
	// one's events); DecoderConfig.PrevCommitEnd before the first.
	prevCommitEnd kafkasink.LSN

	err    error
	closed bool
}

// phase is where the Decoder stands in pgoutput's message order.
type phase uint8

const (
	// phaseIdle is between transactions, including between the stream
	// blocks of a streamed transaction.
	phaseIdle phase = iota
	// phaseTxn is between the Begin and the Commit of an ordinary
	// transaction.
	phaseTxn
	// phaseStream is between a Stream Start and its Stream Stop.
	phaseStream
)

// protocolState is the Decoder's phase with what that phase holds: txn in
// phaseTxn, stream in phaseStream, nil otherwise. Only begin, startStream
// and toIdle change it.
type protocolState struct {
	phase  phase
	txn    *txnState // the open ordinary transaction
	stream *txnSpool // the spool of the stream block in progress
}

// begin opens ordinary transaction t.
func (d *Decoder) begin(t *txnState) { d.state = protocolState{phase: phaseTxn, txn: t} }

// startStream opens a stream block that spools into s.
func (d *Decoder) startStream(s *txnSpool) { d.state = protocolState{phase: phaseStream, stream: s} }

// toIdle ends the transaction or stream block in progress.
func (d *Decoder) toIdle() { d.state = protocolState{} }

// txnState is a transaction whose events are being delivered.
type txnState struct {
	xid       uint32
	commitLSN kafkasink.LSN
	commit    time.Time
	origin    string
	next      uint64 // index of the next event or transactional message
	messages  uint64 // transactional messages among the indexes taken

	// held is the transaction's latest event, not yet delivered: only
	// the next change or the commit tells whether it is the last
	// (Event.Txn.End). holding says whether held is set.
	held    kafkasink.Event
	holding bool
	// after are the transactional messages that came after held, which
	// follow it (DecoderConfig.OnMessage's order).
	after []Message
	// counted is how many events count in the transaction's orders
	// (DecoderConfig.Counted), tables how many of each table, in the
	// order of their first; lastTable indexes the one counted last.
	counted   int
	tables    []kafkasink.TableEvents
	lastTable int
}

// place sets ev.Txn, but for End: ev is t's next event, and counts
// when counted says so.
func (t *txnState) place(ev *kafkasink.Event, counted bool) {
	ev.Txn = kafkasink.TxnPlace{First: t.next == t.messages}
	if !counted {
		return
	}
	t.counted++
	i := t.lastTable
	if i >= len(t.tables) || t.tables[i].Table != ev.Table || t.tables[i].Schema != ev.Schema {
		i = slices.IndexFunc(t.tables, func(te kafkasink.TableEvents) bool { return te.Table == ev.Table && te.Schema == ev.Schema })
		if i < 0 {
			i = len(t.tables)
			t.tables = append(t.tables, kafkasink.TableEvents{Schema: ev.Schema, Table: ev.Table})
		}
		t.lastTable = i
	}
	t.tables[i].Events++
	ev.Txn.Order, ev.Txn.TableOrder = t.counted, t.tables[i].Events
}

// committed is the Txn that OnCommit receives for t, whose commit record
// ends at end.
func (t *txnState) committed(end kafkasink.LSN, streamed bool) Txn {
	return Txn{
		XID: t.xid, CommitLSN: t.commitLSN, EndLSN: end,
		Commit: t.commit, Origin: t.origin, Events: int(t.next - t.messages), Streamed: streamed,
	}
}

// relInfo is a relation as the last Relation message described it.
type relInfo struct {
	oid      uint32
	schema   string
	table    string
	cols     []relColumn
	key      []string // effective key column names, capacity clipped
	keyIdx   []int    // indexes of the effective key columns
	identIdx []int    // indexes of the replica identity columns
	keyless  bool     // no key: its events are Event.Keyless
	// relation is Event.Relation of the relation's events, made once the
	// columns' types are resolved.
	relation *kafkasink.Relation
}

type relColumn struct {
	name   string
	oid    uint32
	typmod int32
	ident  bool
}

// typeInfo is a non-built-in type as a Type message described it.
type typeInfo struct{ namespace, name string }

// NewDecoder returns a Decoder for cfg. It returns a *kafkasink.ConfigError
// listing every problem with cfg.
func NewDecoder(cfg DecoderConfig) (*Decoder, error) {
	var problems []string
	switch cfg.ProtocolVersion {
	case 0:
		cfg.ProtocolVersion = 2
	case 1, 2:
	default:
		problems = append(problems, fmt.Sprintf("pgcdc: DecoderConfig.ProtocolVersion %d is not supported: use 1 or 2", cfg.ProtocolVersion))
	}
	if cfg.OnEvent == nil {
		problems = append(problems, "pgcdc: DecoderConfig.OnEvent is required")
	}
	problems = append(problems, cfg.KeyColumns.Check("pgcdc: DecoderConfig.KeyColumns")...)
	if problems != nil {
		return nil, &kafkasink.ConfigError{Problems: problems}
	}
	conv := newValueConverter()
	if cat := cfg.Catalog; cat != nil {
		conv.describe = func(oid uint32) (customType, bool, error) {
			t, found, err := cat.Type(oid)
			return t.custom(), found, err
		}
		// Decode asks while converting values, to catch up with a
		// composite type changed since it was described.
		conv.liveCatalog = true
	}
	d := &Decoder{cfg: cfg, conv: conv}
	d.spooled = spoolBudget{max: cfg.SpoolMaxBytes, dir: cfg.SpoolDir}
	if d.spooled.max == 0 {
		d.spooled.max = DefaultSpoolMaxBytes
	}
	if d.spooled.dir == "" {
		d.spooled.dir = os.TempDir()
	}
	d.resetState()
	return d, nil
}

func (d *Decoder) resetState() {
	d.relations = make(map[uint32]*relInfo)
	d.types = make(map[uint32]typeInfo)
	d.toIdle()
	d.spools = make(map[uint32]*txnSpool)
	d.prevCommitEnd = d.cfg.PrevCommitEnd
	d.err = nil
}

// SpoolBytes returns the bytes the spool files hold now: the streamed
// transactions not yet committed or aborted. Unlike the Decoder's other
// methods, it is safe for concurrent use, so that a monitor may read it
// while another goroutine decodes.
func (d *Decoder) SpoolBytes() int64 { return d.spooled.used.Load() }

// InTransaction reports whether a transaction has begun and not yet
// committed. Streamed transactions between their stream blocks do not count:
// the server resends them in full after a reconnect.
func (d *Decoder) InTransaction() bool { return d.state.phase != phaseIdle }

// Reset forgets all protocol state (relations, types, the open transaction,
// streamed transactions and their spool files) and clears a previous error,
// so that decoding can start over on a new replication connection.
func (d *Decoder) Reset() error {
	err := d.removeSpools()
	if !d.closed {
		d.resetState()
	}
	return err
}

// Close removes the spool files. Decode returns ErrDecoderClosed after it.
// Close may be called more than once.
func (d *Decoder) Close() error {
	err := d.removeSpools()
	d.closed = true
	return err
}

func (d *Decoder) removeSpools() error {
	var errs []error
	for xid, s := range d.spools {
		errs = append(errs, s.remove())
		delete(d.spools, xid)
	}
	if d.state.phase == phaseStream {
		d.toIdle()
	}
	return errors.Join(errs...)
}

// Decode decodes one pgoutput message: the WALData of an XLogData message
// whose WALStart is walStart. It calls the DecoderConfig callbacks for what
// the message completes and returns their first error unchanged. A message it
// cannot decode yields a *DecodeError. Decode does not keep data.
func (d *Decoder) Decode(walStart kafkasink.LSN, data []byte) error {
	if d.closed {
		return ErrDecoderClosed
	}
	if d.err != nil {
		return d.err
	}
	if err := d.decode(walStart, data); err != nil {
		d.err = err
		return err
	}
	return nil
}

// malformed builds a DecodeError.
func malformed(lsn kafkasink.LSN, typ byte, format string, args ...any) error {
	return &DecodeError{LSN: lsn, Type: typeName(typ), Err: fmt.Errorf(format, args...)}
}

func typeName(typ byte) string {
	if s := pglogrepl.MessageType(typ).String(); s != "Unknown" {
		return s
	}
	return ""
}

// decode takes one message through the protocol: each kind of message is
// one step below, allowed in the phases the protocol allows it in.
func (d *Decoder) decode(lsn kafkasink.LSN, data []byte) error {
	msg, err := d.parse(lsn, data, d.state.phase == phaseStream)
	if err != nil {
		return err
	}
	typ := data[0]
	switch m := msg.(type) {
	case *beginMsg:
		return d.openTxn(lsn, typ, m)
	case *commitMsg:
		return d.commitTxn(lsn, typ, m)
	case *originMsg:
		return d.setOrigin(lsn, typ, m)
	case *relationMsg, *typeDefMsg:
		if d.state.phase == phaseStream {
			return d.spoolMessage(lsn, data, msg)
		}
		return d.schema(lsn, msg)
	case *changeMsg, *truncateMsg:
		switch d.state.phase {
		case phaseStream:
			return d.spoolMessage(lsn, data, msg)
		case phaseTxn:
			return d.change(d.state.txn, lsn, msg)
		}
		return malformed(lsn, typ, "change outside a transaction")
	case *logicalMsg:
		return d.logicalMessage(lsn, data, m)
	case *streamStartMsg:
		return d.openStream(lsn, typ, m)
	case *streamStopMsg:
		return d.closeStream(lsn, typ)
	case *streamCommitMsg:
		return d.commitStream(lsn, typ, m)
	case *streamAbortMsg:
		return d.abortStream(lsn, typ, m)
	}
	return malformed(lsn, typ, "unexpected message %T", msg)
}

// requireIdle refuses a message that may come only between transactions
// and stream blocks; what names it for the error.
func (d *Decoder) requireIdle(lsn kafkasink.LSN, typ byte, what string) error {
	switch d.state.phase {
	case phaseStream:
		return malformed(lsn, typ, "%s inside the stream of transaction %d", what, d.state.stream.xid)
	case phaseTxn:
		return malformed(lsn, typ, "%s while transaction %d is open", what, d.state.txn.xid)
	}
	return nil
}

// openTxn begins an ordinary transaction.
func (d *Decoder) openTxn(lsn kafkasink.LSN, typ byte, m *beginMsg) error {
	if err := d.requireIdle(lsn, typ, fmt.Sprintf("transaction %d begins", m.xid)); err != nil {
		return err
	}
	d.begin(&txnState{xid: m.xid, commitLSN: m.finalLSN, commit: m.commit.UTC()})
	return nil
}

// commitTxn ends the open ordinary transaction, whose events are all
// delivered, and calls OnCommit.
func (d *Decoder) commitTxn(lsn kafkasink.LSN, typ byte, m *commitMsg) error {
	switch d.state.phase {
	case phaseStream:
		return malformed(lsn, typ, "commit inside the stream of transaction %d", d.state.stream.xid)
	case phaseIdle:
		return malformed(lsn, typ, "commit without begin")
	}
	t := d.state.txn
	if m.commitLSN != t.commitLSN {
		return malformed(lsn, typ, "commit LSN %s differs from the final LSN %s announced by Begin of transaction %d",
			m.commitLSN, t.commitLSN, t.xid)
	}
	d.toIdle()
	return d.commit(t, t.committed(m.endLSN, false))
}

// setOrigin records the replication origin of the transaction in progress.
func (d *Decoder) setOrigin(lsn kafkasink.LSN, typ byte, m *originMsg) error {
	switch d.state.phase {
	case phaseStream:
		d.state.stream.origin = m.name
	case phaseTxn:
		d.state.txn.origin = m.name
	default:
		return malformed(lsn, typ, "origin outside a transaction")
	}
	return nil
}

// logicalMessage delivers a logical decoding message: a transactional one
// with its transaction (spooled with a streamed one), a non-transactional
// one at once.
func (d *Decoder) logicalMessage(lsn kafkasink.LSN, data []byte, m *logicalMsg) error {
	if !m.transactional {
		return d.message(m, nil)
	}
	switch d.state.phase {
	case phaseStream:
		return d.spoolMessage(lsn, data, m)
	case phaseTxn:
		return d.message(m, d.state.txn)
	}
	return malformed(lsn, data[0], "transactional message outside a transaction")
}

// openStream starts a stream block of a streamed transaction, spooling
// into the transaction's spool: a new one for its first segment.
func (d *Decoder) openStream(lsn kafkasink.LSN, typ byte, m *streamStartMsg) error {
	if err := d.requireIdle(lsn, typ, fmt.Sprintf("stream of transaction %d starts", m.xid)); err != nil {
		return err
	}
	s := d.spools[m.xid]
	switch {
	case m.first && s != nil:
		// Only a server that starts over sends a first segment
		// again, and it then resends everything: the old spool is
		// a stale prefix.
		if err := s.remove(); err != nil {
			return err
		}
		s = nil
	case !m.first && s == nil:
		return malformed(lsn, typ, "stream of transaction %d continues, but its first segment was never received", m.xid)
	}
	if s == nil {
		var err error
		if s, err = newTxnSpool(d.cfg.SpoolDir, m.xid, &d.spooled); err != nil {
			return err
		}
		d.spools[m.xid] = s
	}
	if err := s.open(); err != nil {
		return err
	}
	d.startStream(s)
	return nil
}

// closeStream ends the stream block in progress; its transaction waits
// for its next block, its commit or its abort.
func (d *Decoder) closeStream(lsn kafkasink.LSN, typ byte) error {
	if d.state.phase != phaseStream {
		return malformed(lsn, typ, "stream stop outside a stream")
	}
	s := d.state.stream
	d.toIdle()
	return s.pause()
}

// commitStream delivers a committed streamed transaction from its spool.
func (d *Decoder) commitStream(lsn kafkasink.LSN, typ byte, m *streamCommitMsg) error {
	if err := d.requireIdle(lsn, typ, fmt.Sprintf("commit of streamed transaction %d", m.xid)); err != nil {
		return err
	}
	s := d.spools[m.xid]
	if s == nil {
		return malformed(lsn, typ, "commit of streamed transaction %d, which was never streamed", m.xid)
	}
	delete(d.spools, m.xid)
	return d.replay(s, m)
}

// abortStream forgets a streamed transaction, or the changes of one of its
// subtransactions.
func (d *Decoder) abortStream(lsn kafkasink.LSN, typ byte, m *streamAbortMsg) error {
	if err := d.requireIdle(lsn, typ, fmt.Sprintf("abort of streamed transaction %d", m.xid)); err != nil {
		return err
	}
	s := d.spools[m.xid]
	switch {
	case s == nil:
		// Nothing was spooled for it, so there is nothing to forget.
		return nil
	case m.subXid == m.xid:
		delete(d.spools, m.xid)
		return s.remove()
	default:
		s.abortSub(m.subXid)
		return nil
	}
}

// schema applies a Relation or Type message.
func (d *Decoder) schema(lsn kafkasink.LSN, msg message) error {
	switch m := msg.(type) {
	case *typeDefMsg:
		d.types[m.oid] = typeInfo{namespace: m.namespace, name: m.name}
	case *relationMsg:
		rel, configured, err := d.newRelInfo(m)
		if err != nil {
			return &DecodeError{LSN: lsn, Type: "Relation", Err: err}
		}
		seen := make(map[uint32]bool)
		for _, c := range rel.cols {
			if err := d.conv.resolve(c.oid, seen); err != nil {
				return err
			}
		}
		if !configured && len(rel.keyIdx) > 0 && d.cfg.Catalog != nil {
			names, err := d.cfg.Catalog.IdentityIndex(rel.oid, m.identity == 'i')
			if err != nil {
				return err
			}
			if err := rel.orderKey(names); err != nil {
				return &DecodeError{LSN: lsn, Type: "Relation", Err: err}
			}
		}
		if !configured && len(rel.keyIdx) == 0 && d.cfg.Catalog != nil {
			key, err := d.cfg.Catalog.Key(rel.oid, rel.schema, rel.table, rel.columnNames())
			if err != nil {
				return err
			}
			if err := rel.setKey(key, "the fallback key"); err != nil {
				return &DecodeError{LSN: lsn, Type: "Relation", Err: err}
			}
		}
		rel.keyless = d.cfg.KeylessTables && len(rel.key) == 0
		cols := rel.describe(rel.identityNotNull(m.identity == 'f'))
		if d.cfg.Catalog != nil {
			declared, err := d.cfg.Catalog.Columns(rel.oid)
			if err != nil {
				return err
			}
			for i := range cols {
				cols[i].notNull, cols[i].def = false, ""
				if j := slices.IndexFunc(declared, func(c CatalogColumn) bool { return c.Name == cols[i].name }); j >= 0 {
					cols[i].notNull, cols[i].def = declared[j].NotNull, declared[j].Default
				}
			}
		}
		rel.relation = d.conv.relation(cols)
		// pgoutput sends a Relation message again after any invalidation
		// (a publication changed anywhere in the database, say), not only
		// after a change of the table: an unchanged description keeps its
		// *Relation, so all events of one table version share one.
		if old, ok := d.relations[m.oid]; ok && sameRelation(old.relation, rel.relation) {
			rel.relation = old.relation
		}
		d.relations[m.oid] = rel
		if d.cfg.OnRelation != nil {
			d.cfg.OnRelation(rel.schema, rel.table, rel.columnNames())
		}
	}
	return nil
}

// newRelInfo describes the relation of m, with the key DecoderConfig.KeyColumns
// names (configured is then true) or else its replica identity columns,
// unless the identity is FULL.
func (d *Decoder) newRelInfo(m *relationMsg) (rel *relInfo, configured bool, err error) {
	rel = &relInfo{oid: m.oid, schema: m.namespace, table: m.name}
	switch m.identity {
	case 'd', 'n', 'f', 'i':
	default:
		return nil, false, fmt.Errorf("relation %s.%s: unknown replica identity %q", m.namespace, m.name, m.identity)
	}
	full := m.identity == 'f'
	for i, c := range m.columns {
		ident := c.flags&1 != 0
		rel.cols = append(rel.cols, relColumn{name: c.name, oid: c.oid, typmod: c.typmod, ident: ident})
		if ident {
			rel.identIdx = append(rel.identIdx, i)
			if !full {
				// REPLICA IDENTITY FULL flags every column; a key
				// that is the whole row would give every version of
				// a row its own Kafka key.
				rel.keyIdx = append(rel.keyIdx, i)
			}
		}
	}
	if names, ok := d.cfg.KeyColumns.Columns(m.namespace, m.name); ok {
		return rel, true, rel.setKey(names, "DecoderConfig.KeyColumns (Config.KeyColumns, flag -key-columns of cmd/kafkasink)")
	}
	return rel, false, rel.setKey(nil, "")
}

// setKey makes names, columns of the relation, its key; nil keeps the
// key columns found so far. source names where the names come from, for
// the error when one is not a column.
func (r *relInfo) setKey(names []string, source string) error {
	if names != nil {
		r.keyIdx = r.keyIdx[:0:0]
		for _, name := range names {
			i := r.column(name)
			if i < 0 {
				return fmt.Errorf("relation %s.%s: key column %q from %s is not a column of the relation", r.schema, r.table, name, source)
			}
			r.keyIdx = append(r.keyIdx, i)
		}
	}
	r.key = nil
	for _, i := range r.keyIdx {
		r.key = append(r.key, r.cols[i].name)
	}
	r.key = r.key[:len(r.key):len(r.key)]
	return nil
}

// orderKey puts the key columns in the order of names, the replica
// identity index's columns as the catalog lists them now. The Relation
// message's flags decide which columns the key has: when the catalog
// names other columns (the index changed since the change was made), the
// key keeps the table's order.
func (r *relInfo) orderKey(names []string) error {
	if len(names) != len(r.keyIdx) {
		return nil
	}
	for _, name := range names {
		if j := r.column(name); j < 0 || !slices.Contains(r.keyIdx, j) {
			return nil
		}
	}
	return r.setKey(names, "the replica identity index")
}

// describe returns the relation's columns for Event.Relation, with
// notNull telling which column (by index) is NOT NULL.
func (r *relInfo) describe(notNull func(i int) bool) []relationColumn {
	cols := make([]relationColumn, len(r.cols))
	for i, c := range r.cols {
		cols[i] = relationColumn{name: c.name, oid: c.oid, typmod: c.typmod, notNull: notNull(i)}
	}
	return cols
}

// identityNotNull is what a decoder without a catalog knows of NOT NULL:
// the replica identity columns of a relation whose identity is not FULL
// are (a primary key's, or a unique index's over NOT NULL columns).
func (r *relInfo) identityNotNull(full bool) func(i int) bool {
	return func(i int) bool { return r.cols[i].ident && !full }
}

// columnNames returns the names of the relation's columns, in order.
func (r *relInfo) columnNames() []string {
	names := make([]string, len(r.cols))
	for i, c := range r.cols {
		names[i] = c.name
	}
	return names
}

func (r *relInfo) column(name string) int {
	for i, c := range r.cols {
		if c.name == name {
			return i
		}
	}
	return -1
}

func (r *relInfo) String() string { return fmt.Sprintf("%s.%s (OID %d)", r.schema, r.table, r.oid) }

func (d *Decoder) relation(lsn kafkasink.LSN, typ string, oid uint32) (*relInfo, error) {
	if rel, ok := d.relations[oid]; ok {
		return rel, nil
	}
	return nil, &DecodeError{LSN: lsn, Type: typ, Err: fmt.Errorf("unknown relation OID %d: no Relation message described it", oid)}
}

// change delivers the events of one data change of transaction t.
func (d *Decoder) change(t *txnState, lsn kafkasink.LSN, msg message) error {
	switch m := msg.(type) {
	case *changeMsg:
		typ := m.typ.String()
		rel, err := d.relation(lsn, typ, m.relation)
		if err != nil {
			return err
		}
		var before, after kafkasink.Row
		if m.typ != pglogrepl.MessageTypeDelete {
			// An unchanged TOAST column takes its value from a full old
			// row (REPLICA IDENTITY FULL) when it has one.
			var old tuple
			if m.oldKind == 'O' {
				old = m.old
			}
			if after, err = d.row(lsn, typ, rel, m.new, old, false); err != nil {
				return err
			}
		}
		if m.oldKind != 0 {
			if before, err = d.row(lsn, typ, rel, m.old, nil, m.oldKind == 'K'); err != nil {
				return err
			}
		}
		switch {
		case m.typ == pglogrepl.MessageTypeInsert:
			return d.emit(t, rel, lsn, kafkasink.OpInsert, nil, after)
		case m.typ == pglogrepl.MessageTypeDelete:
			return d.emit(t, rel, lsn, kafkasink.OpDelete, before, nil)
		case m.oldKind != 0 && keyChanged(rel, m):
			// A compacted topic keeps the last record per key: the old
			// key needs its own delete, or it lives forever. Each
			// event names the other's row (Source.KeyChange).
			del := d.event(t, rel, lsn, kafkasink.OpDelete, before, nil)
			del.Source.KeyChange = after
			if err := d.deliver(t, del); err != nil {
				return err
			}
			ins := d.event(t, rel, lsn, kafkasink.OpInsert, nil, after)
			ins.Source.KeyChange = before
			return d.deliver(t, ins)
		}
		return d.emit(t, rel, lsn, kafkasink.OpUpdate, before, after)

	case *truncateMsg:
		// Resolve every relation first, so that a bad OID delivers none.
		rels := make([]*relInfo, len(m.relations))
		for i, oid := range m.relations {
			rel, err := d.relation(lsn, "Truncate", oid)
			if err != nil {
				return err
			}
			rels[i] = rel
		}
		opts := kafkasink.TruncateOptions{
			Cascade:         m.options&pglogrepl.TruncateOptionCascade != 0,
			RestartIdentity: m.options&pglogrepl.TruncateOptionRestartIdentity != 0,
		}
		for _, rel := range rels {
			ev := d.event(t, rel, lsn, kafkasink.OpTruncate, nil, nil)
			ev.Truncate = opts
			if err := d.deliver(t, ev); err != nil {
				return err
			}
		}
		return nil
	}
	return &DecodeError{LSN: lsn, Err: fmt.Errorf("unexpected change message %T", msg)}
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

// row converts a tuple into a Row. keyOnly keeps the replica identity
// columns alone (a 'K' tuple sends the others as NULL, which they are not).
// old, when set, is the full old row of a REPLICA IDENTITY FULL update: it
// supplies the values of unchanged TOAST columns.
func (d *Decoder) row(lsn kafkasink.LSN, typ string, rel *relInfo, tup, old tuple, keyOnly bool) (kafkasink.Row, error) {
	if len(tup) != len(rel.cols) {
		return nil, &DecodeError{LSN: lsn, Type: typ, Err: fmt.Errorf("tuple has %d columns, relation %s has %d", len(tup), rel, len(rel.cols))}
	}
	if old != nil && len(old) != len(rel.cols) {
		return nil, &DecodeError{LSN: lsn, Type: typ, Err: fmt.Errorf("old tuple has %d columns, relation %s has %d", len(old), rel, len(rel.cols))}
	}
	n := len(rel.cols)
	if keyOnly {
		n = len(rel.identIdx)
	}
	out := d.newRow(n)
	for i, c := range tup {
		rc := rel.cols[i]
		if keyOnly && !rc.ident {
			continue
		}
		if c.kind == columnUnchanged && old != nil && old[i].kind != columnUnchanged {
			c = old[i]
		}
		col := kafkasink.Column{Name: rc.name}
		var err error
		switch c.kind {
		case columnNull:
		case columnUnchanged:
			col.Unchanged = true
		case columnText:
			col.Value, err = d.conv.text(rc.oid, c.data)
		case columnBinary:
			col.Value, err = d.conv.binary(rc.oid, c.data)
		default:
			err = fmt.Errorf("unknown tuple column kind %q", c.kind)
		}
		if err != nil {
			var ce *catalogError
			if errors.As(err, &ce) {
				return nil, ce.err
			}
			return nil, &DecodeError{LSN: lsn, Type: typ, Err: fmt.Errorf("column %q of %s: value of type %s does not parse: %w",
				rc.name, rel, d.conv.typeName(rc.oid, d.types), err)}
		}
		out = append(out, col)
	}
	return out, nil
}

// newRow returns an empty Row with room for n columns, carved from a shared
// allocation: one allocation per thousands of columns instead of one per
// row. Its capacity is exactly n, so appending to it never reaches into
// another row.
func (d *Decoder) newRow(n int) kafkasink.Row {
	if cap(d.columns)-len(d.columns) < n {
		d.columns = make([]kafkasink.Column, 0, max(4096, n))
	}
	start := len(d.columns)
	d.columns = d.columns[:start+n]
	return d.columns[start : start : start+n]
}

func (d *Decoder) emit(t *txnState, rel *relInfo, lsn kafkasink.LSN, op kafkasink.Op, before, after kafkasink.Row) error {
	return d.deliver(t, d.event(t, rel, lsn, op, before, after))
}

// event builds the event of one change of transaction t at the next index.
func (d *Decoder) event(t *txnState, rel *relInfo, lsn kafkasink.LSN, op kafkasink.Op, before, after kafkasink.Row) kafkasink.Event {
	return kafkasink.Event{
		Op:       op,
		Schema:   rel.schema,
		Table:    rel.table,
		Position: kafkasink.Position{LSN: t.commitLSN, Index: t.next},
		LSN:      lsn,
		XID:      t.xid,
		Commit:   t.commit,
		Key:      rel.key,
		Keyless:  rel.keyless,
		Relation: rel.relation,
		Before:   before,
		After:    after,
		Source:   kafkasink.Source{PrevCommitEnd: d.prevCommitEnd},
	}
}

// deliver places ev in t (Event.Txn), moves t to the next index, and
// hands the event held before it to OnEvent: ev is held until the next
// change or the commit shows whether it is the last.
func (d *Decoder) deliver(t *txnState, ev kafkasink.Event) error {
	if d.cfg.Captures != nil && !d.cfg.Captures(ev.Schema, ev.Table) {
		return nil
	}
	t.place(&ev, d.cfg.Counted == nil || d.cfg.Counted(&ev))
	t.next++
	held, holding := t.held, t.holding
	if holding {
		if err := d.release(t, held); err != nil {
			return err
		}
	}
	t.held, t.holding = ev, true
	return nil
}

// commit delivers the last event of transaction t, which ends at c, with
// the transaction as a whole (Event.Txn.End), then calls OnCommit.
func (d *Decoder) commit(t *txnState, c Txn) error {
	if t.holding {
		ev := t.held
		t.held, t.holding = kafkasink.Event{}, false
		ev.Txn.End = &kafkasink.TxnSummary{CommitEnd: c.EndLSN, Events: t.counted, Tables: t.tables}
		if err := d.release(t, ev); err != nil {
			return err
		}
	}
	d.prevCommitEnd = c.EndLSN
	if d.cfg.OnCommit == nil {
		return nil
	}
	return d.cfg.OnCommit(c)
}

// message delivers a logical decoding message: a transactional one of t,
// when t holds an event, after that event (see deliver), so that it stays
// in order among t's events; nil t for a non-transactional one.
//
// A transactional message IndexMessage picks takes the next index of t
// (Message.Position), whether or not OnMessage is set.
func (d *Decoder) message(m *logicalMsg, t *txnState) error {
	var pos kafkasink.Position
	if t != nil && d.cfg.IndexMessage != nil && d.cfg.IndexMessage(m.prefix) {
		pos = kafkasink.Position{LSN: t.commitLSN, Index: t.next}
		t.next++
		t.messages++
	}
	if d.cfg.OnMessage == nil {
		return nil
	}
	msg := Message{
		LSN:           m.lsn,
		Transactional: m.transactional,
		Prefix:        m.prefix,
		// pglogrepl's Content aliases the caller's buffer.
		Content: bytes.Clone(m.content),
	}
	if t == nil {
		return d.cfg.OnMessage(msg)
	}
	msg.XID = t.xid
	msg.Position = pos
	if t.holding {
		t.after = append(t.after, msg)
		return nil
	}
	return d.cfg.OnMessage(msg)
}

// release hands t's held event to OnEvent, then the messages that came
// after it.
func (d *Decoder) release(t *txnState, ev kafkasink.Event) error {
	if err := d.cfg.OnEvent(ev); err != nil {
		return err
	}
	after := t.after
	t.after = nil
	for _, m := range after {
		if err := d.cfg.OnMessage(m); err != nil {
			return err
		}
	}
	return nil
}

// spoolMessage appends a message of the stream in progress to its spool,
// tagged with the (sub)transaction it belongs to.
func (d *Decoder) spoolMessage(lsn kafkasink.LSN, data []byte, msg message) error {
	var sub uint32
	switch m := msg.(type) {
	case *relationMsg:
		sub = m.xid
	case *typeDefMsg:
		sub = m.xid
	case *changeMsg:
		sub = m.xid
	case *truncateMsg:
		sub = m.xid
	case *logicalMsg:
		sub = m.xid
	}
	return d.state.stream.append(sub, lsn, data)
}

// replay delivers a committed streamed transaction from its spool. Relation
// and Type messages take effect in spool order, as they would have had the
// transaction not been streamed; they are kept even when their
// subtransaction aborted, because the server does not describe a relation
// twice within one streamed transaction.
func (d *Decoder) replay(s *txnSpool, c *streamCommitMsg) (err error) {
	defer func() {
		// The callback's error stays unwrapped; a failed removal matters
		// only when nothing else failed.
		if rmErr := s.remove(); err == nil {
			err = rmErr
		}
	}()
	t := &txnState{xid: c.xid, commitLSN: c.commitLSN, commit: c.commit.UTC(), origin: s.origin}
	err = s.replay(func(sub uint32, lsn kafkasink.LSN, data []byte) error {
		msg, err := d.parse(lsn, data, true)
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *relationMsg, *typeDefMsg:
			return d.schema(lsn, msg)
		case *logicalMsg:
			if s.aborted(sub) {
				return nil
			}
			return d.message(m, t)
		default:
			if s.aborted(sub) {
				return nil
			}
			return d.change(t, lsn, msg)
		}
	})
	if err != nil {
		return err
	}
	return d.commit(t, t.committed(c.endLSN, true))
}

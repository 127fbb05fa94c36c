package kafkasink

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink/internal/lsntext"
)

// Op is the kind of change an Event records.
type Op uint8

// The operations a source can report. The zero Op is invalid, so an Event
// whose Op was never set is refused by Write instead of being guessed at.
const (
	OpInsert   Op = iota + 1 // a new row; After is set
	OpUpdate                 // a changed row; After is set, Before when the source has it
	OpDelete                 // a removed row; Before holds at least the key columns
	OpTruncate               // the whole table was emptied; no row images
	OpRead                   // a row read by a snapshot (backfill); After is set
)

var opNames = [...]string{OpInsert: "insert", OpUpdate: "update", OpDelete: "delete", OpTruncate: "truncate", OpRead: "read"}

// String returns the lower-case name of the operation ("insert", "update",
// "delete", "truncate", "read"), or "op(N)" for an invalid value.
func (o Op) String() string {
	if o.Valid() {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Valid reports whether o is one of the defined operations.
func (o Op) Valid() bool { return o >= OpInsert && o <= OpRead }

// LSN is a PostgreSQL log sequence number: a byte position in the
// write-ahead log. Its text form is the server's own, two hexadecimal halves
// separated by a slash ("16/B374D848").
type LSN uint64

// String returns the LSN in PostgreSQL's text form, for example "16/B374D848".
func (l LSN) String() string {
	return string(l.AppendText(make([]byte, 0, 17)))
}

// AppendText appends the PostgreSQL text form of l to dst.
func (l LSN) AppendText(dst []byte) []byte {
	return lsntext.Append(dst, uint64(l))
}

// ParseLSN parses PostgreSQL's text form of an LSN ("16/B374D848").
func ParseLSN(s string) (LSN, error) {
	l, err := lsntext.Parse(s)
	return LSN(l), err
}

// Position totally orders the events delivered through one sink: the commit
// LSN of the source transaction, then the event's index within it. Snapshot
// rows carry the LSN the snapshot was taken at, which is below the commit LSN
// of every transaction streamed after it.
//
// The zero Position is below every real position; a sink whose checkpoint is
// the zero Position has delivered nothing.
type Position struct {
	LSN   LSN    // commit LSN of the source transaction
	Index uint64 // index of the event within its transaction, from 0
}

// String returns the text form of p, "<commit LSN>:<index>" such as
// "16/B374D848:3". ParsePosition reverses it. The text form is also the
// event id, so it is unique per change.
func (p Position) String() string {
	return string(p.AppendText(make([]byte, 0, 28)))
}

// AppendText appends the text form of p to dst.
func (p Position) AppendText(dst []byte) []byte {
	dst = p.LSN.AppendText(dst)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, p.Index, 10)
}

// ParsePosition parses the text form String returns.
func ParsePosition(s string) (Position, error) {
	lsn, idx, ok := strings.Cut(s, ":")
	if !ok {
		return Position{}, fmt.Errorf("kafkasink: invalid position %q: want <LSN>:<index>, like 16/B374D848:3", s)
	}
	l, err := ParseLSN(lsn)
	if err != nil {
		return Position{}, fmt.Errorf("kafkasink: invalid position %q: %w", s, err)
	}
	i, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("kafkasink: invalid position %q: index %q is not a non-negative integer", s, idx)
	}
	return Position{LSN: l, Index: i}, nil
}

// Compare returns -1, 0 or +1 as p is below, equal to or above q.
func (p Position) Compare(q Position) int {
	switch {
	case p.LSN < q.LSN:
		return -1
	case p.LSN > q.LSN:
		return 1
	case p.Index < q.Index:
		return -1
	case p.Index > q.Index:
		return 1
	}
	return 0
}

// IsZero reports whether p is the zero Position.
func (p Position) IsZero() bool { return p == Position{} }

// Column is one column of a row image.
//
// Value holds one of: nil (SQL NULL), bool, int, int8, int16, int32, int64,
// uint, uint8, uint16, uint32, uint64, float32, float64, string, []byte,
// time.Time, Decimal, json.RawMessage, []any and map[string]any of these.
// Any other type is refused when the event is encoded, with an error naming
// the table and the column.
type Column struct {
	Name  string // the column's name, as the source stores it
	Value any    // the value, of one of the types above
	// Unchanged marks an unchanged TOAST value: the source did not send it
	// because it did not change, so Value is nil and means "unknown", not
	// NULL. Encoders leave such columns out and list them by name.
	Unchanged bool
}

// Row is a row image: its columns in table order. The order is kept so that
// encoded output is deterministic.
type Row []Column

// Get returns the column named name and whether the row has it.
func (r Row) Get(name string) (Column, bool) {
	for _, c := range r {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// Decimal is an exact numeric value in its decimal text form, such as
// "12345678901234567890.000001". Encoders write it as a JSON string, not
// a number, so that no digit is lost to floating point: JSON readers
// parse numbers as float64 and would round a numeric(38,10).
type Decimal string

// Event is one row change.
//
// An Event is a plain value; the sink does not keep it after Write returns.
type Event struct {
	Op       Op        // the kind of change; required
	Schema   string    // the table's schema, as the source stores it; required
	Table    string    // the table's name, as the source stores it; required
	Position Position  // totally orders events within a sink; also the event id
	LSN      LSN       // the change's own WAL position; zero when the source has none
	XID      uint32    // source transaction id; zero when the source has none
	Commit   time.Time // commit time of the source transaction
	Key      []string  // names of the key columns (primary key or replica identity)
	Before   Row       // old row image: deletes, and updates when the source has it
	After    Row       // new row image: inserts, updates and snapshot reads
	// Keyless says the event's table has no key at all, and the source
	// chose to write such events with a null Kafka key, in partition 0
	// of the topic (see AppendKey). Without it, an event with no key
	// columns is keyed by its event id. Config.KeyColumns for the table
	// take precedence. pgcdc sets it under its Config.KeylessTables.
	Keyless bool
	// BackfillRunID is set on snapshot rows (OpRead): the same for every row
	// of one snapshot run and new for every run.
	BackfillRunID string
	// Truncate holds the options of an OpTruncate; it is the zero value
	// for every other Op.
	Truncate TruncateOptions
	// Relation describes the event's table: every column with its declared
	// type. nil when the source does not describe its tables.
	Relation *Relation
	// Source is what the source says about where the event comes from
	// beyond its transaction (see Source).
	Source Source
	// Record, when set, makes the event a record the source made whole
	// (see SourceRecord): Op, Schema, Table and Position are still
	// required, and the row images are not written.
	Record *SourceRecord
	// Txn is where the event stands in its source transaction, for
	// encoders that describe transactions (such as one that writes
	// records around each, see Framer). pgcdc fills it for every change,
	// not for snapshot rows.
	Txn TxnPlace
}

// TxnPlace is where an event stands in its source transaction. The
// orders and counts are over the transaction's counted events: every
// event the source delivers, except those the sink says it leaves out
// (Sink.Delivers: a RecordShaper's Skip), so that an encoder that counts
// a transaction's events counts only those it writes. Its zero value
// means the source does not say.
//
// A source can fill it only once it knows the transaction's last event,
// which pgcdc learns from the next change or the commit: the event is
// delivered then. End is set on that last event alone, so no event
// shares anything with a transaction still being read.
type TxnPlace struct {
	// Order is the event's place among the transaction's counted
	// events, from 1; 0 on an event that is not counted.
	Order int
	// TableOrder is its place among the counted events of its own table
	// in the transaction, from 1; 0 on an event that is not counted.
	TableOrder int
	// First marks the transaction's first event the source delivers,
	// counted or not.
	First bool
	// End is set on the transaction's last event the source delivers,
	// counted or not: the transaction as a whole. nil on every other
	// event.
	End *TxnSummary
}

// TxnSummary is a committed source transaction as a whole, on its last
// event (TxnPlace.End).
type TxnSummary struct {
	// CommitEnd is the end of the transaction's commit record: the
	// position after which it is complete (pgcdc's Txn.EndLSN).
	CommitEnd LSN
	// Events is the number of counted events.
	Events int
	// Tables are the counted events per table, in the order of each
	// table's first counted event; tables with none are not listed.
	Tables []TableEvents
}

// TableEvents is how many counted events of a transaction one table has.
type TableEvents struct {
	Schema, Table string
	Events        int
}

// Source describes where an event comes from, for encoders that write a
// source block. Every field is optional: its zero value means the source
// does not say, and encoders write their "unknown" form.
type Source struct {
	// Database is the name of the database the event was read from.
	Database string
	// PrevCommitEnd is, on a change, the end of the commit record of the
	// transaction the source delivered before the event's own: with the
	// event's LSN it orders changes the way a source that resumes from
	// that point sees them. pgcdc's Run carries it across reconnects and
	// restarts in its checkpoint. Zero when the source does not know it
	// (before the first transaction after a snapshot; a Decoder used
	// alone, after each connection), and on snapshot rows.
	PrevCommitEnd LSN
	// Snapshot says where a snapshot row (OpRead) stands in its run.
	Snapshot SnapshotMark
	// SnapshotXID and SnapshotTime are, on a snapshot row, the id of the
	// transaction the snapshot reads in and the time it started: the
	// snapshot's counterparts of Event.XID and Event.Commit, which stay
	// zero on snapshot rows.
	SnapshotXID  uint32
	SnapshotTime time.Time
	// KeyChange is set on the two events a source emits for an update
	// that moved its row to another key, a delete of the old key and then
	// an insert of the new: the other event's row image (on the delete
	// the new row, on the insert the old row or key). nil otherwise.
	KeyChange Row
}

// SnapshotMark says where a snapshot row stands in its snapshot run: a set
// of flags, zero for a row the source does not place (and for changes).
type SnapshotMark uint8

// The flags of a SnapshotMark. A row may carry several: the only row of a
// table is both its first and its last.
const (
	SnapshotFirstInTable SnapshotMark = 1 << iota // the first row read from its table in the run
	SnapshotLastInTable                           // the last row read from its table in the run
	SnapshotFirst                                 // the first row of the run
	SnapshotLast                                  // the last row of the run
	// SnapshotIncremental marks a row a backfill read while the stream
	// ran (pgcdc's Backfills): an incremental snapshot.
	SnapshotIncremental
)

// TruncateOptions are the options a TRUNCATE statement named. They tell a
// consumer more than the one table the event names was emptied: with
// Cascade, tables referencing it were truncated too (each has its own
// event when the source publishes it); with RestartIdentity, the table's
// sequences started over, so new rows may reuse key values seen before.
type TruncateOptions struct {
	Cascade         bool // TRUNCATE ... CASCADE
	RestartIdentity bool // TRUNCATE ... RESTART IDENTITY
}

// ID returns the event id: the text form of its Position.
func (e *Event) ID() string { return e.Position.String() }

// Image returns the row that identifies the event's current state: After
// when the event has one, else Before.
func (e *Event) Image() Row {
	if e.After != nil {
		return e.After
	}
	return e.Before
}

// Batch is the input of one Write: events in strictly increasing Position
// order, and an optional source cursor.
type Batch struct {
	// Events are the changes to deliver, positions strictly increasing.
	Events []Event
	// Cursor is opaque JSON the source needs to resume (a snapshot's table
	// and last key, say). It is stored in the checkpoint with the batch's
	// last position and returned by Sink.Checkpoint. nil keeps the
	// previous cursor.
	Cursor json.RawMessage
}

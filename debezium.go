package kafkasink

import (
	"strconv"
	"time"

	"github.com/kafkasink/kafkasink/internal/jsonw"
)

// DebeziumEncoder writes Debezium's PostgreSQL connector envelope in its
// JSON form without schema (value.converter.schemas.enable=false), so
// consumers written for Debezium read kafkasink topics unchanged. Its zero
// value is ready to use and it is safe for concurrent use as long as Now
// is.
//
// The envelope and its source block are those Debezium 3.6.1 writes by
// default (testdata/debezium holds its captured output; a format change
// from earlier kafkasink versions, whose source.lsn was a string and which
// had no ts_us, ts_ns, sequence, xmin, origin or origin_lsn). The fields,
// always in this order:
//
//	before       the old row object, or null
//	after        the new row object, or null
//	source       an object:
//	  version      DebeziumVersion ("3.6.1.Final"), the release whose
//	               output this is
//	  connector    "postgresql"
//	  name         Name, or "kafkasink" when empty (Debezium's topic prefix)
//	  ts_ms        the commit time (a snapshot row: the time the snapshot's
//	               transaction started, Event.Source.SnapshotTime) in Unix
//	               milliseconds; 0 when unknown
//	  snapshot     "false" for a change; for a snapshot row (OpRead), by
//	               Event.Source.Snapshot: "last" (the run's last row),
//	               "first" (its first), "last_in_data_collection" (a
//	               table's last), "first_in_data_collection" (a table's
//	               first), else "true"
//	  db           Event.Source.Database ("" when the source does not say)
//	  sequence     a string holding a JSON array of two strings: the end
//	               of the previous transaction's commit record
//	               (Event.Source.PrevCommitEnd; null when unknown and on
//	               snapshot rows) and the lsn below
//	  ts_us, ts_ns ts_ms in microseconds and nanoseconds
//	  schema       the source schema
//	  table        the source table
//	  txId         the source transaction id (a snapshot row: the
//	               snapshot's, Event.Source.SnapshotXID), a number
//	  lsn          the change's LSN (e.LSN, or the commit LSN when the
//	               change has none; a snapshot row: the snapshot's LSN), a
//	               number as Debezium writes it (LSNs above 2^53 lose
//	               digits in JavaScript and other float-based readers;
//	               sequence holds them as strings)
//	  xmin         null
//	  origin       null
//	  origin_lsn   null
//	transaction  null
//	op           "c" insert, "u" update, "d" delete, "r" snapshot read,
//	             "t" truncate
//	ts_ms        the time the event was encoded (Now) in Unix milliseconds
//	ts_us, ts_ns the same in microseconds and nanoseconds
//
// A truncate is op "t" with null before and after, as Debezium writes it;
// its options (e.Truncate: CASCADE, RESTART IDENTITY) are not in the
// envelope, which Debezium defines without them and which strict readers
// bind to fixed fields. JSONEncoder carries them.
//
// Column values follow the kafkasink rules (see Encoder), which match
// Debezium's string-based settings (decimal.handling.mode=string, ISO
// timestamps) rather than its numeric defaults; json and jsonb values are
// strings holding the document, as Debezium's io.debezium.data.Json; unchanged
// TOAST columns are left out instead of carrying Debezium's placeholder
// string.
type DebeziumEncoder struct {
	// Name is the logical server name written to source.name. Empty means
	// "kafkasink".
	Name string
	// Now returns the time written to the top-level ts_ms. nil means
	// time.Now; tests set a fixed clock.
	Now func() time.Time
}

// debeziumOps maps an Op to Debezium's single-letter operation code.
// DebeziumVersion is what DebeziumEncoder writes to source.version: the
// Debezium release whose default output it reproduces, so that a consumer
// that checks the version reads the format it expects. The records' own
// kafkasink.* headers tell them apart from Debezium's.
const DebeziumVersion = "3.6.1.Final"

var debeziumOps = [...]string{OpInsert: "c", OpUpdate: "u", OpDelete: "d", OpTruncate: "t", OpRead: "r"}

// Encode implements Encoder. It never returns a tombstone: Debezium's own
// tombstone after a delete is a second record, which the sink does not emit.
func (d DebeziumEncoder) Encode(dst []byte, e *Event) ([]byte, error) {
	if !e.Op.Valid() {
		return nil, invalidOpError(e)
	}
	dst = append(dst, `{"before":`...)
	var err error
	if dst, err = appendRow(dst, e, e.Before); err != nil {
		return nil, err
	}
	dst = append(dst, `,"after":`...)
	if dst, err = appendRow(dst, e, e.After); err != nil {
		return nil, err
	}
	dst = append(dst, `,"source":{"version":"`+DebeziumVersion+`","connector":"postgresql","name":`...)
	if d.Name == "" {
		dst = append(dst, `"kafkasink"`...)
	} else {
		dst = jsonw.AppendString(dst, d.Name)
	}
	src := &e.Source
	at, xid := e.Commit, e.XID
	if e.Op == OpRead {
		at, xid = src.SnapshotTime, src.SnapshotXID
	}
	dst = append(dst, `,"ts_ms":`...)
	var us int64
	if !at.IsZero() {
		us = at.UnixMicro()
	}
	dst = strconv.AppendInt(dst, floorDiv(us, 1000), 10)
	dst = append(dst, `,"snapshot":"`...)
	dst = append(dst, debeziumSnapshot(e)...)
	dst = append(dst, `","db":`...)
	dst = jsonw.AppendString(dst, src.Database)
	lsn := e.LSN
	if lsn == 0 {
		lsn = e.Position.LSN
	}
	// sequence is a string holding a JSON array of two strings: the end
	// of the previous transaction's commit record (null when unknown)
	// and the change's LSN.
	dst = append(dst, `,"sequence":"[`...)
	if src.PrevCommitEnd == 0 || e.Op == OpRead {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `\"`...)
		dst = strconv.AppendUint(dst, uint64(src.PrevCommitEnd), 10)
		dst = append(dst, `\"`...)
	}
	dst = append(dst, `,\"`...)
	dst = strconv.AppendUint(dst, uint64(lsn), 10)
	dst = append(dst, `\"]","ts_us":`...)
	dst = strconv.AppendInt(dst, us, 10)
	dst = append(dst, `,"ts_ns":`...)
	dst = strconv.AppendInt(dst, us*1000, 10)
	dst = append(dst, `,"schema":`...)
	dst = jsonw.AppendString(dst, e.Schema)
	dst = append(dst, `,"table":`...)
	dst = jsonw.AppendString(dst, e.Table)
	dst = append(dst, `,"txId":`...)
	dst = strconv.AppendUint(dst, uint64(xid), 10)
	dst = append(dst, `,"lsn":`...)
	dst = strconv.AppendUint(dst, uint64(lsn), 10)
	dst = append(dst, `,"xmin":null,"origin":null,"origin_lsn":null},"transaction":null,"op":"`...)
	dst = append(dst, debeziumOps[e.Op]...)
	now := d.Now
	if now == nil {
		now = time.Now
	}
	ns := now().UnixNano()
	dst = append(dst, `","ts_ms":`...)
	dst = strconv.AppendInt(dst, floorDiv(ns, 1e6), 10)
	dst = append(dst, `,"ts_us":`...)
	dst = strconv.AppendInt(dst, floorDiv(ns, 1e3), 10)
	dst = append(dst, `,"ts_ns":`...)
	dst = strconv.AppendInt(dst, ns, 10)
	return append(dst, '}'), nil
}

// floorDiv is a/b rounded down, as Java's Instant arithmetic rounds times
// before 1970.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// debeziumSnapshot is source.snapshot: where a snapshot row stands in its
// run, with Debezium's precedence (the last row of the run is "last" even
// when it is also the first of its table), or "false" for a change.
func debeziumSnapshot(e *Event) string {
	if e.Op != OpRead {
		return "false"
	}
	switch m := e.Source.Snapshot; {
	case m&SnapshotLast != 0:
		return "last"
	case m&SnapshotFirst != 0:
		return "first"
	case m&SnapshotLastInTable != 0:
		return "last_in_data_collection"
	case m&SnapshotFirstInTable != 0:
		return "first_in_data_collection"
	}
	return "true"
}

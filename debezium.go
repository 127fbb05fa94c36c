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
// The fields, always in this order:
//
//	before       the old row object, or null
//	after        the new row object, or null
//	source       an object:
//	  version      "kafkasink"
//	  connector    "postgresql"
//	  name         Name, or "kafkasink" when empty (Debezium's topic prefix)
//	  ts_ms        the commit time in Unix milliseconds; 0 when unknown
//	  snapshot     "true" for snapshot rows (OpRead), else "false"
//	  db           "" (the source does not report the database name)
//	  schema       the source schema
//	  table        the source table
//	  txId         the source transaction id, a number
//	  lsn          the change's LSN (e.LSN, or the commit LSN when the
//	               change has none) as a decimal STRING: Debezium writes a
//	               number, but LSNs exceed 2^53 and would be rounded by
//	               JavaScript and other float-based readers; Jackson and
//	               most typed readers coerce the string to a long
//	  sequence     null
//	op           "c" insert, "u" update, "d" delete, "r" snapshot read,
//	             "t" truncate
//	ts_ms        the time the event was encoded (Now) in Unix milliseconds
//	transaction  null
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
	dst = append(dst, `,"source":{"version":"kafkasink","connector":"postgresql","name":`...)
	if d.Name == "" {
		dst = append(dst, `"kafkasink"`...)
	} else {
		dst = jsonw.AppendString(dst, d.Name)
	}
	dst = append(dst, `,"ts_ms":`...)
	if e.Commit.IsZero() {
		dst = append(dst, '0')
	} else {
		dst = strconv.AppendInt(dst, e.Commit.UnixMilli(), 10)
	}
	if e.Op == OpRead {
		dst = append(dst, `,"snapshot":"true"`...)
	} else {
		dst = append(dst, `,"snapshot":"false"`...)
	}
	dst = append(dst, `,"db":"","schema":`...)
	dst = jsonw.AppendString(dst, e.Schema)
	dst = append(dst, `,"table":`...)
	dst = jsonw.AppendString(dst, e.Table)
	dst = append(dst, `,"txId":`...)
	dst = strconv.AppendUint(dst, uint64(e.XID), 10)
	dst = append(dst, `,"lsn":"`...)
	lsn := e.LSN
	if lsn == 0 {
		lsn = e.Position.LSN
	}
	dst = strconv.AppendUint(dst, uint64(lsn), 10)
	dst = append(dst, `","sequence":null},"op":"`...)
	dst = append(dst, debeziumOps[e.Op]...)
	dst = append(dst, `","ts_ms":`...)
	now := d.Now
	if now == nil {
		now = time.Now
	}
	dst = strconv.AppendInt(dst, now().UnixMilli(), 10)
	return append(dst, `,"transaction":null}`...), nil
}

// Package pgcdc connects PostgreSQL logical replication to a kafkasink.Sink.
//
// # Decoding
//
// A Decoder turns pgoutput messages (protocol versions 1 and 2) into
// kafkasink.Events. It keeps the relation and type descriptions the server
// sends, delivers each committed transaction's changes in order with
// Positions (commit LSN, index within the transaction), and spools streamed
// in-progress transactions (protocol version 2) to temporary files until they
// commit, so a huge transaction does not have to fit in memory. Aborted
// streamed transactions and rolled-back subtransactions are never delivered.
//
// Inserts become OpInsert events, updates OpUpdate, deletes OpDelete, and a
// TRUNCATE one OpTruncate event per table. An update that changes the key
// (its old key or old row differs from the new row in the key columns)
// becomes an OpDelete of the old row and an OpInsert of the new one, with
// consecutive indexes: a compacted topic would otherwise keep the old key
// forever. Event.Key names the replica identity columns the server flags,
// or, for REPLICA IDENTITY FULL tables (which flag every column), the
// columns DecoderConfig.KeyColumns names.
//
// An update's Before is set when the server sends the old row (REPLICA
// IDENTITY FULL: every column) or the old key (the key columns only, sent
// when the key changed or is stored out of line). A delete's Before is the
// old key or, with FULL, the old row. Unchanged TOAST values (large values an
// update did not touch) arrive without data: their Column has Unchanged set
// and a nil Value, unless the full old row supplies the value.
//
// Logical decoding messages (pg_logical_emit_message) are not row events; they
// go to DecoderConfig.OnMessage.
//
// # Values
//
// Values arrive in text format (or binary, with the "binary" option) and are
// converted by the column's type OID:
//
//	PostgreSQL type                     Go value
//	----------------------------------  ---------------------------------------------
//	NULL                                nil
//	unchanged TOAST                     nil, with Column.Unchanged set
//	smallint, integer, bigint           int16, int32, int64
//	oid                                 uint32
//	real, double precision              float32, float64 (NaN and ±Inf included)
//	numeric                             kafkasink.Decimal, exact text ("NaN", "Infinity" kept)
//	boolean                             bool
//	text, varchar, char(n), name, "char" string
//	uuid                                string, canonical lower-case form
//	json, jsonb                         json.RawMessage (a copy)
//	bytea                               []byte (hex and escape output formats)
//	date                                string "2006-01-02", or "infinity"/"-infinity"
//	timestamp                           string "2006-01-02T15:04:05.999999", or "infinity"/"-infinity"
//	timestamptz                         time.Time in UTC, or string "infinity"/"-infinity"
//	time, timetz, interval              string, the server's text
//	arrays of any type                  []any, nested per dimension, NULL elements nil
//	enums, domains, other types         string, the server's text
//	binary values pgx cannot decode     []byte, the raw binary form
//
// A date or a timestamp without time zone names a calendar day or a
// wall-clock reading, not an instant, so it stays text rather than becoming
// a time.Time in an invented zone. Years before 1 AD are written the ISO 8601
// way: 1 BC is "0000", 2 BC is "-0001". Array lower bounds other than 1 are
// dropped. Binary values of types pgx knows are re-rendered as text and
// converted as above, so text and binary replication yield the same values.
//
// The conversions assume the server's default output settings, which a
// replication connection should keep: DateStyle ISO, IntervalStyle postgres,
// and the session time zone is irrelevant because timestamptz values carry
// their offset. A value that does not parse for its type is an error; the
// message never quotes the value, because row data may be confidential.
package pgcdc

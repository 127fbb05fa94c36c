package kafkasink

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file is the sink's own record headers: which a record carries
// (Config.Headers) and how their values are written.

// The standard header keys: the records of an event carry those
// Config.Headers selects (all five by default).
const (
	HeaderID        = "kafkasink.id"         // the event id (its position)
	HeaderOp        = "kafkasink.op"         // insert, update, delete, truncate or read
	HeaderTable     = "kafkasink.table"      // schema.table
	HeaderLSN       = "kafkasink.lsn"        // the change's own LSN, decimal
	HeaderCommitLSN = "kafkasink.commit_lsn" // the commit LSN of its transaction, decimal

	// Dead-lettered records carry these as well, and all five standard
	// headers whatever Config.Headers says.
	HeaderReason = "kafkasink.reason" // a Reason
	HeaderError  = "kafkasink.error"  // the error text
	HeaderTopic  = "kafkasink.topic"  // the topic the event was meant for; empty when unroutable
	HeaderValue  = "kafkasink.value"  // what the value is: ValueEncoded, ValueEvent or ValueOmitted
)

// HeaderSet selects the standard headers the records of an event carry
// (Config.Headers). The Encoder's own headers (a RecordShaper's) are
// written whatever the set, and dead-lettered records always carry all
// five (see HeaderReason). All five are about 115 bytes per record before
// compression: a tenth of the record of a 1 KB event, over a quarter of
// a 200 B one's. The smaller sets save those bytes on the wire and in the
// topics (docs/records.md has the figures compressed).
type HeaderSet uint8

// The header sets. The zero HeaderSet is HeadersAll.
const (
	// HeadersAll: kafkasink.id, kafkasink.op, kafkasink.table,
	// kafkasink.lsn and kafkasink.commit_lsn.
	HeadersAll HeaderSet = iota
	// HeadersMinimal: kafkasink.id and kafkasink.op. The id is what a
	// consumer that removes duplicates (the Idempotent and Plain modes
	// redeliver after a crash) compares, and with the op it is all that
	// kafkasinktest's Decode and AssertExactlyOnce read. The op is kept
	// because a tombstone has no value to tell a delete from a truncate.
	HeadersMinimal
	// HeadersNone: none of the sink's own headers; the records carry
	// only the Encoder's. Nothing then tells a duplicate apart but the
	// value, and kafkasinktest's Decode refuses the records.
	HeadersNone
)

// String returns "all", "minimal" or "none".
func (h HeaderSet) String() string {
	switch h {
	case HeadersAll:
		return "all"
	case HeadersMinimal:
		return "minimal"
	case HeadersNone:
		return "none"
	}
	return fmt.Sprintf("headerset(%d)", uint8(h))
}

// ParseHeaderSet parses the text String returns.
func ParseHeaderSet(s string) (HeaderSet, error) {
	for _, h := range []HeaderSet{HeadersAll, HeadersMinimal, HeadersNone} {
		if s == h.String() {
			return h, nil
		}
	}
	return 0, fmt.Errorf("kafkasink: unknown header set %q: want all, minimal or none", s)
}

// count is how many standard headers the set holds.
func (h HeaderSet) count() int {
	switch h {
	case HeadersAll:
		return 5
	case HeadersMinimal:
		return 2
	}
	return 0
}

// extendHeaders returns the record headers hs, the last appended to
// es.headers, followed by more: the Encoder's (a RecordShaper's), a
// source record's, the annotations'. They stay one run at the end of
// es.headers, where the next extension of the same record's headers looks
// for them: appending to hs itself, whose capacity ends with it, would
// move them elsewhere.
func extendHeaders[H Header | kgo.RecordHeader](es *encoderState, hs []kgo.RecordHeader, more []H) []kgo.RecordHeader {
	if len(more) == 0 {
		return hs
	}
	h0 := len(es.headers) - len(hs)
	for _, h := range more {
		es.headers = append(es.headers, kgo.RecordHeader(h))
	}
	return es.headers[h0:len(es.headers):len(es.headers)]
}

// standardHeaders appends the standard headers of set for e to
// es.headers and returns them. The values are in the arena, but those
// that repeat are shared instead of written again: the op names, and
// the table and commit LSN of the event before when e has the same (the
// events of one transaction, of one table). That is about 3% of the
// time to plan a batch, and 28 bytes of arena per event.
func (es *encoderState) standardHeaders(set HeaderSet, e *Event) []kgo.RecordHeader {
	h0 := len(es.headers)
	if set == HeadersNone {
		return es.headers[h0:h0:h0]
	}
	add := func(key string, value []byte) {
		es.headers = append(es.headers, kgo.RecordHeader{Key: key, Value: value})
	}
	add(HeaderID, es.eventID(e))
	add(HeaderOp, opValues[e.Op])
	if set == HeadersMinimal {
		return es.headers[h0:len(es.headers):len(es.headers)]
	}

	sh := &es.shared
	if sh.table == nil || sh.schemaName != e.Schema || sh.tableName != e.Table {
		start := len(es.arena)
		es.arena = append(append(append(es.arena, e.Schema...), '.'), e.Table...)
		sh.schemaName, sh.tableName, sh.table = e.Schema, e.Table, es.take(start)
	}
	add(HeaderTable, sh.table)

	start := len(es.arena)
	es.arena = strconv.AppendUint(es.arena, uint64(e.LSN), 10)
	add(HeaderLSN, es.take(start))

	if sh.commitLSN == nil || sh.commitLSNOf != e.Position.LSN {
		start = len(es.arena)
		es.arena = strconv.AppendUint(es.arena, uint64(e.Position.LSN), 10)
		sh.commitLSNOf, sh.commitLSN = e.Position.LSN, es.take(start)
	}
	add(HeaderCommitLSN, sh.commitLSN)
	return es.headers[h0:len(es.headers):len(es.headers)]
}

// opValues are the values of the kafkasink.op header, shared by every
// record: neither the sink nor the client writes to a header value.
var opValues = [...][]byte{OpInsert: []byte("insert"), OpUpdate: []byte("update"), OpDelete: []byte("delete"), OpTruncate: []byte("truncate"), OpRead: []byte("read")}

// sharedHeaderValues are the header values of the last event planned
// that the next events of its table and its transaction repeat. They are
// in the arena of the plan, whose records share them: encoderState resets
// them with the arena, for the next plan.
type sharedHeaderValues struct {
	schemaName, tableName string
	table                 []byte // schemaName.tableName; nil for none
	commitLSNOf           LSN
	commitLSN             []byte // commitLSNOf in decimal; nil for none
}

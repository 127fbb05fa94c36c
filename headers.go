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
// (Config.Headers). The headers are about a sixth of the bytes of a
// 1 KB event's record before compression, and two fifths of a 200 B
// one's; the smaller sets save those bytes on the wire and in the
// topics (see the README's performance section for the figures).
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
	// only the Encoder's (DebeziumEncoder's are Debezium's). Nothing then
	// tells a duplicate apart but the value, and kafkasinktest's Decode
	// refuses the records.
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

// standardHeaders appends the standard headers of set for e to
// es.headers, their values to the arena, and returns them.
func (es *encoderState) standardHeaders(set HeaderSet, e *Event) []kgo.RecordHeader {
	h0 := len(es.headers)
	if set == HeadersNone {
		return es.headers[h0:h0:h0]
	}
	add := func(key string, start int) {
		es.headers = append(es.headers, kgo.RecordHeader{Key: key, Value: es.take(start)})
	}
	start := len(es.arena)
	es.arena = e.Position.AppendText(es.arena)
	add(HeaderID, start)

	start = len(es.arena)
	es.arena = append(es.arena, e.Op.String()...)
	add(HeaderOp, start)
	if set == HeadersMinimal {
		return es.headers[h0:len(es.headers):len(es.headers)]
	}

	start = len(es.arena)
	es.arena = append(append(append(es.arena, e.Schema...), '.'), e.Table...)
	add(HeaderTable, start)

	start = len(es.arena)
	es.arena = strconv.AppendUint(es.arena, uint64(e.LSN), 10)
	add(HeaderLSN, start)

	start = len(es.arena)
	es.arena = strconv.AppendUint(es.arena, uint64(e.Position.LSN), 10)
	add(HeaderCommitLSN, start)
	return es.headers[h0:len(es.headers):len(es.headers)]
}

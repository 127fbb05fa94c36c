package kafkasink

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
)

// Receipt is what one successful Write wrote to one topic, defined as
// Filament's write receipts are, so that a consumer can recompute it from
// the topic and compare.
//
// Its records are those this Write produced to the topic: the records of
// its events, the records the Encoder asks for around them (a tombstone
// after a delete, a Framer's records around a transaction),
// and the dead-lettered events' records, which are on the dead-letter
// topic and so in its receipt. Not in it: the checkpoint record, and the
// events of the batch that the checkpoint already covered, which an
// earlier Write delivered and this one did not write again. A Write split
// into several transactions has one receipt per topic for all of them; a
// transaction retried inside the Write counts once, as a read_committed
// consumer sees it.
//
// Only values count: keys, headers, routing (partitions) and the wire
// compression are left out. A null value (a tombstone) and an empty one
// each contribute zero bytes.
//
// Input order is the order the Write produced the records in: the
// batch's events in order, and each event's records in the order the
// Encoder asks for them (a BEGIN record, the event's, its tombstone, an
// END record).
type Receipt struct {
	Topic string
	// First and Last are the positions of the events of the topic's
	// first and last records in this Write.
	First, Last Position
	Records     int // records produced to the topic
	Bytes       int // value bytes
	// CRC32C is the CRC-32 with the Castagnoli polynomial
	// (hash/crc32.Castagnoli) of the concatenation of the records'
	// values in input order: crc32.Update from 0 over each value in
	// turn.
	//
	// A consumer recomputes it with a read_committed reader. The
	// topic's partitions interleave input order, which offsets alone
	// cannot restore, so it takes the topic's records whose
	// kafkasink.id header (HeaderID, the event position) is within
	// First..Last, sorts them by that position, and chains
	// crc32.Update over their values. An event's records that share a
	// position on one topic are its record and its tombstone, whose
	// null value adds nothing: their order does not matter. The header
	// is on every event's record unless Config.Headers is HeadersNone,
	// and on every dead-lettered one. Records without it (all of them
	// with HeadersNone, and a Framer's records around events)
	// are in input order by their offsets on a topic of one partition
	// only. In the Idempotent and Plain modes, records a failed Write
	// delivered stay in the topic beside its redelivery's, under the
	// same positions: recomputed over them, the receipt differs, which
	// shows those duplicates.
	CRC32C uint32
}

// castagnoli is the table of the CRC32C polynomial, which crc32 computes
// with the CPU's CRC32 instruction where there is one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// receipts returns the receipts of the Write that delivered p, nil
// unless Config.Receipts asks for them.
func (s *Sink) receipts(p *plan) []Receipt {
	if !s.cfg.Receipts {
		return nil
	}
	return p.receipts()
}

// receipts returns the receipts of the records of p's parts, one per
// topic, in the order of each topic's first record. The parts hold the
// records in input order, and only the records a successful Write
// produced.
func (p *plan) receipts() []Receipt {
	var out []Receipt
	at := -1 // the receipt of the last record's topic
	for i := range p.parts {
		pt := &p.parts[i]
		for j, r := range pt.records {
			pos := pt.positions[j]
			if at < 0 || out[at].Topic != r.Topic {
				at = receiptIndex(out, r.Topic)
				if at < 0 {
					out = append(out, Receipt{Topic: r.Topic, First: pos})
					at = len(out) - 1
				}
			}
			rc := &out[at]
			rc.add(r.Value)
			rc.Last = pos
		}
	}
	return out
}

// add counts one record of value v.
func (rc *Receipt) add(v []byte) {
	rc.Records++
	rc.Bytes += len(v)
	rc.CRC32C = crc32.Update(rc.CRC32C, castagnoli, v)
}

// receiptIndex returns the index of topic's receipt in rs, -1 when there
// is none. A Write reaches few topics: a scan is all it takes.
func receiptIndex(rs []Receipt, topic string) int {
	for i := range rs {
		if rs[i].Topic == topic {
			return i
		}
	}
	return -1
}

// logReceipts logs each receipt at Debug level, one record per topic.
func (s *Sink) logReceipts(ctx context.Context, rs []Receipt) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	for _, r := range rs {
		s.log.Debug("write receipt", "topic", r.Topic, "records", r.Records, "value_bytes", r.Bytes,
			"crc32c", fmt.Sprintf("%08x", r.CRC32C), "first", r.First.String(), "last", r.Last.String())
	}
}

package pgcdc

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// TestBatchBytesBoundHeap decodes transactions through a session, as the
// pump does, and compares the heap its batches really hold (live bytes
// after a collection, with every batch kept) with what they counted for
// BatchMaxBytes: the count must not be below the heap, or BatchMaxBytes
// would not bound the memory, and not far above it, or batches would be
// needlessly small. Rows of the soak's shape (bench/: about 200 B and
// 1 KB of text) and rows of large values (text, jsonb, bytea, an array).
func TestBatchBytesBoundHeap(t *testing.T) {
	note := func(n int) string { return strings.Repeat("0123456789abcdef", n/16+1)[:n] }
	soakCols := []pgoutputmsg.Column{pgoutputmsg.Key("id", pgtype.Int8OID), pgoutputmsg.Col("version", pgtype.Int8OID),
		pgoutputmsg.Col("status", pgtype.TextOID), pgoutputmsg.Col("amount", pgtype.NumericOID),
		pgoutputmsg.Col("updated_at", pgtype.TimestamptzOID), pgoutputmsg.Col("note", pgtype.TextOID)}
	soakRow := func(size int) func(id int) []pgoutputmsg.Value {
		return func(id int) []pgoutputmsg.Value {
			return pgoutputmsg.Tuple(pgoutputmsg.Text(fmt.Sprint(id)), pgoutputmsg.Text(fmt.Sprint(id%7+300)),
				pgoutputmsg.Text("active"), pgoutputmsg.Text("1234.56"), pgoutputmsg.Text("2026-12-01 07:16:27.123456+00"), pgoutputmsg.Text(note(size)))
		}
	}
	for _, tt := range []struct {
		name   string
		cols   []pgoutputmsg.Column
		row    func(id int) []pgoutputmsg.Value
		events int
	}{
		{"200 B rows", soakCols, soakRow(100), 30000},
		{"1 KB rows", soakCols, soakRow(900), 12000},
		{"large values", []pgoutputmsg.Column{pgoutputmsg.Key("id", pgtype.Int8OID), pgoutputmsg.Col("body", pgtype.TextOID),
			pgoutputmsg.Col("doc", pgtype.JSONBOID), pgoutputmsg.Col("data", pgtype.ByteaOID), pgoutputmsg.Col("tags", pgtype.Int4ArrayOID)},
			func(id int) []pgoutputmsg.Value {
				return pgoutputmsg.Tuple(pgoutputmsg.Text(fmt.Sprint(id)), pgoutputmsg.Text(note(6000)), pgoutputmsg.Text(`{"k":"`+note(3000)+`"}`),
					pgoutputmsg.Text(`\x`+note(4000)), pgoutputmsg.Text("{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20}"))
			}, 1500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSession(t, 1<<30)
			s.cfg.BatchMaxBytes = 4 << 20
			s.batches = make(chan *batch, 1000)
			const txnRows = 100
			msgs := [][]byte{xlog(0x100, pgoutputmsg.Relation(0, 1, "public", "t", 'd', tt.cols...))}
			lsn := kafkasink.LSN(0x1000)
			for id := 0; id < tt.events; id += txnRows {
				msgs = append(msgs, xlog(lsn, pgoutputmsg.Begin(lsn+txnRows+1, t0, uint32(1000+id))))
				for i := range txnRows {
					msgs = append(msgs, xlog(lsn+kafkasink.LSN(i+1), pgoutputmsg.Update(0, 1, 0, nil, tt.row(id+i))))
				}
				msgs = append(msgs, xlog(lsn+txnRows+1, pgoutputmsg.Commit(lsn+txnRows+1, lsn+txnRows+2, t0)))
				lsn += txnRows + 3
			}
			if err := s.handle(msgs[0]); err != nil { // the relation cache is not the batches'
				t.Fatal(err)
			}
			before := liveHeap()
			for _, m := range msgs[1:] {
				if err := s.handle(m); err != nil {
					t.Fatal(err)
				}
			}
			held := liveHeap() - before
			close(s.batches)
			batches := []*batch{s.cur}
			for b := range s.batches {
				batches = append(batches, b)
			}
			counted, events := 0, 0
			for _, b := range batches {
				counted += b.bytes
				events += len(b.events)
			}
			runtime.KeepAlive(msgs)
			if events != tt.events {
				t.Fatalf("%d events in the batches, want %d", events, tt.events)
			}
			t.Logf("%d events in %d batches: %d B held, %d B counted (%.0f B/event held, %.2f counted/held)",
				events, len(batches), held, counted, float64(held)/float64(events), float64(counted)/float64(held))
			// The race detector's runtime holds a little more (about 3%
			// for small rows) than the allocator the estimate models.
			if counted < held-held/32 {
				t.Errorf("the batches counted %d B for BatchMaxBytes but hold %d B of heap: BatchMaxBytes does not bound their memory", counted, held)
			}
			if counted > held*3/2 {
				t.Errorf("the batches counted %d B for BatchMaxBytes but hold only %d B of heap: batches are closed half full", counted, held)
			}
		})
	}
}

// liveHeap is the heap's live bytes, after a collection.
func liveHeap() int {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int(ms.HeapAlloc)
}

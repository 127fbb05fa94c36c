package kafkasink

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// arenaEvents are n updates of public.arena at commit LSN lsn with values
// of about 1 KB, the note column filled with fill. Event big (when in
// range) also has an array of 100,000 numbers: 700 KB of value that
// minValueSize does not foresee, so it outgrows what its chunk has left.
func arenaEvents(lsn LSN, n, big int, fill byte) []Event {
	events := make([]Event, n)
	for i := range events {
		row := Row{{Name: "id", Value: int64(i)}, {Name: "note", Value: strings.Repeat(string(fill), 1000)}}
		if i == big {
			numbers := make([]any, 100000)
			for j := range numbers {
				numbers[j] = int64(100000 + j)
			}
			row = append(row, Column{Name: "numbers", Value: numbers})
		}
		events[i] = Event{Op: OpUpdate, Schema: "public", Table: "arena", Position: Position{LSN: lsn, Index: uint64(i)}, LSN: lsn,
			Key: []string{"id"}, After: row}
	}
	return events
}

func arenaSink(t *testing.T) *Sink {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "kafkasink.public.arena"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := New(context.Background(), Config{Brokers: c.ListenAddrs(), SinkID: "arena", Mode: Idempotent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// checkPlanRecords checks that every record of p is exactly what events
// encode to: nothing of one record overwrote another's bytes.
func checkPlanRecords(t *testing.T, p *plan, events []Event) {
	t.Helper()
	var got int
	for _, pt := range p.parts {
		for j, r := range pt.records {
			e := &events[got]
			got++
			if pt.positions[j] != e.Position {
				t.Fatalf("record %d has position %s, want %s", got-1, pt.positions[j], e.Position)
			}
			key, _ := AppendKey(nil, e, nil, KeyText)
			value, _ := JSONEncoder{}.Encode([]byte{}, e)
			if !bytes.Equal(r.Key, key) || !bytes.Equal(r.Value, value) {
				t.Fatalf("record %d (event %s): key %q, value of %d bytes, want key %q, value of %d bytes (equal: %v)",
					got-1, e.Position, r.Key, len(r.Value), key, len(value), bytes.Equal(r.Value, value))
			}
			want := []string{e.ID(), e.Op.String(), "public.arena", strconv.FormatUint(uint64(e.LSN), 10), strconv.FormatUint(uint64(e.Position.LSN), 10)}
			for h, w := range want {
				if string(r.Headers[h].Value) != w {
					t.Fatalf("record %d header %s = %q, want %q", got-1, r.Headers[h].Key, r.Headers[h].Value, w)
				}
			}
		}
	}
	if got != len(events) {
		t.Fatalf("the plan has %d records, want %d", got, len(events))
	}
}

// TestArenaReusedAcrossWrites plans batches as Writes do, each after the
// last was delivered: the second batch is encoded into the first one's
// memory, with one event outgrowing its chunk, and each record holds its
// own event's bytes; from then on a batch of 2,000 events of 1 KB costs
// a few allocations and a few KB, not its 2 MB of records again.
func TestArenaReusedAcrossWrites(t *testing.T) {
	s := arenaSink(t)
	ctx := context.Background()
	plan := func(events []Event) *plan {
		t.Helper()
		b := Batch{Events: events}
		if err := checkBatch(&b); err != nil {
			t.Fatal(err)
		}
		p, err := s.planSending(ctx, &b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := arenaEvents(1, 2000, -1, 'a')
	p := plan(first)
	checkPlanRecords(t, p, first)
	// The first bytes of the first chunk: the first event's id header.
	chunk := &p.parts[0].records[0].Headers[0].Value[0]
	s.reuse(p) // as a Write that returned nil does

	second := arenaEvents(2, 2000, 1500, 'b')
	p = plan(second)
	checkPlanRecords(t, p, second)
	if &p.parts[0].records[0].Headers[0].Value[0] != chunk {
		t.Error("the second batch was not encoded into the first one's arena")
	}
	s.reuse(p)

	third := arenaEvents(3, 2000, -1, 'c')
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p = plan(third)
	runtime.ReadMemStats(&after)
	checkPlanRecords(t, p, third)
	allocs, bytes := after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc
	t.Logf("planning 2,000 events (%d KB of records) after a delivered batch: %d allocations, %d bytes", p.parts[0].bytes>>10, allocs, bytes)
	if allocs > 50 || bytes > 64<<10 {
		t.Errorf("planning 2,000 events after a delivered batch made %d allocations of %d bytes in all; want at most 50 and 64 KB: the memory is not reused", allocs, bytes)
	}
}

// TestArenaTrimmedToLastBatch: after a large batch, a small one's
// delivery lets the large one's extra memory go: its records, and its
// arena, which the next large batch then allocates again.
func TestArenaTrimmedToLastBatch(t *testing.T) {
	s := arenaSink(t)
	ctx := context.Background()
	plan := func(lsn LSN, n int) (allocated uint64) {
		t.Helper()
		b := Batch{Events: arenaEvents(lsn, n, -1, 'x')}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p, err := s.planSending(ctx, &b, nil)
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		s.reuse(p)
		return after.TotalAlloc - before.TotalAlloc
	}
	plan(1, 5000)
	plan(2, 10)
	if cap(s.spare.records) != 0 {
		t.Errorf("after a batch of 10 events the sink keeps %d records, want none", cap(s.spare.records))
	}
	// 5,000 events of 1 KB take 5 MB of arena; their records and
	// headers, which the small batch let go too, are about 2 MB.
	if allocated := plan(3, 5000); allocated < 5<<20 {
		t.Errorf("a batch of 5,000 events of 1 KB after a small one allocated %d bytes, want its 5 MB of arena again: the small batch's delivery kept the large one's arena", allocated)
	}
}

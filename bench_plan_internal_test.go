package kafkasink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BenchmarkPlan measures planning a batch of 1,000 updates, which is the
// serial phase of a Write that encodes every record (the keys, values and
// headers) before producing any: no producing is measured. It runs
// at the suite's two event sizes (the JSONEncoder value) and reports the
// record bytes (keys, values and headers, uncompressed) per event, for
// each Config.Headers:
//
//	go test -run '^$' -bench Plan -count 6 . | benchstat -col /headers -
func BenchmarkPlan(b *testing.B) {
	for _, size := range []int{1024, 200} {
		for _, set := range []HeaderSet{HeadersAll, HeadersMinimal, HeadersNone} {
			b.Run(fmt.Sprintf("size=%dB/headers=%s", size, set), func(b *testing.B) {
				benchPlan(b, Config{Headers: set}, planEvents(b, size, 1000))
			})
		}
	}
}

// BenchmarkPlanAnnotations measures planning the batch of BenchmarkPlan
// (1 KB events, HeadersAll) without annotations and with three
// (benchAnnotations) in each place:
//
//	go test -run '^$' -bench PlanAnnotations -count 6 . | benchstat -col /annotations -
func BenchmarkPlanAnnotations(b *testing.B) {
	events := planEvents(b, 1024, 1000)
	b.Run("annotations=none", func(b *testing.B) { benchPlan(b, Config{}, events) })
	for _, in := range []AnnotationPlace{AnnotateValue, AnnotateHeaders, AnnotateBoth} {
		b.Run("annotations="+in.String(), func(b *testing.B) {
			benchPlan(b, Config{Annotations: benchAnnotations, AnnotationsIn: in}, events)
		})
	}
}

// benchPlan plans events with a sink of cfg (Idempotent, on a fake
// cluster), renumbered for each batch, as a replication loop hands over new
// positions, and hands each plan's memory on as a delivered Write does.
func benchPlan(b *testing.B, cfg Config, events []Event) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "kafkasink.public.bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cfg.Brokers, cfg.SinkID, cfg.Mode = c.ListenAddrs(), "bench", Idempotent
	s, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	var bytes int
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for j := range events {
			events[j].Position = Position{LSN: LSN(i + 2), Index: uint64(j)}
			events[j].LSN = LSN(i + 2)
		}
		p, err := s.planSending(ctx, &Batch{Events: events}, nil)
		if err != nil {
			b.Fatal(err)
		}
		bytes = 0
		for _, pt := range p.parts {
			bytes += pt.bytes
		}
		s.reuse(p)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	b.ReportMetric(float64(bytes)/float64(len(events)), "B/event")
}

// planEvents are n updates of public.bench, a 6-column row whose
// JSONEncoder value is about size bytes: the bench suite's workload.
func planEvents(b *testing.B, size, n int) []Event {
	event := func(j int, note string) Event {
		return Event{Op: OpUpdate, Schema: "public", Table: "bench", XID: 1000, LSN: 1, Position: Position{LSN: 1, Index: uint64(j)},
			Commit: time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), Key: []string{"id"},
			After: Row{
				{Name: "id", Value: int64(j + 1)},
				{Name: "customer_id", Value: int64(j * 7919 % 100000)},
				{Name: "status", Value: "shipped"},
				{Name: "amount", Value: Decimal(fmt.Sprintf("%d.25", j*104729%100000))},
				{Name: "updated_at", Value: time.Date(2026, 12, 1, 4, 0, j%60, 0, time.UTC)},
				{Name: "note", Value: note},
			}}
	}
	e := event(0, "")
	base, err := JSONEncoder{}.Encode(nil, &e)
	if err != nil {
		b.Fatal(err)
	}
	const letters = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	pad := max(0, size-len(base))
	events := make([]Event, n)
	for j := range events {
		var note strings.Builder
		for k := range pad {
			note.WriteByte(letters[(j*31+k*17+k*k)%len(letters)])
		}
		events[j] = event(j, note.String())
	}
	return events
}

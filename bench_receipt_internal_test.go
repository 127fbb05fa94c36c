package kafkasink

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BenchmarkReceipts measures the write receipts (Config.Receipts) of a
// planned batch of 1,000 updates, BenchmarkPlan's workload, per event:
// compare its ns/event with BenchmarkPlan's to see what they add to the
// serial phase of a Write.
//
//	go test -run '^$' -bench 'Receipts|Plan/size=.*/headers=all' -count 6 .
func BenchmarkReceipts(b *testing.B) {
	for _, size := range []int{1024, 200} {
		b.Run(fmt.Sprintf("size=%dB", size), func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "kafkasink.public.bench"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s, err := New(context.Background(), Config{Brokers: c.ListenAddrs(), SinkID: "bench", Mode: Idempotent})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			events := planEvents(b, size, 1000)
			p, err := s.planSending(context.Background(), &Batch{Events: events}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				p.receipts()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		})
	}
}

package kafkasink_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/rawrecord"
)

// benchBatch is the batch size of the Write benchmarks: a few hundred
// events is what a replication loop typically hands over per transaction.
const benchBatch = 500

// BenchmarkWrite measures Write per mode on the in-process fake cluster,
// beside raw franz-go producing the same records (pre-encoded, same keys and
// values) in one transaction per batch: the sink's overhead is the ratio.
// The fake cluster's own cost dominates both, so this tracks regressions;
// it is not a broker throughput figure.
func BenchmarkWrite(b *testing.B) {
	for _, mode := range []kafkasink.Mode{kafkasink.ExactlyOnce, kafkasink.Idempotent, kafkasink.Plain} {
		b.Run(mode.String(), func(b *testing.B) {
			_, brokers := sinktest.Cluster(b, kfake.SeedTopics(1, "kafkasink.public.orders"))
			s, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: brokers, SinkID: "bench", Mode: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			events := sinktest.Inserts("public", "orders", 1, 0, benchBatch)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for j := range events {
					events[j].Position.LSN = kafkasink.LSN(i + 1)
				}
				if err := s.Write(context.Background(), kafkasink.Batch{Events: events}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "events/s")
		})
	}
	// The floor: the same records, headers included, encoded once up
	// front, so only producing is measured.
	b.Run("raw-franz-go-txn-preencoded", func(b *testing.B) {
		records := rawRecords(sinktest.Inserts("public", "orders", 1, 0, benchBatch), func(e *kafkasink.Event) []byte {
			v, _ := kafkasink.JSONEncoder{}.Encode([]byte{}, e)
			return v
		})
		benchRawTxn(b, func() []*kgo.Record { return records })
	})
	// What a hand-written pipeline does: encode each event with
	// encoding/json (a map for the row, since columns are dynamic), then
	// produce.
	b.Run("raw-franz-go-txn+encoding-json", func(b *testing.B) {
		events := sinktest.Inserts("public", "orders", 1, 0, benchBatch)
		benchRawTxn(b, func() []*kgo.Record { return rawRecords(events, stdlibEncode) })
	})
}

// benchRawTxn produces the records batch returns in one transaction per
// iteration, with a checkpoint-sized record last, using franz-go directly.
func benchRawTxn(b *testing.B, batch func() []*kgo.Record) {
	_, brokers := sinktest.Cluster(b, kfake.SeedTopics(1, "kafkasink.public.orders", "kafkasink.checkpoints"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("raw"), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ckpt := []byte(`{"version":1,"sink_id":"raw","mode":"exactly-once","position":"0/1:499","written_at":"2026-11-29T09:00:00Z"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		records := batch()
		out := make([]*kgo.Record, 0, len(records)+1)
		for _, r := range records {
			c := *r
			out = append(out, &c)
		}
		out = append(out, &kgo.Record{Topic: "kafkasink.checkpoints", Key: []byte("raw"), Value: ckpt})
		if err := cl.ProduceSync(context.Background(), out...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		if err := cl.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "events/s")
}

// rawRecords builds the records the sink would write for events, with the
// value from encode.
func rawRecords(events []kafkasink.Event, encode func(*kafkasink.Event) []byte) []*kgo.Record {
	records := make([]*kgo.Record, len(events))
	for j := range events {
		e := &events[j]
		key, _ := kafkasink.AppendKey(nil, e, nil, kafkasink.KeyText)
		records[j] = &kgo.Record{Topic: "kafkasink.public.orders", Key: key, Value: encode(e), Headers: rawrecord.Headers(e, kafkasink.HeadersAll)}
	}
	return records
}

// stdlibEncode writes the JSONEncoder's document with encoding/json.
func stdlibEncode(e *kafkasink.Event) []byte {
	v, _ := rawrecord.StdlibJSON(e)
	return v
}

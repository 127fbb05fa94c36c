package kafkasinkotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkotel"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// Real Writes on the test kit's fake cluster, one of whose transactions
// the broker refuses: the metrics read the sink's Stats, and each
// transaction is a span, the aborted one with status Error.
func TestMetricsAndSpans(t *testing.T) {
	cluster := kafkasinktest.NewCluster(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: cluster.Brokers(), SinkID: "orders",
		Topics: kafkasink.Topics{Partitions: 1},
		Hooks:  []kafkasink.Hook{kafkasinkotel.NewTracer(tp.Tracer("kafkasink"))}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	if err := kafkasinkotel.RegisterMetrics(mp.Meter("kafkasink"), sink); err != nil {
		t.Fatal(err)
	}

	cluster.FailProduce("kafkasink.public.orders", 0, 1)
	events := make([]kafkasink.Event, 3)
	for i := range events {
		events[i] = kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "orders", Key: []string{"id"},
			Position: kafkasink.Position{LSN: 0x100, Index: uint64(i)}, After: kafkasink.Row{{Name: "id", Value: i}}}
	}
	if err := sink.Write(ctx, kafkasink.Batch{Events: events}); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int64)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				got[m.Name] = d.DataPoints[0].Value
				if v, _ := d.DataPoints[0].Attributes.Value("sink.id"); v.AsString() != "orders" {
					t.Errorf("%s: sink.id %q, want orders", m.Name, v.AsString())
				}
			case metricdata.Gauge[int64]:
				got[m.Name] = d.DataPoints[0].Value
			}
		}
	}
	for name, want := range map[string]int64{"kafkasink.events.written": 3, "kafkasink.transactions.committed": 1,
		"kafkasink.transactions.aborted": 1, "kafkasink.transaction.retries": 1, "kafkasink.checkpoint.lsn": 0x100} {
		if got[name] != want {
			t.Errorf("%s = %d, want %d (all: %v)", name, got[name], want, got)
		}
	}

	ended := spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans, want the aborted transaction's and the committed one's", len(ended))
	}
	if ended[0].Status().Code != codes.Error || len(ended[0].Events()) == 0 || ended[1].Status().Code == codes.Error {
		t.Errorf("span statuses %v, %v: want the first aborted (Error, with its cause) and the second not", ended[0].Status(), ended[1].Status())
	}
	for _, s := range ended {
		if s.Name() != "kafkasink.transaction" || !s.EndTime().After(s.StartTime()) {
			t.Errorf("span %q from %v to %v: want kafkasink.transaction, ending after it starts", s.Name(), s.StartTime(), s.EndTime())
		}
	}
}

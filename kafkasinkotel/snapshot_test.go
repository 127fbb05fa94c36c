package kafkasinkotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kafkasink/kafkasink/kafkasinkotel"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// A real Run reads a table of 40 rows in a parallel snapshot (2 workers,
// chunks of 5: 8 key ranges): the snapshot instruments report the
// table's rows, done, nothing left, a rate, and each range's rows and
// done, with the slot, table and range.
func TestSnapshotMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, name, sink := realTable(t, ctx, 40)
	reader := sdkmetric.NewManualReader()
	mon := &pgcdc.Monitor{}
	if err := kafkasinkotel.RegisterSnapshotMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("kafkasink"), mon, name); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- pgcdc.Run(runCtx, pgcdc.Config{ConnString: pg, Slot: name, Publication: name, Tables: []string{"public." + name},
			CreateSlot: true, CreatePublication: true, Snapshot: true, SnapshotWorkers: 2, SnapshotChunkRows: 5, Monitor: mon,
			StandbyInterval: 200 * time.Millisecond}, sink)
	}()
	defer func() {
		stop()
		<-done
	}()
	for mon.Stats().State != pgcdc.RunStreaming {
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v", err)
		case <-ctx.Done():
			t.Fatal("Run did not reach streaming within a minute")
		case <-time.After(20 * time.Millisecond):
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{} // by name, over data points
	points := map[string]int{}
	var rate float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[m.Name] += p.Value
					points[m.Name]++
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					sums[m.Name] += p.Value
					points[m.Name]++
					if v, ok := p.Attributes.Value("pgcdc.table"); !ok || v.AsString() != "public."+name {
						t.Errorf("%s: table attribute %q", m.Name, v.AsString())
					}
				}
			case metricdata.Gauge[float64]:
				if m.Name == "kafkasink.pgcdc.snapshot.table.rate" {
					rate = d.DataPoints[0].Value
				}
			}
		}
	}
	for metric, want := range map[string][2]int64{ // sum, points
		"kafkasink.pgcdc.snapshot.table.rows": {40, 1}, "kafkasink.pgcdc.snapshot.table.done": {1, 1}, "kafkasink.pgcdc.snapshot.table.rows_left": {0, 1},
		"kafkasink.pgcdc.snapshot.range.rows": {40, 8}, "kafkasink.pgcdc.snapshot.range.done": {8, 8},
	} {
		if sums[metric] != want[0] || points[metric] != int(want[1]) {
			t.Errorf("%s: %d over %d series, want %d over %d", metric, sums[metric], points[metric], want[0], want[1])
		}
	}
	if rate <= 0 {
		t.Errorf("rate %v, want the snapshot's", rate)
	}
}

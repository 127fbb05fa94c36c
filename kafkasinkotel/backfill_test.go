package kafkasinkotel_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkotel"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// A real Run (PostgreSQL, KAFKASINK_TEST_PG from scripts/testenv.sh, into
// the test kit's fake cluster) with a backfill of a table of 4 rows in
// chunks of 2, paused after its first chunk, whose Write is held
// meanwhile: the backfill instruments report its rows, chunk, the rows
// left, the rate, the pause and the key, with its id, table and slot.
func TestBackfillMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, name, sink := realTable(t, ctx, 4)
	reader := sdkmetric.NewManualReader()
	mon, bf := &pgcdc.Monitor{}, &pgcdc.Backfills{}
	if err := kafkasinkotel.RegisterBackfillMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("kafkasink"), mon, name); err != nil {
		t.Fatal(err)
	}
	held := &heldSink{Sink: sink, release: make(chan struct{})}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- pgcdc.Run(runCtx, pgcdc.Config{ConnString: pg, Slot: name, Publication: name, Tables: []string{"public." + name},
			CreateSlot: true, CreatePublication: true, Monitor: mon, StandbyInterval: 200 * time.Millisecond,
			Backfills: bf, BackfillChunkRows: 2}, held)
	}()
	defer func() {
		close(held.release)
		stop()
		<-done
	}()
	held.hold.Store(true)
	st, err := bf.Request(ctx, pgcdc.BackfillRequest{Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := bf.Pause(ctx, st.ID); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	ints := make(map[string]int64)
	var rate float64
	var key string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var attrs []string
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				ints[m.Name] = d.DataPoints[0].Value
				for _, kv := range d.DataPoints[0].Attributes.ToSlice() {
					attrs = append(attrs, string(kv.Key)+"="+kv.Value.AsString())
				}
			case metricdata.Gauge[int64]:
				ints[m.Name] = d.DataPoints[0].Value
				if v, ok := d.DataPoints[0].Attributes.Value("pgcdc.backfill.last_key"); ok {
					key = v.AsString()
				}
			case metricdata.Gauge[float64]:
				rate = d.DataPoints[0].Value
			}
			if m.Name == "kafkasink.pgcdc.backfill.rows" {
				if want := []string{"pgcdc.backfill.id=" + st.ID, "pgcdc.slot=" + name, "pgcdc.table=public." + name}; !slices.Equal(attrs, want) {
					t.Errorf("%s: attributes %v, want %v", m.Name, attrs, want)
				}
			}
		}
	}
	for name, want := range map[string]int64{"kafkasink.pgcdc.backfill.rows": 2, "kafkasink.pgcdc.backfill.chunks": 1, "kafkasink.pgcdc.backfill.rows_left": 2,
		"kafkasink.pgcdc.backfill.paused": 1, "kafkasink.pgcdc.backfill.last_key.info": 1} {
		if got, ok := ints[name]; !ok || got != want {
			t.Errorf("%s = %d (reported: %v), want %d (all: %v)", name, got, ok, want, ints)
		}
	}
	if rate <= 0 || key != `["2"]` {
		t.Errorf("rate %v, last key %q: want the first chunk's rate and key [\"2\"]", rate, key)
	}
}

// heldSink holds the Writes of read events while hold is set, until
// release closes.
type heldSink struct {
	*kafkasink.Sink
	hold    atomic.Bool
	release chan struct{}
}

func (s *heldSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if s.hold.Load() && slices.ContainsFunc(b.Events, func(e kafkasink.Event) bool { return e.Op == kafkasink.OpRead }) {
		select {
		case <-s.release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return s.Sink.Write(ctx, b)
}

package kafkasinkprom_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkprom"
)

// The collector exports the sink's Stats after real Writes to a fake
// cluster, passes the Prometheus client's own lint, and its exposition is
// what the closing note shows.
func TestCollector(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: c.ListenAddrs(), SinkID: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	events := make([]kafkasink.Event, 3)
	for i := range events {
		events[i] = kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "orders",
			Position: kafkasink.Position{LSN: 0x100, Index: uint64(i)}, Key: []string{"id"},
			After: kafkasink.Row{{Name: "id", Value: i}}}
	}
	if err := sink.Write(ctx, kafkasink.Batch{Events: events}); err != nil {
		t.Fatal(err)
	}

	collector := kafkasinkprom.NewCollector(sink)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collector)
	if problems, err := testutil.CollectAndLint(collector); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	want := `
# HELP kafkasink_events_written_total Events written to their topics.
# TYPE kafkasink_events_written_total counter
kafkasink_events_written_total{sink_id="orders"} 3
# HELP kafkasink_transactions_total Transactions ended, by outcome (committed, aborted).
# TYPE kafkasink_transactions_total counter
kafkasink_transactions_total{outcome="aborted",sink_id="orders"} 0
kafkasink_transactions_total{outcome="committed",sink_id="orders"} 1
# HELP kafkasink_checkpoint_lsn The commit LSN of the checkpoint's position (a WAL byte position).
# TYPE kafkasink_checkpoint_lsn gauge
kafkasink_checkpoint_lsn{sink_id="orders"} 256
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafkasink_events_written_total", "kafkasink_transactions_total", "kafkasink_checkpoint_lsn"); err != nil {
		t.Fatal(err)
	}
	count, err := testutil.GatherAndCount(reg, "kafkasink_transaction_duration_seconds")
	if err != nil || count != 1 {
		t.Fatalf("transaction_duration_seconds: %d series, %v; want one histogram", count, err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exposition bytes.Buffer
	enc := expfmt.NewEncoder(&exposition, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("/metrics:\n%s", exposition.String())
	if n := testutil.CollectAndCount(collector); n != 16 {
		t.Errorf("%d metrics collected, want 16 (14 names, two of them with two label values)", n)
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestAnnotationsOnTheWire runs the program against the real PostgreSQL
// and Kafka with -annotations and -annotations-in both, and reads the
// records back read_committed: every value has the annotations object and
// every record the annotations' headers, last, in key order.
func TestAnnotationsOnTheWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_cmd_annotations")

	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name, "-ha=false",
		"-topic-prefix", name, "-batch-max-wait", "20ms", "-progress", "0",
		"-annotations", "region=eu-west-1, env=prod", "-annotations-in", "both"}
	out, status, stop := startProgram(ctx, t, db, name, brokers, args)
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" SELECT g, 'row ' || g FROM generate_series(1, 10) g"); err != nil {
		t.Fatal(err)
	}
	topic := name + ".public." + name
	var records []*kgo.Record
	waitFor(t, 60*time.Second, fmt.Sprintf("10 records in %s", topic), status, out, func() bool {
		records = kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic)
		return len(records) >= 10
	})
	stop()
	<-status

	want := map[string]string{"env": "prod", "region": "eu-west-1"}
	for _, r := range records {
		var v struct {
			Annotations map[string]string `json:"annotations"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || !maps.Equal(v.Annotations, want) {
			t.Errorf("record %s[%d]@%d: value %s (%v), want annotations %q", r.Topic, r.Partition, r.Offset, r.Value, err, want)
		}
		var last []string
		for _, h := range r.Headers[max(0, len(r.Headers)-2):] {
			last = append(last, h.Key+"="+string(h.Value))
		}
		if !slices.Equal(last, []string{"env=prod", "region=eu-west-1"}) {
			t.Errorf("record %s[%d]@%d: headers %v, want env=prod and region=eu-west-1 last", r.Topic, r.Partition, r.Offset, r.Headers)
		}
	}
	if len(records) != 10 {
		t.Errorf("%d records, want 10", len(records))
	}
}

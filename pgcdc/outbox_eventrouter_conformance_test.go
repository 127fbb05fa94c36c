package pgcdc

// The EventRouter conformance check (issue 29): the real Debezium 3.6.1
// PostgreSQL connector with its outbox EventRouter transformation
// (testdata/debezium/configs/outbox-router.properties; its records in
// outbox-router-schemas-false.jsonl, made by scripts/debezium-capture.sh
// with DEBEZIUM_SCHEMAS=false) against Run with Config.EventRouter under
// the same properties, on the same outbox workload
// (workload-outbox.sql). Topics, keys, values and the EventRouter's
// headers (id and the placed columns) must be equal but for the
// deviations listed in deviations-outbox-router.txt, each with its
// reason. Headers outside the EventRouter are not compared: Debezium's
// __debezium.context.* (its extended headers) and kafkasink's own.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

func TestEventRouterConformance(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	schema := e.name
	e.exec("CREATE SCHEMA " + schema)
	t.Cleanup(func() { e.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE") })
	tables := []string{schema + ".outbox", schema + ".outbox_text"}
	// The tables exist before Run starts, as a publication of named
	// tables needs; Debezium's run created them after its snapshot.
	stmts := workloadStatements(t, "workload-outbox.sql", schema)
	for _, s := range stmts[:2] {
		e.exec(s)
	}
	cfg := e.config(tables...)
	cfg.EventRouter = &EventRouter{Tables: tables, Properties: map[string]string{
		"table.fields.additional.placement": "type:header:eventType",
		"table.expand.json.payload":         "true",
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: e.brokers, SinkID: e.name, Topics: kafkasink.Topics{Prefix: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "Run streaming", r, e.streaming)
	for _, s := range stmts[2:] {
		if !strings.Contains(s, ".zz_end") {
			e.exec(s)
		}
	}

	var want []dbzRecord
	for _, rec := range readDebeziumGolden(t, "outbox-router-schemas-false.jsonl") {
		if strings.HasPrefix(rec.Topic, "outbox.event.") {
			want = append(want, rec)
		}
	}
	var topics []string
	for _, rec := range want {
		if !slices.Contains(topics, rec.Topic) {
			topics = append(topics, rec.Topic)
		}
	}
	var ours []dbzRecord
	waitFor(t, 30*time.Second, fmt.Sprintf("%d routed records", len(want)), r, func() bool {
		ours = ours[:0]
		for _, topic := range topics {
			for _, rec := range sinktest.ReadCommitted(t, e.brokers, topic) {
				ours = append(ours, ourDebeziumRecord(rec, schema))
			}
		}
		return len(ours) >= len(want)
	})
	got := eventRouterDeviations(want, ours)
	path := filepath.Join(debeziumData, "deviations-outbox-router.txt")
	if *updateGolden {
		header := "# Differences between Debezium 3.6.1's outbox EventRouter (configuration\n# \"outbox-router\") and pgcdc's Config.EventRouter, kept by\n# TestEventRouterConformance (-update rewrites the lines; keep the reasons).\n"
		if err := os.WriteFile(path, []byte(header+strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if wantDev := readDeviations(t, path); strings.Join(got, "\n") != strings.Join(wantDev, "\n") {
		t.Errorf("deviations from Debezium's EventRouter:\n%s\nwant (%s):\n%s", strings.Join(got, "\n"), path, strings.Join(wantDev, "\n"))
	}
}

// eventRouterDeviations compares records per topic and key, in order
// (Kafka orders a key's records, not a topic's across partitions): value
// and the EventRouter's headers (id and eventType).
func eventRouterDeviations(want, ours []dbzRecord) []string {
	var out []string
	byTopic := func(rs []dbzRecord) map[string][]dbzRecord {
		m := map[string][]dbzRecord{}
		for _, r := range rs {
			k := r.Topic + " key " + string(r.Key)
			m[k] = append(m[k], r)
		}
		return m
	}
	w, o := byTopic(want), byTopic(ours)
	var topics []string
	for _, rs := range []map[string][]dbzRecord{w, o} {
		for topic := range rs {
			if !slices.Contains(topics, topic) {
				topics = append(topics, topic)
			}
		}
	}
	slices.Sort(topics)
	for _, topic := range topics {
		ws, mine := w[topic], o[topic]
		for i := range max(len(ws), len(mine)) {
			at := fmt.Sprintf("%s[%d]", topic, i)
			switch {
			case i >= len(mine):
				out = append(out, at+": missing in ours")
				continue
			case i >= len(ws):
				out = append(out, at+": not in Debezium's output")
				continue
			}
			for _, f := range []struct {
				name     string
				dbz, our []byte
			}{
				{"value", ws[i].Value, mine[i].Value},
				{"header id", eventRouterHeader(ws[i], "id"), eventRouterHeader(mine[i], "id")},
				{"header eventType", eventRouterHeader(ws[i], "eventType"), eventRouterHeader(mine[i], "eventType")},
			} {
				if !bytes.Equal(f.dbz, f.our) {
					out = append(out, fmt.Sprintf("%s: %s: debezium=%s ours=%s", at, f.name, f.dbz, f.our))
				}
			}
		}
	}
	return out
}

func eventRouterHeader(r dbzRecord, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key && h.Value != nil {
			return []byte(*h.Value)
		}
	}
	return []byte("<absent>")
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestLogsWriteReceipts runs the program with -log-level debug against
// the real PostgreSQL and Kafka: it logs a write receipt for each Write,
// and each is what a read_committed consumer recomputes from the topic
// (kafkasink.Receipt), deletes' tombstones (-encoder upsert) included.
func TestLogsWriteReceipts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_receipts")
	topic := name + ".public." + name

	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-partitions", "3", "-encoder", "upsert", "-log-level", "debug", "-log-format", "json"}
	out, status, stop := startProgram(ctx, t, db, name, brokers, args)
	// One statement at a time, each waited for, so that each is a Write
	// of its own.
	written := 0
	for _, st := range []struct {
		sql     string
		records int
	}{
		{"INSERT INTO " + name + " SELECT g, 'row ' || g FROM generate_series(1, 20) g", 20},
		{"UPDATE " + name + " SET note = 'changed' WHERE id <= 5", 5},
		{"DELETE FROM " + name + " WHERE id > 17", 3},
	} {
		if _, err := db.Exec(ctx, st.sql); err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
		written += st.records
		waitFor(t, 60*time.Second, fmt.Sprintf("%d records in %s", written, topic), status, out, func() bool {
			return len(kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic)) >= written
		})
	}
	stop()
	select {
	case <-status:
	case <-time.After(30 * time.Second):
		t.Fatalf("did not stop within 30s of cancellation:\n%s", out.String())
	}

	type receipt struct {
		Topic, First, Last, CRC32C string
		Records, ValueBytes        int
	}
	var logged []receipt
	for line := range strings.Lines(out.String()) {
		var l struct {
			Msg, Topic, First, Last string
			Records                 int
			ValueBytes              int    `json:"value_bytes"`
			CRC32C                  string `json:"crc32c"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "write receipt" {
			logged = append(logged, receipt{l.Topic, l.First, l.Last, l.CRC32C, l.Records, l.ValueBytes})
		}
	}
	records := kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic)
	n := 0
	for _, got := range logged {
		first, err1 := kafkasink.ParsePosition(got.First)
		last, err2 := kafkasink.ParsePosition(got.Last)
		if got.Topic != topic || err1 != nil || err2 != nil {
			t.Fatalf("write receipt %+v: want topic %s and two positions", got, topic)
		}
		// Recomputed as kafkasink.Receipt says a consumer does.
		type positioned struct {
			pos   kafkasink.Position
			value []byte
		}
		var in []positioned
		for _, r := range records {
			p, err := kafkasink.ParsePosition(kafkasinktest.Header(r, kafkasink.HeaderID))
			if err != nil {
				t.Fatal(err)
			}
			if p.Compare(first) >= 0 && p.Compare(last) <= 0 {
				in = append(in, positioned{p, r.Value})
			}
		}
		slices.SortStableFunc(in, func(a, b positioned) int { return a.pos.Compare(b.pos) })
		w := receipt{Topic: topic, First: got.First, Last: got.Last}
		var crc uint32
		for _, x := range in {
			w.Records++
			w.ValueBytes += len(x.value)
			crc = crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), x.value)
		}
		w.CRC32C = fmt.Sprintf("%08x", crc)
		if got != w {
			t.Errorf("write receipt logged %+v, recomputed from the topic %+v", got, w)
		}
		n += got.Records
	}
	if n != len(records) {
		t.Errorf("the write receipts logged count %d records, the topic has %d:\n%s", n, len(records), out.String())
	}
	if len(logged) < 3 {
		t.Errorf("%d write receipts logged, want one per Write, at least 3:\n%s", len(logged), out.String())
	}
	if !slices.ContainsFunc(records, func(r *kgo.Record) bool { return r.Value == nil }) {
		t.Error("no tombstone read: the test no longer covers what it should")
	}
}

// TestReceiptsFollowLogLevel: the program asks the sink for write
// receipts only when its log shows them, at -log-level debug.
func TestReceiptsFollowLogLevel(t *testing.T) {
	for level, want := range map[string]bool{"debug": true, "info": false, "warn": false} {
		o, err := parse([]string{"-pg", "postgres://cdc@db/shop", "-brokers", "b:9092", "-log-level", level}, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		logger, _, err := newLogger(o.logLevel, "json", io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(logger)
		if err != nil {
			t.Fatal(err)
		}
		if kcfg.Receipts != want {
			t.Errorf("-log-level %s: Config.Receipts %v, want %v", level, kcfg.Receipts, want)
		}
	}
}

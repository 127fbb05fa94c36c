package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest/rawrecord"
)

// workload is what one run writes: batches of events of one table, the
// same for every contender.
type workload struct {
	brokers     []string
	topic       string // the events' topic, made for this run
	ckTopic     string // the checkpoint topic, made for this run
	compression string
	headers     kafkasink.HeaderSet // the standard headers the records carry
	batch       int                 // events per batch
	batches     int

	// events is one batch of events; the kafkasink contenders renumber
	// their positions for every batch, as a replication loop would hand
	// over new ones.
	events []kafkasink.Event
	// records are the events as kafkasink writes them (the JSONEncoder's
	// value, the text key, the standard headers of the set), encoded once before
	// the clock starts: the pre-encoded contenders send these.
	records []*kgo.Record
}

// table is the source table of the events; the kafkasink contenders route
// it to the run's topic.
const (
	schemaName = "public"
	tableName  = "bench"
)

// newWorkload makes batch events whose JSONEncoder value is about size
// bytes, and their records for topic.
func newWorkload(s spec) (*workload, error) {
	headers, err := kafkasink.ParseHeaderSet(s.Headers)
	if err != nil {
		return nil, err
	}
	w := &workload{brokers: s.Brokers, topic: s.Topic, ckTopic: s.CheckpointTopic, compression: s.Compression,
		headers: headers, batch: s.Batch, batches: s.Events / s.Batch}
	rng := rand.New(rand.NewPCG(uint64(s.Size), uint64(s.Batch)))
	w.events = make([]kafkasink.Event, s.Batch)
	for j := range w.events {
		w.events[j] = event(0, j, rng, 0)
	}
	base, err := kafkasink.JSONEncoder{}.Encode([]byte{}, &w.events[0])
	if err != nil {
		return nil, err
	}
	pad := max(0, s.Size-len(base))
	for j := range w.events {
		w.events[j] = event(0, j, rng, pad)
	}
	w.records = make([]*kgo.Record, len(w.events))
	for j := range w.events {
		if w.records[j], err = record(s.Topic, &w.events[j], headers); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// event is row j of batch k: an update of an orders-like row whose note
// column is pad random letters (so compression does not make it vanish).
func event(k, j int, rng *rand.Rand, pad int) kafkasink.Event {
	note := make([]byte, pad)
	for i := range note {
		note[i] = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[rng.IntN(63)]
	}
	e := kafkasink.Event{
		Op: kafkasink.OpUpdate, Schema: schemaName, Table: tableName, XID: 1000,
		Commit: time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), Key: []string{"id"},
		After: kafkasink.Row{
			{Name: "id", Value: int64(j + 1)},
			{Name: "customer_id", Value: int64(rng.IntN(100000))},
			{Name: "status", Value: "shipped"},
			{Name: "amount", Value: kafkasink.Decimal(strconv.Itoa(rng.IntN(100000)) + ".25")},
			{Name: "updated_at", Value: time.Date(2026, 12, 1, 4, 0, j%60, 0, time.UTC)},
			{Name: "note", Value: string(note)},
		},
	}
	renumber(&e, k, j)
	return e
}

// renumber gives event j of batch k its position: batch k is transaction
// k+1, so positions increase across batches as a sink requires.
func renumber(e *kafkasink.Event, k, j int) {
	e.Position = kafkasink.Position{LSN: kafkasink.LSN(k + 1), Index: uint64(j)}
	e.LSN = kafkasink.LSN(k + 1)
}

// record is e as kafkasink writes it with the header set hs.
func record(topic string, e *kafkasink.Event, hs kafkasink.HeaderSet) (*kgo.Record, error) {
	key, err := kafkasink.AppendKey(nil, e, nil, kafkasink.KeyText)
	if err != nil {
		return nil, err
	}
	value, err := kafkasink.JSONEncoder{}.Encode([]byte{}, e)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: key, Value: value, Headers: rawrecord.Headers(e, hs)}, nil
}

// recordBytes is the key, value and header bytes of one batch's records.
func (w *workload) recordBytes() int64 {
	var n int64
	for _, r := range w.records {
		n += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	return n
}

// checkpointValue is what the raw transactional contenders write last in
// each transaction, the size of kafkasink's checkpoint record.
func checkpointValue(k int) []byte {
	v, _ := json.Marshal(map[string]any{"version": 1, "sink_id": "raw", "mode": "exactly-once",
		"position": fmt.Sprintf("0/%X:0", k+1), "written_at": time.Now().UTC()})
	return v
}

// stdlibRecord is what a hand-written pipeline makes of e: the
// JSONEncoder's document through encoding/json (a map for the row, as
// columns are dynamic), and the same key and headers (of the set hs).
func stdlibRecord(topic string, e *kafkasink.Event, hs kafkasink.HeaderSet) (*kgo.Record, error) {
	v, err := rawrecord.StdlibJSON(e)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(strconv.FormatInt(e.After[0].Value.(int64), 10)), Value: v, Headers: rawrecord.Headers(e, hs)}, nil
}

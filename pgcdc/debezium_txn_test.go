package pgcdc

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// transactionDeviations compares, for provide.transaction.metadata, how
// the records of each transaction stand between its BEGIN and its END
// (TestDebeziumConformance compares the records themselves topic by
// topic). Debezium's records are taken in the order it emitted them;
// ours, which Kafka orders only within a topic, in the order of the
// transaction topic, each BEGIN followed by the records whose
// transaction block has its txId, by total_order. Records without a
// block (snapshot rows, tombstones) are left out on both sides. Each
// side is then written one line per record, with every txId, LSN and
// time replaced by a name given in order of first appearance within its
// transaction (X1, L1, T1, ...; a source.sequence[0] that is the previous
// END's LSN is Lprev), so that the lines keep what ties them together
// (BEGIN's id is the first event's LSN, END's the next transaction's
// source.sequence, ts_ms the commit time) but not what differs from run to
// run (other sessions' WAL between two transactions, two commits in one
// millisecond). Lprev is a name of its own, not an entry of the names: a
// transaction whose first change follows the previous commit with no other
// session's WAL between starts at the previous END's LSN, and its BEGIN id
// would otherwise be named Lprev in one run and L1 in another.
func transactionDeviations(want, ours []dbzRecord) []string {
	w := transactionLines(want)
	o := transactionLines(inTransactionOrder(ours))
	var out []string
	i, j := 0, 0
	for _, p := range lcsPairs(w, o) {
		for ; i < p[0]; i++ {
			out = append(out, fmt.Sprintf("transactions[%d] %s: missing in ours", i, w[i]))
		}
		for ; j < p[1]; j++ {
			out = append(out, fmt.Sprintf("transactions ours[%d] %s: not in Debezium's output", j, o[j]))
		}
		i, j = i+1, j+1
	}
	for ; i < len(w); i++ {
		out = append(out, fmt.Sprintf("transactions[%d] %s: missing in ours", i, w[i]))
	}
	for ; j < len(o); j++ {
		out = append(out, fmt.Sprintf("transactions ours[%d] %s: not in Debezium's output", j, o[j]))
	}
	return out
}

// txnFields returns a record's transaction block, or, for a BEGIN or
// END, its value, and whether it is one of these; nil for other records.
func txnFields(r dbzRecord) (fields map[string]any, frame bool) {
	v, _ := unwrapPayload(decodeJSON(r.Value)).(map[string]any)
	if _, ok := v["status"]; ok {
		return v, true
	}
	block, _ := v["transaction"].(map[string]any)
	return block, false
}

// inTransactionOrder arranges our records as Debezium emits them: each
// BEGIN of the transaction topic, then the records of its transaction by
// total_order, then its END.
func inTransactionOrder(rs []dbzRecord) []dbzRecord {
	byTxID := make(map[string][]dbzRecord)
	var frames []dbzRecord
	for _, r := range rs {
		f, frame := txnFields(r)
		switch {
		case frame:
			frames = append(frames, r)
		case f != nil:
			x, _, _ := strings.Cut(fmt.Sprint(f["id"]), ":")
			byTxID[x] = append(byTxID[x], r)
		}
	}
	var out []dbzRecord
	for _, r := range frames {
		out = append(out, r)
		f, _ := txnFields(r)
		if f["status"] != "BEGIN" {
			continue
		}
		x, _, _ := strings.Cut(fmt.Sprint(f["id"]), ":")
		events := byTxID[x]
		slices.SortStableFunc(events, func(a, b dbzRecord) int {
			fa, _ := txnFields(a)
			fb, _ := txnFields(b)
			oa, _ := strconv.Atoi(fmt.Sprint(fa["total_order"]))
			ob, _ := strconv.Atoi(fmt.Sprint(fb["total_order"]))
			return cmp.Compare(oa, ob)
		})
		out = append(out, events...)
	}
	return out
}

// transactionLines writes the BEGINs, ENDs and records with a
// transaction block of rs, in order, one line each, with txIds, LSNs
// and times named in order of first appearance within their
// transaction, but for a source.sequence[0] that is the end of the
// previous transaction's commit (END's LSN), "Lprev".
func transactionLines(rs []dbzRecord) []string {
	var (
		names  map[string]string
		counts map[string]int
		prev   string // the LSN of the last END's id
	)
	name := func(kind string, v any) string {
		k := kind + fmt.Sprint(v)
		if n, ok := names[k]; ok {
			return n
		}
		counts[kind]++
		names[k] = fmt.Sprintf("%s%d", kind, counts[kind])
		return names[k]
	}
	id := func(v any) (string, string) {
		x, l, _ := strings.Cut(fmt.Sprint(v), ":")
		return name("X", x) + ":" + name("L", l), l
	}
	var out []string
	for _, r := range rs {
		f, frame := txnFields(r)
		switch {
		case frame:
			if f["status"] == "BEGIN" || names == nil {
				names, counts = make(map[string]string), make(map[string]int)
			}
			txID, lsn := id(f["id"])
			if f["status"] == "END" {
				prev = lsn
			}
			out = append(out, fmt.Sprintf("%s id=%s event_count=%s data_collections=%s ts_ms=%s",
				f["status"], txID, renderJSON(f["event_count"]), renderJSON(f["data_collections"]), name("T", f["ts_ms"])))
		case f != nil && names != nil:
			v := unwrapPayload(decodeJSON(r.Value)).(map[string]any)
			src, _ := v["source"].(map[string]any)
			seq := "null"
			var pair []any
			if json.Unmarshal([]byte(fmt.Sprint(src["sequence"])), &pair) == nil && len(pair) == 2 && pair[0] != nil {
				seq = "Lprev"
				if fmt.Sprint(pair[0]) != prev {
					seq = name("L", pair[0])
				}
			}
			txID, _ := id(f["id"])
			out = append(out, fmt.Sprintf("  %s %s %s: transaction id=%s total_order=%s data_collection_order=%s; source txId=%s lsn=%s sequence[0]=%s ts_ms=%s",
				strings.TrimPrefix(r.Topic, "dbz."+debeziumSchema+"."), v["op"], renderJSON(unwrapPayload(decodeJSON(r.Key))),
				txID, renderJSON(f["total_order"]), renderJSON(f["data_collection_order"]),
				name("X", src["txId"]), name("L", src["lsn"]), seq, name("T", src["ts_ms"])))
		}
	}
	return out
}

// A transaction the server streams while in progress (beyond
// logical_decoding_work_mem, 64kB for this test's connections), spooled,
// replayed at its commit and written in several Writes (BatchMaxEvents
// 500), gets DebeziumEncoder's transaction metadata right: one BEGIN and
// one END, END counting what the database holds per table and leaving
// out the TRUNCATE the encoder skips (skipped.operations "t"), and each
// record's block a distinct total_order and data_collection_order, read
// back read_committed.
func TestStreamedTransactionMetadata(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	a, b := e.createTable(""), e.createTable("_b")
	cfg := e.config("public."+a, "public."+b)
	cfg.ConnString = streamingConnString(t, e)
	cfg.BatchMaxEvents = 500
	mon := &Monitor{}
	cfg.Monitor = mon
	ctx := context.Background()
	txnTopic := e.name + ".transaction"
	sink, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers:   e.brokers,
		SinkID:    e.name,
		Topics:    kafkasink.Topics{Prefix: "t", Partitions: 1},
		KeyFormat: kafkasink.KeyJSON,
		Encoder:   debezium.Encoder{Name: "t", ProvideTransactionMetadata: true, TransactionTopic: txnTopic},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close(context.Background()) })
	tr := newTracker()
	_, r := start(t, cfg, &recSink{Sink: sink, tr: tr})
	waitFor(t, 20*time.Second, "streaming", r, e.streaming)

	conn, err := pgx.Connect(ctx, e.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var xid uint32
	for _, sql := range []string{
		"TRUNCATE " + b,
		"INSERT INTO " + a + " (id, seq, note) SELECT g, g, repeat('x', 1000) FROM generate_series(1, 1500) g",
		"INSERT INTO " + b + " (id, seq, note) SELECT g, g, 'b' FROM generate_series(1, 3) g",
		"UPDATE " + a + " SET seq = seq + 1 WHERE id <= 10",
	} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.QueryRow(ctx, "SELECT txid_current()::bigint::int4").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the open transaction spooled", r, func() bool { return mon.Stats().SpoolBytes > 0 })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the transaction's 1514 events written", r, func() bool { return mon.Stats().Events >= 1514 })
	if tr.writes < 4 {
		t.Errorf("the transaction took %d Writes, want at least 4 (BatchMaxEvents 500)", tr.writes)
	}

	var rows = map[string]int{}
	for _, table := range []string{a, b} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rows[table] = n
	}
	// Every change of the transaction is a record: 1500 inserts and 10
	// updates of a, 3 inserts of b.
	// (END lists the tables in Debezium's order, a Java HashMap's, which
	// TestDebeziumTransactionEndTableOrder checks.)
	wantEnd := fmt.Sprintf(`event_count=%d data_collections=map[public.%s:%d public.%s:%d]`,
		rows[a]+10+rows[b], a, rows[a]+10, b, rows[b])
	frames := sinktest.ReadCommitted(t, e.brokers, txnTopic)
	if len(frames) != 2 {
		t.Fatalf("transaction topic holds %d records, want one BEGIN and one END", len(frames))
	}
	prefix := fmt.Sprintf(`"%d:`, xid)
	for i, status := range []string{"BEGIN", "END"} {
		var v map[string]json.RawMessage
		if err := json.Unmarshal(frames[i].Value, &v); err != nil {
			t.Fatal(err)
		}
		if string(v["status"]) != `"`+status+`"` || !strings.HasPrefix(string(v["id"]), prefix) || string(frames[i].Key) != `{"id":`+string(v["id"])+`}` {
			t.Errorf("transaction record %d: key %s value %s, want %s of transaction %d", i, frames[i].Key, frames[i].Value, status, xid)
		}
		if status == "END" {
			var dcs []struct {
				DataCollection string `json:"data_collection"`
				EventCount     int    `json:"event_count"`
			}
			if err := json.Unmarshal(v["data_collections"], &dcs); err != nil {
				t.Fatal(err)
			}
			counts := make(map[string]int)
			for _, dc := range dcs {
				counts[dc.DataCollection] = dc.EventCount
			}
			got := fmt.Sprintf("event_count=%s data_collections=%v", v["event_count"], counts)
			if got != wantEnd || len(dcs) != 2 {
				t.Errorf("END counts %s, want %s", got, wantEnd)
			}
		}
	}
	total := map[int]bool{}
	for _, table := range []string{a, b} {
		recs := sinktest.ReadCommitted(t, e.brokers, "t.public."+table)
		for i, rec := range recs {
			var v struct {
				Transaction struct {
					ID                  string `json:"id"`
					TotalOrder          int    `json:"total_order"`
					DataCollectionOrder int    `json:"data_collection_order"`
				} `json:"transaction"`
			}
			if err := json.Unmarshal(rec.Value, &v); err != nil {
				t.Fatal(err)
			}
			tb := v.Transaction
			if !strings.HasPrefix(`"`+tb.ID, prefix) || tb.DataCollectionOrder != i+1 || total[tb.TotalOrder] || tb.TotalOrder < 1 || tb.TotalOrder > rows[a]+10+rows[b] {
				t.Fatalf("%s record %d: transaction block %+v, want transaction %d, data_collection_order %d and a total_order of its own", table, i, tb, xid, i+1)
			}
			total[tb.TotalOrder] = true
		}
	}
	if len(total) != rows[a]+10+rows[b] {
		t.Errorf("%d records with a transaction block, want %d", len(total), rows[a]+10+rows[b])
	}
}

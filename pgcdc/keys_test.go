package pgcdc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestFullIdentityKeyedByPrimaryKey switches a table with a primary key to
// REPLICA IDENTITY FULL and checks that its snapshot rows, updates,
// deletes and key changes are keyed by the primary key, so one row keeps
// one key (and one partition) and a delete removes it from a compacted
// topic; and that a FULL table without a primary key falls back to event
// ids, logged once.
func TestFullIdentityKeyedByPrimaryKey(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	keyed, keyless := e.name+"_full", e.name+"_nopk"
	e.exec("CREATE TABLE " + keyed + " (tenant text, id int, note text, PRIMARY KEY (tenant, id))")
	e.exec("CREATE TABLE " + keyless + " (id int, note text)")
	e.exec("ALTER TABLE " + keyed + " REPLICA IDENTITY FULL")
	e.exec("ALTER TABLE " + keyless + " REPLICA IDENTITY FULL")
	e.exec("INSERT INTO " + keyed + " VALUES ('a', 1, 'snap'), ('a', 2, 'snap'), ('b', 1, 'snap')")

	cfg := e.config("public." + keyed)
	cfg.Snapshot = true
	logs := newLogRecorder(t)
	cfg.Logger = slog.New(logs)
	sink := e.newSink(e.name)
	_, done := start(t, cfg, sink)
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	waitFor(t, 20*time.Second, "the snapshot", done, func() bool {
		return len(sinktest.ReadCommitted(t, e.brokers, "t.public."+keyed)) == 3
	})
	e.exec("UPDATE " + keyed + " SET note = 'upd' WHERE tenant = 'a' AND id = 1")
	e.exec("DELETE FROM " + keyed + " WHERE tenant = 'a' AND id = 2")
	e.exec("UPDATE " + keyed + " SET id = 3 WHERE tenant = 'b' AND id = 1") // a key change
	// The snapshot needs a primary key; the stream does not.
	e.exec("ALTER PUBLICATION " + e.name + " ADD TABLE " + keyless)
	e.exec("INSERT INTO " + keyless + " VALUES (1, 'new')")
	e.exec("UPDATE " + keyless + " SET note = 'upd'")
	e.exec("UPDATE " + keyless + " SET note = 'again'")

	// The keyless table's changes come last: once they are in Kafka, so
	// is everything before them.
	keylessRecs := e.readKeyed(done, keyless, 3)
	// Each key's operations, as the changes above made them.
	want := map[string][]string{
		"a|1": {"read", "update"},
		"a|2": {"read", "delete"},
		"b|1": {"read", "delete"},
		"b|3": {"insert"},
	}
	checkKeyedByPrimaryKey(t, e.readKeyed(done, keyed, 1), want, e.tableKeys(keyed))

	// Without a primary key: event-id keys, and one warning for the table.
	for _, r := range keylessRecs {
		if r.key != r.event.ID || len(r.event.Key) != 0 {
			t.Errorf("keyless table: %s record keyed %q with key columns %v, want its event id %s", r.op, r.key, r.event.Key, r.event.ID)
		}
	}
	if n := logs.matching("table has no key", "public."+keyless); n != 1 {
		t.Errorf("the keyless table's fallback to event ids was logged %d times, want once", n)
	}
	if n := logs.matching("table has no key", "public."+keyed); n != 0 {
		t.Errorf("the keyed table was logged as keyless %d times", n)
	}
}

// keyedRec is a record of TestFullIdentityKeyedByPrimaryKey's topics.
type keyedRec struct {
	key, op   string
	partition int32
	event     record
}

// readKeyed waits until the table's topic holds at least n records and
// returns them.
func (e *pgEnv) readKeyed(r *run, table string, n int) []keyedRec {
	e.t.Helper()
	var out []keyedRec
	waitFor(e.t, 30*time.Second, fmt.Sprintf("%d records of %s", n, table), r, func() bool {
		out = out[:0]
		for _, r := range sinktest.ReadCommitted(e.t, e.brokers, "t.public."+table) {
			var v record
			if err := json.Unmarshal(r.Value, &v); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, keyedRec{string(r.Key), v.Op, r.Partition, v})
		}
		return len(out) >= n
	})
	return out
}

// tableKeys returns the keys ("tenant|id") of the rows the table holds,
// sorted.
func (e *pgEnv) tableKeys(table string) []string {
	e.t.Helper()
	var live []string
	e.mu.Lock()
	rows, err := e.db.Query(context.Background(), "SELECT tenant || '|' || id FROM "+table+" ORDER BY 1")
	if err == nil {
		for rows.Next() {
			var k string
			rows.Scan(&k)
			live = append(live, k)
		}
		rows.Close()
		err = rows.Err()
	}
	e.mu.Unlock()
	if err != nil {
		e.t.Fatal(err)
	}
	return live
}

// checkKeyedByPrimaryKey checks the keyed table's records: keyed by the
// primary key, one partition per key, each key's operations those of
// want, and the keys not deleted last the rows the table holds (live).
func checkKeyedByPrimaryKey(t *testing.T, recs []keyedRec, want map[string][]string, live []string) {
	t.Helper()
	byKey := make(map[string][]string)
	partition := make(map[string]int32)
	for _, r := range recs {
		if !slices.Equal(r.event.Key, []string{"tenant", "id"}) {
			t.Errorf("%s record %s: key columns %v, want the primary key [tenant id]", r.op, r.key, r.event.Key)
		}
		if p, ok := partition[r.key]; ok && p != r.partition {
			t.Errorf("key %s in partitions %d and %d", r.key, p, r.partition)
		}
		partition[r.key] = r.partition
		byKey[r.key] = append(byKey[r.key], r.op)
	}
	for k, ops := range want {
		if !slices.Equal(byKey[k], ops) {
			t.Errorf("key %s: %v in Kafka, want %v", k, byKey[k], ops)
		}
	}
	if len(byKey) != len(want) {
		t.Errorf("keys in Kafka %v, want %v", byKey, want)
	}
	// The keys that are not deleted are the rows the table holds.
	var liveInKafka []string
	for k, ops := range byKey {
		if ops[len(ops)-1] != "delete" {
			liveInKafka = append(liveInKafka, k)
		}
	}
	slices.Sort(liveInKafka)
	if !slices.Equal(liveInKafka, live) {
		t.Errorf("rows alive in Kafka %v, in the table %v", liveInKafka, live)
	}
}

// TestKeyFollowsIndexOrder checks that a key is written in the order of
// its index, not of the table's columns: PRIMARY KEY (b, a) keys a row
// {"b":1,"a":"k"}, as Debezium does, for snapshot rows and streamed
// changes alike, with REPLICA IDENTITY DEFAULT, USING INDEX and FULL,
// and in the __debezium.oldkey/newkey headers of a key change. The keys
// Kafka holds at the end, applying deletes and tombstones, are the rows
// each table holds.
func TestKeyFollowsIndexOrder(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	pk, ri, full := e.name+"_pk", e.name+"_ri", e.name+"_full"
	for _, table := range []string{pk, full} {
		e.exec("CREATE TABLE " + table + " (a text, b int, v text, PRIMARY KEY (b, a))")
	}
	e.exec("ALTER TABLE " + full + " REPLICA IDENTITY FULL")
	e.exec("CREATE TABLE " + ri + " (a text NOT NULL, b int NOT NULL, v text)")
	e.exec("CREATE UNIQUE INDEX " + ri + "_idx ON " + ri + " (b, a)")
	e.exec("ALTER TABLE " + ri + " REPLICA IDENTITY USING INDEX " + ri + "_idx")
	tables := []string{pk, ri, full}
	for _, table := range tables {
		e.exec("INSERT INTO " + table + " VALUES ('k', 1, 'snap'), ('m', 2, 'snap')")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers:   e.brokers,
		SinkID:    e.name,
		Topics:    kafkasink.Topics{Prefix: "t", Partitions: 1},
		KeyFormat: kafkasink.KeyJSON,
		Encoder:   debezium.Encoder{},
	})
	if err != nil {
		t.Fatalf("kafkasink.New: %v", err)
	}
	t.Cleanup(func() { sink.Close(context.Background()) })
	cfg := e.config()
	for _, table := range tables {
		cfg.Tables = append(cfg.Tables, "public."+table)
	}
	cfg.Snapshot = true
	_, done := start(t, cfg, sink)
	// Changes made from here on are streamed, not in the snapshot.
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	for _, table := range tables {
		e.exec("INSERT INTO " + table + " VALUES ('n', 3, 'new')")
		e.exec("UPDATE " + table + " SET v = 'upd' WHERE b = 1")
		e.exec("UPDATE " + table + " SET b = 4 WHERE b = 2") // a key change
		e.exec("DELETE FROM " + table + " WHERE b = 3")
	}

	// Each table: 2 reads, insert, update, delete+tombstone+insert of
	// the key change, delete+tombstone.
	const records = 9
	for _, table := range tables {
		var recs []*kgo.Record
		waitFor(t, 30*time.Second, fmt.Sprintf("%d records of %s", records, table), done, func() bool {
			recs = sinktest.ReadCommitted(t, e.brokers, "t.public."+table)
			return len(recs) >= records
		})
		live := make(map[string]bool)
		for _, r := range recs {
			key := string(r.Key)
			if names := jsonObjectKeys(t, r.Key); !slices.Equal(names, []string{"b", "a"}) {
				t.Errorf("%s: key %s has columns %v, want the index's order [b a]", table, key, names)
			}
			for _, h := range r.Headers {
				if h.Key == debezium.HeaderNewKey || h.Key == debezium.HeaderOldKey {
					if names := jsonObjectKeys(t, h.Value); !slices.Equal(names, []string{"b", "a"}) {
						t.Errorf("%s: header %s %s has columns %v, want [b a]", table, h.Key, h.Value, names)
					}
				}
			}
			var v struct {
				Op string `json:"op"`
			}
			if r.Value != nil {
				if err := json.Unmarshal(r.Value, &v); err != nil {
					t.Fatal(err)
				}
			}
			live[key] = r.Value != nil && v.Op != "d"
		}
		var inKafka []string
		for k, alive := range live {
			if alive {
				inKafka = append(inKafka, k)
			}
		}
		slices.Sort(inKafka)
		var inTable []string
		e.mu.Lock()
		rows, err := e.db.Query(context.Background(), "SELECT a, b FROM "+table+" ORDER BY 1")
		for err == nil && rows.Next() {
			var (
				a string
				b int
			)
			rows.Scan(&a, &b)
			inTable = append(inTable, fmt.Sprintf(`{"b":%d,"a":%q}`, b, a))
		}
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		e.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(inTable)
		if !slices.Equal(inKafka, inTable) {
			t.Errorf("%s: live keys in Kafka %v, rows in the table %v", table, inKafka, inTable)
		}
	}
}

// jsonObjectKeys returns the member names of a JSON object in order.
func jsonObjectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is not a JSON object", b)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		names = append(names, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	return names
}

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestBackfillCommandUnderLoad: while a writer inserts, updates and
// deletes rows of a table, `kafkasink backfill` asks the running program
// for a backfill of it. For a read_committed reader, every row's last
// record is the table's row, none is missing, no read record of a key
// follows a newer change of it, nothing follows a delete, and each row
// has at most one record of the backfill. (pgcdc's TestBackfillUnderLoad
// runs a richer load, with key changes and TOASTed values, for the other
// ways of asking.)
func TestBackfillCommandUnderLoad(t *testing.T) {
	const rows = 20000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_bfload")
	for _, sql := range []string{
		"ALTER TABLE " + name + " ADD COLUMN seq bigint NOT NULL DEFAULT 0",
		fmt.Sprintf("INSERT INTO %s SELECT g, 'n', g FROM generate_series(1, %d) g", name, rows),
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-partitions", "3", "-batch-max-wait", "20ms", "-log-format", "text", "-http-addr", "127.0.0.1:0"}
	out, status, _ := startProgram(ctx, t, db, name, brokers, args)
	listening := regexp.MustCompile(`msg="HTTP listener started" addr=(\S+)`)
	var addr string
	waitFor(t, time.Minute, "the HTTP listener", status, out, func() bool {
		m := listening.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})

	w := startLoadWriter(t, pg, name, rows)
	time.Sleep(300 * time.Millisecond) // changes flow before the backfill
	before := w.txns.Load()
	var bf backfillDoc
	waitFor(t, time.Minute, "the program to take the backfill request", status, out, func() bool {
		code, stdout, _ := backfillCLI(t, addr, "-table", "public."+name)
		return code == 0 && json.Unmarshal([]byte(stdout), &bf) == nil
	})
	waitFor(t, 2*time.Minute, "the backfill's end", status, out, func() bool {
		code, stdout, _ := backfillCLI(t, addr, "list")
		var l []backfillDoc
		return code == 0 && json.Unmarshal([]byte(stdout), &l) == nil && len(l) == 0
	})
	during := w.txns.Load() - before
	if during == 0 {
		t.Fatal("the writer committed nothing while the backfill ran: the test proves nothing")
	}
	w.stop()
	// A last change, which the program has written once the topic holds
	// it: everything before it is there too.
	marker := w.nextID.Add(1)
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" VALUES ($1, 'marker', $2)", marker, w.seq.Add(1)); err != nil {
		t.Fatal(err)
	}
	topic := name + ".public." + name
	var recs []loadRecord
	waitFor(t, time.Minute, "the marker row in Kafka", status, out, func() bool {
		recs = readLoad(t, brokers, topic)
		return slices.ContainsFunc(recs, func(r loadRecord) bool { return r.id == marker })
	})
	table := make(map[int64]int64) // id: seq
	dbRows, err := db.Query(ctx, "SELECT id, seq FROM "+name)
	if err != nil {
		t.Fatal(err)
	}
	for dbRows.Next() {
		var id, seq int64
		if err := dbRows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		table[id] = seq
	}
	if dbRows.Err() != nil {
		t.Fatal(dbRows.Err())
	}
	backfilled := checkLoad(t, recs, table, bf.ID)
	t.Logf("%d records, %d rows of backfill %s, %d rows in the table; %d writer transactions, %d while the backfill ran",
		len(recs), backfilled, bf.ID, len(table), w.txns.Load(), during)
}

// loadWriter changes the load test's table: a transaction every few
// milliseconds, an insert, an update or a delete; seq numbers every
// value it writes, increasing.
type loadWriter struct {
	seq, nextID, txns atomic.Int64
	stop              func()
}

// startLoadWriter starts writing to table, which holds ids 1 to rows;
// it stops at stop or at the test's end.
func startLoadWriter(t *testing.T, pg, table string, rows int) *loadWriter {
	t.Helper()
	db, err := pgx.Connect(context.Background(), pg)
	if err != nil {
		t.Fatal(err)
	}
	w := &loadWriter{}
	w.seq.Store(int64(rows))
	w.nextID.Store(int64(rows))
	live := make([]int64, rows)
	for i := range live {
		live[i] = int64(i + 1)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		defer db.Close(context.Background())
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			i := rand.IntN(len(live))
			switch op := rand.IntN(10); {
			case op < 3 || len(live) < 10:
				id := w.nextID.Add(1)
				_, werr = db.Exec(context.Background(), "INSERT INTO "+table+" VALUES ($1, 'i', $2)", id, w.seq.Add(1))
				live = append(live, id)
			case op < 8:
				_, werr = db.Exec(context.Background(), "UPDATE "+table+" SET seq = $2, note = 'u' WHERE id = $1", live[i], w.seq.Add(1))
			default:
				_, werr = db.Exec(context.Background(), "DELETE FROM "+table+" WHERE id = $1", live[i])
				live = slices.Delete(live, i, i+1)
			}
			if werr != nil {
				return
			}
			w.txns.Add(1)
		}
	})
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			if werr != nil {
				t.Errorf("writer: %v", werr)
			}
		})
	}
	t.Cleanup(w.stop)
	return w
}

// loadRecord is one record of the load test's topic.
type loadRecord struct {
	partition int32
	offset    int64
	op        string
	id, seq   int64 // seq 0 for a delete
	runID     string
}

// readLoad reads topic with read_committed, in each partition's order.
func readLoad(t *testing.T, brokers, topic string) []loadRecord {
	t.Helper()
	var out []loadRecord
	for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic) {
		type row struct {
			ID  int64 `json:"id"`
			Seq int64 `json:"seq"`
		}
		var v struct {
			Before, After *row
			RunID         string `json:"backfill_run_id"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %q: %v", r.Value, err)
		}
		rec := loadRecord{partition: r.Partition, offset: r.Offset, op: kafkasinktest.Header(r, kafkasink.HeaderOp), runID: v.RunID}
		switch {
		case v.After != nil:
			rec.id, rec.seq = v.After.ID, v.After.Seq
		case v.Before != nil:
			rec.id = v.Before.ID
		default:
			t.Fatalf("record %q has neither a before nor an after image", r.Value)
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b loadRecord) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
	})
	return out
}

// checkLoad checks recs against table (id: seq) and returns how many
// rows have a record of backfill run.
func checkLoad(t *testing.T, recs []loadRecord, table map[int64]int64, run string) int {
	t.Helper()
	last := make(map[int64]loadRecord)
	// seen is the highest seq of a key's records so far, changed that
	// of its change records: a change may follow a read record of a
	// newer seq (a chunk's snapshot held it before the stream delivered
	// it), never a change of a newer seq.
	seen := make(map[int64]int64)
	changed := make(map[int64]int64)
	reads := make(map[int64]int)
	for _, r := range recs {
		if l, ok := last[r.id]; ok && l.op == "delete" {
			t.Errorf("id %d: a %s record (partition %d offset %d) follows its delete", r.id, r.op, r.partition, r.offset)
		}
		switch {
		case r.op == "read" && r.seq < seen[r.id]:
			t.Errorf("id %d: a read record of seq %d (partition %d offset %d) follows a change to seq %d", r.id, r.seq, r.partition, r.offset, seen[r.id])
		case r.op != "read" && r.op != "delete" && r.seq < changed[r.id]:
			t.Errorf("id %d: a %s record of seq %d (partition %d offset %d) follows a change to seq %d: the stream's order is broken", r.id, r.op, r.seq, r.partition, r.offset, changed[r.id])
		}
		if r.op != "read" {
			changed[r.id] = max(changed[r.id], r.seq)
		}
		if r.op == "read" && r.runID == run {
			reads[r.id]++
		}
		seen[r.id] = max(seen[r.id], r.seq)
		last[r.id] = r
	}
	for id, n := range reads {
		if n > 1 {
			t.Errorf("id %d has %d records of backfill %s, want at most 1", id, n, run)
		}
	}
	for id, seq := range table {
		switch r, ok := last[id]; {
		case !ok:
			t.Errorf("id %d (seq %d) is in the table but has no record", id, seq)
		case r.op == "delete" || r.seq != seq:
			t.Errorf("id %d: the last record is a %s of seq %d, the row has seq %d", id, r.op, r.seq, seq)
		}
	}
	for id, r := range last {
		if _, ok := table[id]; !ok && r.op != "delete" {
			t.Errorf("id %d is not in the table, its last record is a %s", id, r.op)
		}
	}
	return len(reads)
}

package pgcdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// The harness of the tests that run pgcdc against a primary and a
// standby of their own (pgtest.StartPair) and real Kafka: a writer that
// loads whichever server takes writes, a Run with a real exactly-once
// sink, and the check that Kafka, read as a read_committed consumer,
// holds each row of the final primary's table exactly once. The
// workload only inserts, each row with a new id, so the table on the
// server that ends up primary is the truth: a commit the failover lost
// (acknowledged by the old primary, never on the standby) is neither in
// the table nor, rightly, in Kafka.

var (
	pgStandbyDecoding = pgFeature{name: "logical decoding on a standby", since: 16}
	pgFailoverSlots   = pgFeature{name: "failover slots (sync_replication_slots)", since: 17}
)

// pairRun is one test's pair, table, sink and writer.
type pairRun struct {
	t       *testing.T
	pair    *pgtest.Pair
	name    string // the table, slot, publication and topic prefix
	brokers []string
	sink    *kafkasink.Sink
	mon     *Monitor

	mu     sync.Mutex
	target *pgtest.Server // the server the writer writes to
	nextID int64
	acked  int64 // commits the writer saw succeed
	failed int64 // commits that failed or whose outcome is unknown
}

// newPairRun starts a pair with opts, creates the table and the
// publication on the primary, and a sink on the real brokers.
func newPairRun(t *testing.T, opts pgtest.PairOptions) *pairRun {
	t.Helper()
	_, brokers := realEnv(t)
	p := pgtest.StartPair(t, opts)
	pr := &pairRun{t: t, pair: p, brokers: brokers, target: p.Primary, mon: &Monitor{},
		name: fmt.Sprintf("pair_%06d", rand.IntN(1e6))}
	p.Primary.Exec(fmt.Sprintf("CREATE TABLE %[1]s (id bigint PRIMARY KEY, seq bigint NOT NULL, note text); CREATE PUBLICATION %[1]s FOR TABLE %[1]s", pr.name))
	p.WaitReplayed()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafkasink.New(ctx, kafkasink.Config{Brokers: brokers, SinkID: pr.name, Topics: kafkasink.Topics{Prefix: pr.name, Partitions: 3}})
	if err != nil {
		t.Fatalf("kafkasink.New: %v", err)
	}
	t.Cleanup(func() {
		s.Close(context.Background())
		_ = sinktest.DeleteTopics(context.Background(), brokers, pr.name)
	})
	pr.sink = s
	return pr
}

// config is the Config of the test's Run on conn.
func (pr *pairRun) config(conn string) Config {
	return Config{
		ConnString:       conn,
		Slot:             pr.name,
		Publication:      pr.name,
		CreateSlot:       true,
		BatchMaxWait:     20 * time.Millisecond,
		StandbyInterval:  200 * time.Millisecond,
		ReconnectBackoff: 50 * time.Millisecond,
		ReconnectMax:     500 * time.Millisecond,
		Monitor:          pr.mon,
		Logger:           testLogger(pr.t),
	}
}

// waitStreaming waits until Run streams, writing a running-transactions
// record on the primary meanwhile: a slot created on a standby waits for
// one.
func (pr *pairRun) waitStreaming(r *run) {
	pr.t.Helper()
	waitFor(pr.t, 90*time.Second, "Run to stream", r, func() bool {
		if pr.pair.Major >= 16 {
			pr.pair.Primary.Exec("SELECT pg_log_standby_snapshot()")
		}
		time.Sleep(100 * time.Millisecond)
		return pr.mon.Stats().State == RunStreaming
	})
}

// setTarget points the writer at s.
func (pr *pairRun) setTarget(s *pgtest.Server) {
	pr.mu.Lock()
	pr.target = s
	pr.mu.Unlock()
}

// writer inserts rows, one to four a transaction, into the server
// setTarget names until stop closes; a failed commit (the server went
// away) is counted and the writer connects again.
func (pr *pairRun) writer(stop <-chan struct{}) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var db *pgx.Conn
		var at *pgtest.Server
		for {
			select {
			case <-stop:
				if db != nil {
					closeConn(db)
				}
				return
			default:
			}
			pr.mu.Lock()
			target, id := pr.target, pr.nextID
			n := 1 + rand.Int64N(4)
			pr.nextID += n
			pr.mu.Unlock()
			if db == nil || at != target {
				if db != nil {
					closeConn(db)
				}
				db, at = pr.connect(target), target
			}
			err := pr.insert(db, id, n)
			pr.mu.Lock()
			if err != nil {
				pr.failed++
			} else {
				pr.acked++
			}
			pr.mu.Unlock()
			if err != nil {
				if db != nil {
					closeConn(db)
				}
				db = nil
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	return func() { <-done }
}

// connect connects to s, nil when it cannot (the writer tries again).
func (pr *pairRun) connect(s *pgtest.Server) *pgx.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, s.ConnString("kafkasink"))
	if err != nil {
		return nil
	}
	return db
}

// insert inserts rows id to id+n-1 in one transaction.
func (pr *pairRun) insert(db *pgx.Conn, id, n int64) error {
	if db == nil {
		return fmt.Errorf("not connected")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := db.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT g, g * 10, 'x' FROM generate_series($1::bigint, $2::bigint) g", pr.name), id, id+n-1)
	return err
}

// settle stops the writer, writes a last row on the final primary, waits until the sink's
// checkpoint passed it, and returns what the final primary's table holds
// as the changes Kafka must hold.
func (pr *pairRun) settle(r *run, primary *pgtest.Server) []change {
	pr.t.Helper()
	pr.mu.Lock()
	id := pr.nextID
	pr.nextID++
	pr.mu.Unlock()
	marker := primary.Query(fmt.Sprintf("WITH i AS (INSERT INTO %s VALUES (%d, %d, 'last') RETURNING 1) SELECT pg_current_wal_lsn()::text FROM i", pr.name, id, id*10))
	lsn, err := kafkasink.ParseLSN(marker)
	if err != nil {
		pr.t.Fatal(err)
	}
	waitFor(pr.t, 90*time.Second, "the last row in Kafka", r, func() bool {
		return pr.sink.Checkpoint().Position.LSN >= lsn
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := primary.Connect("kafkasink")
	rows, err := db.Query(ctx, "SELECT id, seq FROM "+pr.name+" ORDER BY id")
	if err != nil {
		pr.t.Fatal(err)
	}
	var want []change
	var cid, seq int64
	_, err = pgx.ForEachRow(rows, []any{&cid, &seq}, func() error {
		want = append(want, change{"insert", cid, seq})
		return nil
	})
	if err != nil {
		pr.t.Fatal(err)
	}
	return want
}

// check reads the topic as a read_committed consumer and checks it holds
// each of want exactly once (the rows of an initial snapshot are read
// events: firstInsert is the first id inserted after it), returning the records, lost and duplicated
// counts for the test's report.
func (pr *pairRun) check(want []change, firstInsert int64) (records, lost, duplicated int) {
	pr.t.Helper()
	recs := decodeRecords(pr.t, sinktest.ReadCommitted(pr.t, pr.brokers, pr.name+".public."+pr.name))
	for i := range want {
		if want[i].id < firstInsert {
			want[i].op = "read"
		}
	}
	got := make(map[change]int)
	for _, r := range recs {
		got[r.change()]++
	}
	for _, c := range want {
		switch n := got[c]; {
		case n == 0:
			lost++
		case n > 1:
			duplicated += n - 1
		}
	}
	checkExactlyOnce(pr.t, recs, want)
	return len(recs), lost, duplicated
}

package pgcdc

// BenchmarkReplication measures replication throughput and latency against
// the real PostgreSQL and Kafka of scripts/testenv.sh:
//
//	eval "$(scripts/testenv.sh env)"
//	go test -run '^$' -bench Replication -benchtime 1x -timeout 30m ./pgcdc
//
// Flags: -pgcdc.benchrows (default 200000), -pgcdc.benchrounds (default 3),
// -pgcdc.benchmodes (default all three).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

var (
	benchRows   = flag.Int("pgcdc.benchrows", 200000, "rows BenchmarkReplication inserts per round, in transactions of 100")
	benchRounds = flag.Int("pgcdc.benchrounds", 3, "rounds of BenchmarkReplication; each runs both ceilings and every mode once, in a rotated order")
	benchModes  = flag.String("pgcdc.benchmodes", "exactly-once,idempotent,plain", "comma-separated modes BenchmarkReplication measures against the ceiling")
)

// benchResult is one measured run.
type benchResult struct {
	kind     string
	round    int
	rate     float64 // events per second
	p50, p99 time.Duration
	samples  int // latency samples
}

// BenchmarkReplication streams the same slot contents (rows inserted in
// transactions of 100 before streaming starts, so it measures replication,
// not the workload) with (a) read-and-discard pglogrepl loops (the
// ceiling): StartReplication, ReceiveMessage, ParseV2 or not, standby
// updates; and (b)
// pgcdc.Run into Kafka in each mode with default batching. Each round gives
// every kind its own slot created before the rows were inserted, and
// rotates the order, so a kind is not always first on a cold cache.
//
// After its throughput run, each pgcdc run measures latency from commit to
// visible: with the slot caught up, a workload commits small transactions
// at a steady rate, and a read_committed consumer timestamps each record on
// arrival against the commit time in the record (PostgreSQL's commit
// timestamp; same host, same clock).
//
// The whole measurement runs once whatever b.N is; run it with -benchtime
// 1x. It reports medians over rounds as metrics and logs every run.
func BenchmarkReplication(b *testing.B) {
	pg, brokers := realEnv(b)
	rows, rounds := *benchRows, *benchRounds
	// What one round measures: the ceiling, two read-and-discard
	// pglogrepl loops, and pgcdc into Kafka in each mode.
	benchKinds := append([]string{"ceiling", "ceiling-bare"}, strings.Split(*benchModes, ",")...)
	ctx := context.Background()
	name := fmt.Sprintf("pgcdc_bench_%06d", rand.IntN(1e6))
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close(ctx)
	var slots []string
	b.Cleanup(func() { benchCleanup(pg, brokers, name, &slots) })
	mustExec := func(sql string, args ...any) {
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	mustExec("CREATE TABLE " + name + " (id bigint PRIMARY KEY, seq bigint NOT NULL, amount numeric(12,2), note text, created timestamptz NOT NULL DEFAULT now())")
	mustExec("CREATE PUBLICATION " + name + " FOR TABLE " + name)

	var results []benchResult
	nextID := int64(0)
	for round := 1; round <= rounds; round++ {
		order := slices.Clone(benchKinds)
		rotate := (round - 1) % len(order)
		order = append(order[rotate:], order[:rotate]...)
		// One slot per kind, all created before the rows: each holds
		// exactly the same changes.
		roundSlots := map[string]string{}
		for _, kind := range order {
			slot := fmt.Sprintf("%s_r%d_%s", name, round, strings.ReplaceAll(kind, "-", "_"))
			mustExec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot)
			slots = append(slots, slot)
			roundSlots[kind] = slot
		}
		genStart := time.Now()
		for i := 0; i < rows; i += 100 {
			n := min(100, rows-i)
			mustExec("INSERT INTO "+name+" (id, seq, amount, note) SELECT $1::bigint + g, g, g * 1.25, repeat('x', 64) FROM generate_series(1, $2::int) g", nextID, n)
			nextID += int64(n)
		}
		// Progress goes to stderr: the benchmark's own log is cut at ten
		// lines, which the summary needs.
		fmt.Fprintf(os.Stderr, "round %d: %d rows inserted in %v; order %v\n", round, rows, time.Since(genStart).Round(time.Millisecond), order)

		for _, kind := range order {
			var r benchResult
			if isCeiling(kind) {
				r = benchCeiling(b, pg, roundSlots[kind], name, rows, kind == "ceiling-bare")
			} else {
				r = benchPgcdc(b, pg, brokers, roundSlots[kind], name, kind, rows, &nextID)
			}
			r.kind, r.round = kind, round
			results = append(results, r)
			if isCeiling(kind) {
				fmt.Fprintf(os.Stderr, "round %d %-12s %8.0f events/s\n", round, kind, r.rate)
			} else {
				fmt.Fprintf(os.Stderr, "round %d %-12s %8.0f events/s  latency p50 %v p99 %v (%d records)\n", round, kind, r.rate, r.p50, r.p99, r.samples)
			}
			// The slot has served its run; dropping it now keeps the
			// shared server's slot count low for other tests.
			sinktest.DropSlot(ctx, db, roundSlots[kind])
		}
	}

	// Ratios per round (same round, same slot contents) against the
	// faster of the two ceilings, then medians.
	ceiling := map[int]float64{}
	for _, r := range results {
		if isCeiling(r.kind) {
			ceiling[r.round] = max(ceiling[r.round], r.rate)
		}
	}
	summary := []string{fmt.Sprintf("%d rounds of %d rows:", rounds, rows)}
	for _, kind := range benchKinds {
		var rates, ratios []float64
		var p50s, p99s []time.Duration
		for _, r := range results {
			if r.kind != kind {
				continue
			}
			rates = append(rates, r.rate)
			ratios = append(ratios, r.rate/ceiling[r.round])
			p50s = append(p50s, r.p50)
			p99s = append(p99s, r.p99)
		}
		metric := strings.ReplaceAll(kind, "-", "")
		b.ReportMetric(median(rates), metric+"-events/s")
		line := fmt.Sprintf("%-12s median %8.0f events/s (runs %v)", kind, median(rates), roundAll(rates))
		if !isCeiling(kind) {
			b.ReportMetric(median(ratios), metric+"-ratio")
			b.ReportMetric(float64(median(p50s).Microseconds())/1000, metric+"-p50-ms")
			b.ReportMetric(float64(median(p99s).Microseconds())/1000, metric+"-p99-ms")
			line += fmt.Sprintf(", %.2fx the ceiling (runs %v), latency p50 %v (runs %v) p99 %v (runs %v)",
				median(ratios), roundAll(ratios), median(p50s).Round(100*time.Microsecond), roundDur(p50s), median(p99s).Round(100*time.Microsecond), roundDur(p99s))
		}
		summary = append(summary, line)
	}
	b.Log(strings.Join(summary, "\n"))
}

func median[T float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func roundDur(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond).String()
	}
	return out
}

func roundAll(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		if x < 10 {
			out[i] = fmt.Sprintf("%.2f", x)
		} else {
			out[i] = fmt.Sprintf("%.0f", x)
		}
	}
	return out
}

func isCeiling(kind string) bool { return strings.HasPrefix(kind, "ceiling") }

// benchCeiling reads the slot with nothing but pglogrepl and counts the
// inserts of table until rows, answering keepalives and sending standby
// status as any client must; it decodes messages (ParseV2) but does nothing
// with them, as pglogrepl's example loop does.
//
// bare does even less: no decoding, only each message's type byte, and
// reads without a context (pgconn watches a context per call). It is not
// always faster: a reader that keeps the socket empty wakes for every
// message the server sends, while a busier one finds many waiting. Each
// round measures both, and ratios are against the faster.
func benchCeiling(b *testing.B, pg, slot, table string, rows int, bare bool) benchResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg := Config{ConnString: pg}
	rc, err := cfg.replicationConfig(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	conn, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	// The same plugin options as pgcdc, so the server does the same work.
	args := []string{"proto_version '2'", "publication_names '" + table + "'", "messages 'true'", "streaming 'on'"}
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args}); err != nil {
		b.Fatal(err)
	}
	var (
		inserts  int
		inStream bool
		pos      pglogrepl.LSN
		status   = time.Now()
	)
	readCtx := ctx
	if bare {
		readCtx = context.Background()
		conn.Conn().SetReadDeadline(time.Now().Add(10 * time.Minute))
	}
	for inserts < rows {
		if time.Since(status) > 10*time.Second {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos}); err != nil {
				b.Fatal(err)
			}
			status = time.Now()
		}
		msg, err := conn.ReceiveMessage(readCtx)
		if err != nil {
			b.Fatalf("ceiling: receiving after %d inserts: %v", inserts, err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			if er, ok := msg.(*pgproto3.ErrorResponse); ok {
				b.Fatalf("ceiling: %v", pgconn.ErrorResponseToPgError(er))
			}
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				b.Fatal(err)
			}
			if k.ReplyRequested {
				if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos}); err != nil {
					b.Fatal(err)
				}
				status = time.Now()
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				b.Fatal(err)
			}
			if bare {
				if len(x.WALData) > 0 && pglogrepl.MessageType(x.WALData[0]) == pglogrepl.MessageTypeInsert {
					inserts++
				}
				pos = x.WALStart
				continue
			}
			m, err := pglogrepl.ParseV2(x.WALData, inStream)
			if err != nil {
				b.Fatal(err)
			}
			switch m.(type) {
			case *pglogrepl.InsertMessageV2:
				inserts++
			case *pglogrepl.StreamStartMessageV2:
				inStream = true
			case *pglogrepl.StreamStopMessageV2:
				inStream = false
			}
			pos = x.WALStart
		}
	}
	return benchResult{rate: float64(inserts) / time.Since(start).Seconds()}
}

// countSink counts the events of successful Writes and notes when it
// reached a target.
type countSink struct {
	Sink
	events  atomic.Int64
	target  int64
	reached chan struct{}
	once    sync.Once
}

func (s *countSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if err := s.Sink.Write(ctx, b); err != nil {
		return err
	}
	if s.events.Add(int64(len(b.Events))) >= s.target {
		s.once.Do(func() { close(s.reached) })
	}
	return nil
}

// benchPgcdc runs pgcdc.Run from slot into Kafka in mode until it wrote
// rows events, then measures commit-to-visible latency.
func benchPgcdc(b *testing.B, pg string, brokers []string, slot, table, mode string, rows int, nextID *int64) benchResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m, err := kafkasink.ParseMode(mode)
	if err != nil {
		b.Fatal(err)
	}
	// The topic exists before timing starts, like the checkpoint topic
	// New sets up: creating topics is not replication.
	prefix := slot
	topic := prefix + ".public." + table
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		b.Fatalf("creating %s: %v", topic, err)
	}
	inner, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers: brokers,
		SinkID:  slot,
		Mode:    m,
		Topics:  kafkasink.Topics{Prefix: prefix, Partitions: 3},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer inner.Close(context.Background())
	sink := &countSink{Sink: inner, target: int64(rows), reached: make(chan struct{})}

	rctx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	start := time.Now()
	go func() {
		runErr <- Run(rctx, Config{ConnString: pg, Slot: slot, Publication: table}, sink)
	}()
	select {
	case <-sink.reached:
	case err := <-runErr:
		b.Fatalf("%s: Run returned %v after %d events", mode, err, sink.events.Load())
	}
	res := benchResult{rate: float64(sink.events.Load()) / time.Since(start).Seconds()}

	// Latency, with the slot caught up: everything before now is written
	// once the slot confirmed the current WAL position.
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close(context.Background())
	var now string
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&now); err != nil {
		b.Fatal(err)
	}
	want, _ := kafkasink.ParseLSN(now)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		c, err := slotConfirmed(ctx, db, slot)
		if err != nil {
			b.Fatal(err)
		}
		if c >= want {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: slot at %s did not reach %s", mode, c, want)
		}
	}
	res.p50, res.p99, res.samples = measureLatency(b, ctx, db, brokers, topic, table, nextID)
	stop()
	if err := <-runErr; err != context.Canceled {
		b.Fatalf("%s: Run: %v", mode, err)
	}
	kadm.NewClient(adm).DeleteTopics(context.Background(), topic)
	return res
}

// measureLatency commits 200 transactions of 5 rows, about 40 a second,
// while a read_committed consumer of topic timestamps every record on
// arrival; latency is arrival minus the commit time in the record. Only
// records committed after the measurement began count.
func measureLatency(b *testing.B, ctx context.Context, db *pgx.Conn, brokers []string, topic, table string, nextID *int64) (p50, p99 time.Duration, n int) {
	// Start at the current ends, read before the first live commit, so
	// the consumer misses nothing and reads nothing old.
	acl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	ends, err := kadm.NewClient(acl).ListEndOffsets(ctx, topic)
	acl.Close()
	if err != nil {
		b.Fatal(err)
	}
	starts := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) { starts[topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(starts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	began := time.Now()
	const txns, perTxn = 200, 5
	var lat []time.Duration
	var mu sync.Mutex
	done := make(chan struct{})
	cctx, stopConsumer := context.WithCancel(ctx)
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			fetches := cl.PollFetches(cctx)
			arrived := time.Now()
			fetches.EachRecord(func(r *kgo.Record) {
				var v struct {
					Commit time.Time `json:"commit_time"`
				}
				if json.Unmarshal(r.Value, &v) != nil || v.Commit.Before(began) {
					return
				}
				mu.Lock()
				lat = append(lat, arrived.Sub(v.Commit))
				mu.Unlock()
			})
		}
	}()
	tick := time.NewTicker(25 * time.Millisecond)
	for range txns {
		<-tick.C
		if _, err := db.Exec(ctx, "INSERT INTO "+table+" (id, seq, amount, note) SELECT $1::bigint + g, g, 1, 'live' FROM generate_series(1, $2::int) g", *nextID, perTxn); err != nil {
			b.Fatal(err)
		}
		*nextID += perTxn
	}
	tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= txns*perTxn {
			break
		}
	}
	stopConsumer()
	<-done
	if len(lat) < txns*perTxn {
		b.Fatalf("latency: %d of %d records arrived", len(lat), txns*perTxn)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], len(lat)
}

func benchCleanup(pg string, brokers []string, name string, slots *[]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		return
	}
	defer db.Close(ctx)
	for _, s := range *slots {
		sinktest.DropSlot(ctx, db, s)
	}
	db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name)
	db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	sinktest.DeleteTopics(ctx, brokers, name)
}

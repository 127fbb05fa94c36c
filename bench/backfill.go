package main

// The -backfill mode (issue 26): the throughput of a backfill
// (pgcdc.Backfills), with the stream idle and under a steady write load,
// as a ratio to the initial snapshot of the same table in the same run.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

var (
	backfillMode = flag.Bool("backfill", false, "measure a pgcdc backfill's throughput, idle and under -backfill-load, against the initial snapshot of the same table (see README.md)")
	backfillRows = flag.Int("backfill-rows", 100000, "-backfill: rows of the table")
	backfillLoad = flag.Int("backfill-load", 2000, "-backfill: rows a second the writer updates during the loaded backfill, in transactions of 10")
)

// bfPhase is what one phase of a round measured: rows read (snapshot or
// backfill records), the changes the stream delivered meanwhile, and the
// time from its start to the Write of its last read record.
type bfPhase struct {
	reads, changes int64
	seconds        float64
}

func (p bfPhase) rate() float64 { return float64(p.reads) / p.seconds }

// bfRound is one round: the initial snapshot, the backfill with the
// stream idle, and the backfill under load.
type bfRound struct{ snapshot, idle, loaded bfPhase }

// timedSink counts what Run writes and notes when the last Write with
// read records returned, and whether it ended every backfill: its cursor
// records none unfinished (Run's cursor names them under "backfills").
type timedSink struct {
	*kafkasink.Sink
	mu       sync.Mutex
	reads    int64
	changes  int64
	lastRead time.Time
	finished bool
}

func (s *timedSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if err := s.Sink.Write(ctx, b); err != nil {
		return err
	}
	now := time.Now()
	// Once a Write, not once a row: the search through the cursor for
	// every row was 7% of a snapshot child's CPU, counted as the sink's.
	finished := !bytes.Contains(b.Cursor, []byte(`"backfills"`))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.Events {
		if b.Events[i].Op == kafkasink.OpRead {
			s.reads++
			s.lastRead = now
			s.finished = finished
		} else {
			s.changes++
		}
	}
	return nil
}

// take returns the counts since the last take and the time of the last
// read record's Write, and starts counting anew.
func (s *timedSink) take() (reads, changes int64, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reads, changes, last = s.reads, s.changes, s.lastRead
	s.reads, s.changes, s.finished = 0, 0, false
	return reads, changes, last
}

func (s *timedSink) readsSoFar() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// backfilled reports whether a Write since the last take wrote a
// backfill's last chunk.
func (s *timedSink) backfilled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}

// backfillFlagsUnused refuses the flags of the -backfill mode without it.
func backfillFlagsUnused() error {
	var set []string
	flag.Visit(func(fl *flag.Flag) {
		if fl.Name == "backfill-rows" || fl.Name == "backfill-load" {
			set = append(set, "-"+fl.Name)
		}
	})
	if len(set) > 0 {
		return fmt.Errorf("%s: only for -backfill; add -backfill, or drop them", strings.Join(set, ", "))
	}
	return nil
}

// backfillMain runs the -backfill mode.
func backfillMain(f sharedFlags) error {
	set := map[string]bool{}
	flag.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, name := range []string{"batches", "events", "only", "headers", "txn-rows", "table-rows", "soak", "soak-every", "latency", "latency-rate", "pgcdc"} {
		if set[name] {
			return fmt.Errorf("-%s does not apply to -backfill; drop the flag", name)
		}
	}
	if *pgConn == "" || f.brokers == "" {
		return errors.New("-backfill needs PostgreSQL and Kafka: pass -pg and -brokers, or load the integration environment with eval \"$(scripts/testenv.sh env)\"")
	}
	sizes, err := ints("-sizes", f.sizes)
	if err != nil {
		return err
	}
	if !set["sizes"] {
		sizes = sizes[:1]
	}
	if *backfillRows < 1 || *backfillLoad < 0 || f.rounds < 1 || len(sizes) != 1 {
		return fmt.Errorf("-backfill-rows %d, -backfill-load %d, -rounds %d, -sizes %s: want at least one row, a load of 0 or more, a round, one size",
			*backfillRows, *backfillLoad, f.rounds, f.sizes)
	}
	cfg := pgConfig{conn: *pgConn, brokers: strings.Split(f.brokers, ","), partitions: int32(f.partitions), compression: f.compression}
	ctx := context.Background()
	e, err := openPGEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.createTable(ctx); err != nil {
		return err
	}
	rows := int64(*backfillRows)
	for from := int64(1); from <= rows; from += 10000 {
		if err := e.insertRows(ctx, from, min(from+9999, rows), sizes[0]); err != nil {
			return err
		}
	}
	if _, err := e.db.Exec(ctx, "ANALYZE "+e.name); err != nil {
		return err
	}
	var rounds []bfRound
	for i := range f.rounds {
		r, err := e.backfillRound(ctx, i, rows, sizes[0], *backfillLoad)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		fmt.Fprintf(os.Stderr, "round %d: snapshot %.0f rows/s; backfill idle %.0f rows/s, loaded %.0f rows/s (%d rows, %d changes meanwhile)\n",
			i+1, r.snapshot.rate(), r.idle.rate(), r.loaded.rate(), r.loaded.reads, r.loaded.changes)
		rounds = append(rounds, r)
	}
	fmt.Print(backfillTable(rows, sizes[0], *backfillLoad, rounds))
	return nil
}

// backfillRound runs Run on a new slot: its initial snapshot of the
// table, then a backfill of it with the stream idle, then one while a
// writer updates load rows a second. Each phase ends with the
// Write of its last read record; the topic must then hold every record
// Run wrote, once.
func (e *pgEnv) backfillRound(ctx context.Context, round int, rows int64, size, load int) (bfRound, error) {
	e.n++
	slot := fmt.Sprintf("%s_%d", e.name, e.n)
	topic := fmt.Sprintf("%s%d", e.topics, e.n)
	if err := createTopic(ctx, e.admin, topic, e.cfg.partitions, e.rf, nil); err != nil {
		return bfRound{}, err
	}
	sink, err := e.backfillSink(ctx, topic)
	if err != nil {
		return bfRound{}, err
	}
	defer sink.Close(context.Background())
	w := &timedSink{Sink: sink}
	ctrl, mon := &pgcdc.Backfills{}, &pgcdc.Monitor{}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() {
		runErr <- pgcdc.Run(rctx, pgcdc.Config{ConnString: e.cfg.conn, Slot: slot, CreateSlot: true, Publication: e.name,
			Tables: []string{"public." + e.name}, Snapshot: true, Backfills: ctrl, Monitor: mon}, w)
	}()
	defer e.dropSlots(context.Background(), slotNamed, slot)
	wait := func(what string, done func() bool) error {
		for !done() {
			select {
			case err := <-runErr:
				return fmt.Errorf("pgcdc.Run returned while waiting for %s: %w", what, err)
			case <-time.After(2 * time.Millisecond):
			}
		}
		return nil
	}
	phase := func(start time.Time) bfPhase {
		reads, changes, last := w.take()
		return bfPhase{reads: reads, changes: changes, seconds: last.Sub(start).Seconds()}
	}
	var r bfRound
	// The snapshot's clock starts when Run begins to read (the slot
	// created and its snapshot exported), as a backfill's starts with
	// its request; polled, so up to a few milliseconds late.
	var began time.Time
	if err := wait("the initial snapshot", func() bool {
		st := mon.Stats().State
		if began.IsZero() && st == pgcdc.RunSnapshotting {
			began = time.Now()
		}
		return w.readsSoFar() >= rows && st == pgcdc.RunStreaming
	}); err != nil {
		return r, err
	}
	if began.IsZero() {
		return r, errors.New("Run was never seen reading its initial snapshot")
	}
	r.snapshot = phase(began)
	backfill := func() (bfPhase, error) {
		start := time.Now()
		if _, err := ctrl.Request(ctx, pgcdc.BackfillRequest{Table: "public." + e.name}); err != nil {
			return bfPhase{}, err
		}
		if err := wait("the backfill", w.backfilled); err != nil {
			return bfPhase{}, err
		}
		return phase(start), nil
	}
	if r.idle, err = backfill(); err != nil {
		return r, err
	}
	var written int64
	if r.loaded, written, err = e.underLoad(ctx, round, rows, size, load, backfill); err != nil {
		return r, err
	}
	if err := r.checkReads(rows); err != nil {
		return r, err
	}
	// Every change written meanwhile must arrive before the topic is
	// counted: wait until the stream has delivered them.
	if err := wait("the load's changes", func() bool {
		_, changes, _ := w.take()
		r.loaded.changes += changes
		return r.loaded.changes >= written
	}); err != nil {
		return r, err
	}
	stop()
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		return r, fmt.Errorf("pgcdc.Run: %w", err)
	}
	n, err := countCommitted(ctx, e.admin, e.cfg.brokers, topic)
	if err != nil {
		return r, err
	}
	if want := 2*rows + r.loaded.reads + r.loaded.changes; n != want {
		return r, fmt.Errorf("topic %s holds %d records read_committed, want %d: what Run wrote, once", topic, n, want)
	}
	return r, nil
}

// underLoad runs backfill while writeLoad updates the table, and returns
// its phase and the rows the load updated.
func (e *pgEnv) underLoad(ctx context.Context, round int, rows int64, size, load int, backfill func() (bfPhase, error)) (bfPhase, int64, error) {
	lctx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	var written atomic.Int64
	loadErr, started := make(chan error, 1), make(chan struct{})
	go func() { loadErr <- e.writeLoad(lctx, round, rows, size, load, &written, started) }()
	select {
	case <-started: // the load is on before the backfill begins
	case err := <-loadErr:
		return bfPhase{}, 0, fmt.Errorf("the writer: %w", err)
	}
	ph, err := backfill()
	cancelLoad()
	if lerr := <-loadErr; !errors.Is(lerr, context.Canceled) && err == nil {
		err = fmt.Errorf("the writer: %w", lerr)
	}
	return ph, written.Load(), err
}

// backfillSink is the exactly-once sink of a round, writing the table to
// topic.
func (e *pgEnv) backfillSink(ctx context.Context, topic string) (*kafkasink.Sink, error) {
	codec, err := kafkasink.ParseCompression(e.cfg.compression)
	if err != nil {
		return nil, err
	}
	return kafkasink.New(ctx, kafkasink.Config{
		Brokers: e.cfg.brokers, SinkID: topic, CheckpointTopic: topic + "-checkpoint",
		Topics:        kafkasink.Topics{Routes: map[string]string{"public." + e.name: topic}, MustExist: true},
		ClientOptions: []kgo.Opt{kgo.ProducerBatchCompression(codec)},
	})
}

// checkReads checks the read records of a round of a table of rows: all
// of them in the snapshot and the idle backfill, at most all of them in
// the loaded one.
func (r bfRound) checkReads(rows int64) error {
	if r.snapshot.reads != rows || r.idle.reads != rows || r.loaded.reads > rows || r.loaded.reads == 0 {
		return fmt.Errorf("read records: snapshot %d, idle backfill %d, loaded backfill %d; want %d, %d and at most %d (the rows a change touched in a chunk's window are dropped)",
			r.snapshot.reads, r.idle.reads, r.loaded.reads, rows, rows, rows)
	}
	return nil
}

// writeLoad updates random rows of the table, load a second in
// transactions of 10, on a connection of its own, until ctx ends, and
// counts the rows it updated in written; it closes started after its
// first transaction (at once without a load).
func (e *pgEnv) writeLoad(ctx context.Context, round int, rows int64, size, load int, written *atomic.Int64, started chan<- struct{}) error {
	if load == 0 {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	db, err := pgx.Connect(ctx, e.cfg.conn)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	rng := rand.New(rand.NewPCG(uint64(round), 26))
	every := time.Second * 10 / time.Duration(load)
	tick := time.NewTicker(every)
	defer tick.Stop()
	sql := "UPDATE " + e.name + " SET version = version + 1, updated_at = now(), note = " + randomNote(noteLength(size)) + " WHERE id = ANY ($1)"
	ids := make([]int64, 10)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for i := range ids {
			ids[i] = 1 + rng.Int64N(rows)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		tag, err := db.Exec(ctx, sql, ids)
		if err != nil {
			return err
		}
		written.Add(tag.RowsAffected())
		if started != nil {
			close(started)
			started = nil
		}
		ids = ids[:10]
	}
}

// backfillTable prints each round and the medians of the ratios.
func backfillTable(rows int64, size, load int, rounds []bfRound) string {
	var b strings.Builder
	fmt.Fprintf(&b, "backfill of a table of %d rows of about %d bytes (-backfill-load %d rows/s), rows/s:\n\n", rows, size, load)
	fmt.Fprintf(&b, "| round | initial snapshot | backfill, idle | backfill, loaded | idle / snapshot | loaded / snapshot | rows read, loaded | changes meanwhile |\n")
	fmt.Fprintf(&b, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var idle, loaded []float64
	for i, r := range rounds {
		idle = append(idle, r.idle.rate()/r.snapshot.rate())
		loaded = append(loaded, r.loaded.rate()/r.snapshot.rate())
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.0f | %.2f | %.2f | %d | %d |\n", i+1, r.snapshot.rate(), r.idle.rate(), r.loaded.rate(),
			idle[i], loaded[i], r.loaded.reads, r.loaded.changes)
	}
	fmt.Fprintf(&b, "\nmedian ratio to the initial snapshot: idle %.2f, loaded %.2f\n", median(idle), median(loaded))
	return b.String()
}

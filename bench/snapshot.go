package main

// The -snapshot mode (issue 31): the initial snapshot's throughput with
// 1, 2 and 4 workers (pgcdc.Config.SnapshotWorkers), each in a child
// process of its own (its peak RSS is its own), against COPY of the same
// table into a discarding reader on one connection in the same round:
// the ceiling per connection.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink/pgcdc"
)

var (
	snapshotMode      = flag.Bool("snapshot", false, "measure the initial snapshot with -snapshot-workers workers against COPY of the table into a discarding reader (see README.md)")
	snapshotRows      = flag.Int("snapshot-rows", 1000000, "-snapshot: rows of the table")
	snapshotWorkers   = flag.String("snapshot-workers", "1,2,4", "-snapshot: worker counts to measure, comma separated")
	snapshotDebezium  = flag.Bool("snapshot-debezium", false, "-snapshot: also run Debezium 3.6.1's initial snapshot of the table each round (needs Java 17+ and Maven, see README.md)")
	snapshotChunkRows = flag.Int("snapshot-chunk-rows", 0, "-snapshot: pgcdc.Config.SnapshotChunkRows (default: pgcdc's, 10000)")
	snapshotProfile   = flag.String("snapshot-profile", "", "-snapshot: directory for a CPU profile of each run's child process")
	snapshotChild     = flag.String("snapshot-child", "", "") // hidden: run one snapshot in this process
)

// snapSpec is one snapshot run, as the child takes it.
type snapSpec struct {
	Conn, Table, Slot, Topic string
	Brokers                  []string
	Compression              string
	Workers                  int
	Rows                     int64
	Profile                  string // CPU profile file of the run; empty: none
	ChunkRows                int    // pgcdc.Config.SnapshotChunkRows; 0: its default
}

// snapResult is what one run measured: the time from Run's start of
// reading to the Write of the last row, the CPU time the child used over
// the same span (user and system, all its threads), the rows written,
// and the child's peak RSS.
type snapResult struct {
	Seconds    float64
	CPUSeconds float64
	Rows       int64
	RSS        int64
}

// snapRound is one round: COPY, then the ceiling into Kafka, then each
// worker count (runs; procs holds each child's whole process), then
// Debezium with -snapshot-debezium.
type snapRound struct {
	copySeconds float64
	copyBytes   int64
	ceiling     ceilingResult
	runs        map[int]snapResult
	procs       map[int]procResult
	debezium    *procResult
}

// snapshotMain runs the -snapshot mode.
func snapshotMain(f sharedFlags) error {
	if *pgConn == "" || f.brokers == "" {
		return errors.New("-snapshot needs PostgreSQL and Kafka: pass -pg and -brokers, or load the integration environment with eval \"$(scripts/testenv.sh env)\"")
	}
	sizes, err := ints("-sizes", f.sizes)
	if err != nil {
		return err
	}
	workers, err := ints("-snapshot-workers", *snapshotWorkers)
	if err != nil {
		return err
	}
	if *snapshotProfile != "" {
		if err := os.MkdirAll(*snapshotProfile, 0o755); err != nil {
			return err
		}
	}
	if *snapshotRows < 1 || f.rounds < 1 {
		return fmt.Errorf("-snapshot-rows %d, -rounds %d: want at least one of each", *snapshotRows, f.rounds)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := pgConfig{conn: *pgConn, brokers: strings.Split(f.brokers, ","), partitions: int32(f.partitions), compression: f.compression}
	// An interrupt ends the children (exec.CommandContext kills them) and
	// then drops this invocation's table, slots and topics (e.close), as
	// -pgcdc does: on a shared server they must not be left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := openPGEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.close()
	var dbz *debeziumHarness
	if *snapshotDebezium {
		if dbz, err = buildDebezium(ctx); err != nil {
			return err
		}
	}
	rows := int64(*snapshotRows)
	for _, size := range sizes {
		if err := e.fillSnapshotTable(ctx, rows, size); err != nil {
			return err
		}
		var rounds []snapRound
		for i := range f.rounds {
			r, err := e.snapshotRound(ctx, exe, dbz, rows, size, i+1, workers)
			if err != nil {
				return fmt.Errorf("round %d: %w", i+1, err)
			}
			rounds = append(rounds, r)
		}
		fmt.Print(snapshotTable(rows, size, workers, rounds))
		if _, err := e.db.Exec(ctx, "DROP PUBLICATION "+e.name+"; DROP TABLE "+e.name); err != nil {
			return err
		}
	}
	return nil
}

// fillSnapshotTable makes the table of rows rows of about size bytes; of
// 1 KB or more, one row in a hundred has a TOASTed note.
func (e *pgEnv) fillSnapshotTable(ctx context.Context, rows int64, size int) error {
	if err := e.createTable(ctx); err != nil {
		return err
	}
	for from := int64(1); from <= rows; from += 50000 {
		if err := e.insertRows(ctx, from, min(from+49999, rows), size); err != nil {
			return err
		}
	}
	if size >= 1024 {
		// One row in a hundred has a note of 8 KB more, stored out of
		// line (TOAST), as the issue asks of the 1 KB table.
		if _, err := e.db.Exec(ctx, "UPDATE "+e.name+" SET note = note || "+randomNote(8192)+" WHERE id % 100 = 0"); err != nil {
			return err
		}
	}
	_, err := e.db.Exec(ctx, "VACUUM ANALYZE "+e.name)
	return err
}

// snapshotRound copies the table, then snapshots it with each worker
// count, each into a topic of its own that must then hold every row once.
func (e *pgEnv) snapshotRound(ctx context.Context, exe string, dbz *debeziumHarness, rows int64, size, round int, workers []int) (snapRound, error) {
	r := snapRound{runs: map[int]snapResult{}, procs: map[int]procResult{}}
	var err error
	if r.copySeconds, r.copyBytes, err = e.copyDiscard(ctx); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "COPY: %.2fs, %.0f rows/s, %.1f MB/s\n", r.copySeconds, float64(rows)/r.copySeconds, float64(r.copyBytes)/r.copySeconds/1e6)
	if r.ceiling, err = e.ceilingRun(ctx, rows); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "COPY into raw franz-go, exactly once: %.2fs, %.0f rows/s, %.2fx of COPY, %.2f CPU-µs/row\n",
		r.ceiling.Seconds, float64(rows)/r.ceiling.Seconds, r.copySeconds/r.ceiling.Seconds, r.ceiling.CPUSeconds*1e6/float64(rows))
	for _, w := range workers {
		e.n++
		s := snapSpec{Conn: e.cfg.conn, Table: e.name, Slot: fmt.Sprintf("%s_%d", e.name, e.n), Topic: fmt.Sprintf("%s%d", e.topics, e.n),
			Brokers: e.cfg.brokers, Compression: e.cfg.compression, Workers: w, Rows: rows, ChunkRows: *snapshotChunkRows}
		if *snapshotProfile != "" {
			s.Profile = fmt.Sprintf("%s/snapshot-%dB-w%d-r%d.cpu.pprof", *snapshotProfile, size, w, round)
		}
		if err := createTopic(ctx, e.admin, s.Topic, e.cfg.partitions, e.rf, nil); err != nil {
			return r, err
		}
		res, proc, err := runSnapshotChild(ctx, exe, s)
		e.dropSlots(context.Background(), slotNamed, s.Slot)
		if err != nil {
			return r, err
		}
		n, err := countCommitted(ctx, e.admin, e.cfg.brokers, s.Topic)
		if err != nil {
			return r, err
		}
		if n != rows || res.Rows != rows {
			return r, fmt.Errorf("%d workers: Run wrote %d rows, the topic holds %d read_committed, want %d", w, res.Rows, n, rows)
		}
		fmt.Fprintf(os.Stderr, "%d workers: %.2fs, %.0f rows/s, %.2fx of COPY, %.2fx of the ceiling into Kafka, %.2f CPU-µs/row, peak RSS %d MiB\n",
			w, res.Seconds, float64(rows)/res.Seconds, r.copySeconds/res.Seconds, r.ceiling.Seconds/res.Seconds, res.CPUSeconds*1e6/float64(rows), res.RSS>>20)
		r.runs[w], r.procs[w] = res, proc
	}
	if dbz != nil {
		d, err := e.debeziumSnapshot(ctx, dbz, rows)
		if err != nil {
			return r, err
		}
		fmt.Fprintf(os.Stderr, "Debezium: %.2fs from the engine's start to the last row acknowledged (the process: %.2fs), %.0f rows/s, %.2fx of COPY, peak RSS %d MiB\n",
			d.Snapshot, d.Seconds, float64(rows)/d.Snapshot, r.copySeconds/d.Snapshot, d.RSS>>20)
		r.debezium = &d
	}
	return r, nil
}

// ceilingRun runs copyToKafka into topics of its own, and checks that
// the topic then holds every row once, read_committed.
func (e *pgEnv) ceilingRun(ctx context.Context, rows int64) (ceilingResult, error) {
	e.n++
	topic := fmt.Sprintf("%s%d", e.topics, e.n)
	if err := createTopic(ctx, e.admin, topic, e.cfg.partitions, e.rf, nil); err != nil {
		return ceilingResult{}, err
	}
	if err := createTopic(ctx, e.admin, topic+"-checkpoint", 1, e.rf, nil); err != nil {
		return ceilingResult{}, err
	}
	res, err := e.copyToKafka(ctx, topic, *snapshotChunkRows)
	if err != nil {
		return res, fmt.Errorf("COPY into raw franz-go: %w", err)
	}
	n, err := countCommitted(ctx, e.admin, e.cfg.brokers, topic)
	if err != nil {
		return res, err
	}
	if n != rows || res.Rows != rows {
		return res, fmt.Errorf("COPY into raw franz-go wrote %d rows, the topic holds %d read_committed, want %d", res.Rows, n, rows)
	}
	return res, nil
}

// copyDiscard runs COPY (SELECT * FROM table) TO STDOUT on one connection
// into a reader that discards it, and returns its time and bytes.
func (e *pgEnv) copyDiscard(ctx context.Context) (float64, int64, error) {
	db, err := pgx.Connect(ctx, e.cfg.conn)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close(context.Background())
	var sink countingDiscard
	start := time.Now()
	if _, err := db.PgConn().CopyTo(ctx, &sink, "COPY (SELECT * FROM "+e.name+") TO STDOUT"); err != nil {
		return 0, 0, err
	}
	return time.Since(start).Seconds(), int64(sink), nil
}

// countingDiscard discards what is written to it, counting the bytes.
type countingDiscard int64

func (c *countingDiscard) Write(p []byte) (int, error) {
	*c += countingDiscard(len(p))
	return len(p), nil
}

// runSnapshotChild runs s in a child process of exe, and returns what
// the child measured and the measure of the whole process.
func runSnapshotChild(ctx context.Context, exe string, s snapSpec) (snapResult, procResult, error) {
	js, _ := json.Marshal(s)
	cmd := exec.CommandContext(ctx, exe, "-snapshot-child="+string(js))
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	proc, err := runProcess(cmd)
	if err != nil {
		return snapResult{}, proc, fmt.Errorf("%d workers: child process: %w", s.Workers, err)
	}
	var r snapResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return snapResult{}, proc, fmt.Errorf("%d workers: child printed %q: %w", s.Workers, out.Bytes(), err)
	}
	return r, proc, nil
}

// runSnapshotSpec runs the spec in js in this process and prints its
// result.
func runSnapshotSpec(js string) int {
	var s snapSpec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		fmt.Fprintln(os.Stderr, "bench -snapshot-child:", err)
		return 2
	}
	r, err := s.run(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench -snapshot-child: %d workers: %v\n", s.Workers, err)
		return 1
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	return 0
}

// run takes the snapshot: Run on a new slot until the table's every row
// is written, timed from Run's state turning to snapshotting.
func (s snapSpec) run(ctx context.Context) (snapResult, error) {
	e := &pgEnv{cfg: pgConfig{brokers: s.Brokers, compression: s.Compression}, name: s.Table}
	sink, err := e.backfillSink(ctx, s.Topic)
	if err != nil {
		return snapResult{}, err
	}
	defer sink.Close(context.Background())
	if s.Profile != "" {
		f, err := os.Create(s.Profile)
		if err != nil {
			return snapResult{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return snapResult{}, err
		}
		defer pprof.StopCPUProfile()
	}
	w := &timedSink{Sink: sink}
	mon := &pgcdc.Monitor{}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() {
		runErr <- pgcdc.Run(rctx, pgcdc.Config{ConnString: s.Conn, Slot: s.Slot, CreateSlot: true, Publication: s.Table,
			Tables: []string{"public." + s.Table}, Snapshot: true, SnapshotWorkers: s.Workers, SnapshotChunkRows: s.ChunkRows, Monitor: mon}, w)
	}()
	var began time.Time
	var cpuBegan float64
	for w.readsSoFar() < s.Rows || mon.Stats().State != pgcdc.RunStreaming {
		if began.IsZero() && mon.Stats().State == pgcdc.RunSnapshotting {
			began, cpuBegan = time.Now(), cpuSeconds()
		}
		select {
		case err := <-runErr:
			return snapResult{}, fmt.Errorf("pgcdc.Run returned during the snapshot: %w", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	reads, _, last := w.take()
	cpu := cpuSeconds() - cpuBegan
	stop()
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		return snapResult{}, fmt.Errorf("pgcdc.Run: %w", err)
	}
	if began.IsZero() {
		return snapResult{}, errors.New("Run was never seen reading its snapshot")
	}
	return snapResult{Seconds: last.Sub(began).Seconds(), CPUSeconds: cpu, Rows: reads, RSS: peakRSS()}, nil
}

// cpuSeconds is the CPU time this process has used, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// snapshotTable prints the medians of the rounds.
func snapshotTable(rows int64, size int, workers []int, rounds []snapRound) string {
	var b strings.Builder
	var copySecs, copyBytes []float64
	for _, r := range rounds {
		copySecs = append(copySecs, r.copySeconds)
		copyBytes = append(copyBytes, float64(r.copyBytes))
	}
	mb := median(copyBytes) / 1e6
	fmt.Fprintf(&b, "initial snapshot of a table of %d rows of about %d bytes (%.0f MB as COPY text), medians of %d rounds:\n\n", rows, size, mb, len(rounds))
	fmt.Fprintf(&b, "| reader | rows/s | MB/s | ÷ COPY | CPU-µs/row | peak RSS MiB |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| COPY (SELECT *) TO STDOUT, discarded | %.0f | %.1f | 1.00 | | |\n", float64(rows)/median(copySecs), mb/median(copySecs))
	var cSecs, cRatio, cCPU []float64
	for _, r := range rounds {
		cSecs = append(cSecs, r.ceiling.Seconds)
		cRatio = append(cRatio, r.copySeconds/r.ceiling.Seconds)
		cCPU = append(cCPU, r.ceiling.CPUSeconds*1e6/float64(rows))
	}
	fmt.Fprintf(&b, "| the same COPY into raw franz-go, a transaction per chunk, rows unencoded (the ceiling into Kafka) | %.0f | %.1f | %.2f | %.2f | |\n",
		float64(rows)/median(cSecs), mb/median(cSecs), median(cRatio), median(cCPU))
	var ofCeiling []string
	for _, w := range workers {
		var secs, ratio, cpu, rss, ceil []float64
		for _, r := range rounds {
			ceil = append(ceil, r.ceiling.Seconds/r.runs[w].Seconds)
			secs = append(secs, r.runs[w].Seconds)
			ratio = append(ratio, r.copySeconds/r.runs[w].Seconds)
			cpu = append(cpu, r.runs[w].CPUSeconds*1e6/float64(rows))
			rss = append(rss, float64(r.runs[w].RSS)/(1<<20))
		}
		fmt.Fprintf(&b, "| pgcdc, %d workers, exactly-once into Kafka | %.0f | %.1f | %.2f | %.2f | %.0f |\n", w, float64(rows)/median(secs), mb/median(secs), median(ratio), median(cpu), median(rss))
		ofCeiling = append(ofCeiling, fmt.Sprintf("%d workers %.2f", w, median(ceil)))
	}
	ceilingLine := fmt.Sprintf("\npgcdc ÷ the ceiling into Kafka: %s\n", strings.Join(ofCeiling, ", "))
	if rounds[0].debezium == nil {
		return b.String() + ceilingLine
	}
	// Debezium is timed from its engine's start (connector start and
	// slot creation included) to the last row acknowledged, since the
	// JVM's process offers no clock for the start of reading; it is
	// compared with pgcdc's child timed as a whole process (Go's start,
	// the sink's, the slot's creation and Run's stop included), which
	// leaves pgcdc more to do in its time than Debezium in its own.
	w := workers[0]
	if slices.Contains(workers, 1) {
		w = 1
	}
	var dSecs, dRatio, dCPU, dRSS, pSecs, vs []float64
	for _, r := range rounds {
		d := r.debezium
		dSecs = append(dSecs, d.Snapshot)
		dRatio = append(dRatio, r.copySeconds/d.Snapshot)
		dCPU = append(dCPU, d.CPUSeconds*1e6/float64(rows))
		dRSS = append(dRSS, float64(d.RSS)/(1<<20))
		pSecs = append(pSecs, r.procs[w].Seconds)
		vs = append(vs, d.Snapshot/r.procs[w].Seconds)
	}
	fmt.Fprintf(&b, "| Debezium 3.6.1 initial snapshot, Embedded Engine, acks=all into Kafka (engine start to last ack; CPU of the whole process) | %.0f | %.1f | %.2f | %.2f | %.0f |\n",
		float64(rows)/median(dSecs), mb/median(dSecs), median(dRatio), median(dCPU), median(dRSS))
	fmt.Fprintf(&b, "\npgcdc with %d workers ÷ Debezium: %.1fx (pgcdc's whole child process against Debezium's engine start to last ack, medians %.2f s against %.2f s; per round %s)\n",
		w, median(vs), median(pSecs), median(dSecs), ratios(vs))
	return b.String() + ceilingLine
}

// ratios prints each round's ratio.
func ratios(x []float64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = fmt.Sprintf("%.1fx", v)
	}
	return strings.Join(s, ", ")
}

package main

// The latency phase of the -pgcdc mode: after a sink contender's
// throughput run, the same contender streams a fresh slot while this
// process commits small transactions at a steady rate, and a
// read_committed consumer of the contender's topic notes when each
// becomes visible.
//
// The phase writes a table of its own, in a publication of its own: the
// slots of the contenders still to run in the round stream the
// workload's publication only, so the phase adds nothing to what they
// consume and verify. A slot made when the phase starts is caught up by
// construction.

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

// liveTxnRows are the rows each transaction of the latency phase inserts.
const liveTxnRows = 5

// liveWait bounds each wait of the phase: for the first transaction to
// become visible (the pipeline starting), and for the last ones after
// the child stopped.
const liveWait = time.Minute

// liveName names the latency phase's table and publication.
func (e *pgEnv) liveName() string { return e.name + "_live" }

// runLatency runs contender c on a fresh slot of the latency table and
// measures commit to visible: a first transaction, waited for, starts
// the pipeline, then cfg.latency transactions of liveTxnRows rows of
// about size bytes are committed at cfg.latencyRate a second. A
// transaction's latency runs from its sending by the writer to the
// arrival of its last row at a read_committed consumer. Every row
// must arrive once and the child must have delivered exactly them.
//
// The clock starts when the writer sends the transaction (one INSERT
// of liveTxnRows rows, committed as it runs), not when its COMMIT
// returns: the walsender may send the commit as soon as it is flushed,
// before the backend answers the writer, and on a busy machine the
// writer learned of its commit later than the pipeline delivered it in
// 4% of the samples. So each sample includes the INSERT and the commit's
// flush, and none is below zero.
func (e *pgEnv) runLatency(ctx context.Context, c pgContender, size int, runOne pgRunner) ([]time.Duration, error) {
	slot, err := e.createSlot(ctx)
	if err != nil {
		return nil, err
	}
	s, err := e.spec(ctx, c, slot, 0)
	defer e.dropRun(ctx, s)
	if err != nil {
		return nil, err
	}
	s.Publication, s.Table, s.Latency = e.liveName(), e.liveName(), true

	txns := e.cfg.latency + 1 // the first starts the pipeline
	first := e.liveNext + 1
	e.liveNext += int64(txns * liveTxnRows)
	reader, err := startLiveReader(e.cfg.brokers, s.Topic, first, txns)
	if err != nil {
		return nil, err
	}
	defer reader.close()

	// An OS pipe, as the soak's: the end mark is one short line, which
	// the pipe's buffer takes even when the child has already failed.
	markR, markW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer markR.Close()
	defer markW.Close()
	var (
		res    pgResult
		runErr error
		exited = make(chan struct{})
	)
	go func() {
		defer close(exited)
		res, runErr = runOne(ctx, s, markR)
	}()
	commits, err := e.liveWriter(ctx, size, first, txns, reader, exited)
	if err == nil {
		_, err = fmt.Fprintln(markW, commits.mark)
	}
	markW.Close() // without a mark, the child stops with an error
	<-exited
	switch {
	case runErr != nil:
		return nil, runErr
	case err != nil:
		return nil, fmt.Errorf("latency writer: %w", err)
	case res.Changes != int64(txns*liveTxnRows):
		return nil, fmt.Errorf("%s delivered %d changes up to the end mark %s; the latency writer committed %d", c.name, res.Changes, commits.mark, txns*liveTxnRows)
	}
	visible, err := reader.waitAll(time.Now().Add(liveWait), nil)
	if err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, e.cfg.latency)
	for k := 1; k < txns; k++ {
		lat = append(lat, visible[k].Sub(commits.at[k]))
	}
	return lat, nil
}

// liveCommits are when the latency writer sent its transactions, and the end mark taken in the last one.
type liveCommits struct {
	at   []time.Time
	mark kafkasink.LSN
}

// liveWriter commits the latency phase's transactions on a connection of
// its own: transaction k inserts rows first+k*liveTxnRows onwards. It
// waits for the first to be visible before it starts the clocked ones at
// a steady rate, and stops early if the child exits.
func (e *pgEnv) liveWriter(ctx context.Context, size int, first int64, txns int, reader *liveReader, exited <-chan struct{}) (liveCommits, error) {
	db, err := pgx.Connect(ctx, e.cfg.conn)
	if err != nil {
		return liveCommits{}, fmt.Errorf("connecting to PostgreSQL (-pg): %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	// The workload's connection commits without waiting for the disk; a
	// walsender sends WAL only once flushed, so without this the latency
	// would include the WAL writer's delay, not the pipeline's.
	if _, err := db.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		return liveCommits{}, err
	}
	sql := insertSQL(e.liveName(), size)
	out := liveCommits{at: make([]time.Time, txns)}
	commit := func(k int) error {
		from := first + int64(k*liveTxnRows)
		sent := time.Now()
		mark, err := execMarked(ctx, db, k == txns-1, sql, from, from+liveTxnRows-1)
		out.at[k], out.mark = sent, mark
		return err
	}
	if err := commit(0); err != nil {
		return out, err
	}
	if err := reader.waitFirst(time.Now().Add(liveWait), exited); err != nil {
		return out, err
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / e.cfg.latencyRate))
	defer tick.Stop()
	for k := 1; k < txns; k++ {
		select {
		case <-tick.C:
		case <-exited:
			return out, fmt.Errorf("the child exited after %d of %d transactions", k, txns)
		}
		if err := commit(k); err != nil {
			return out, err
		}
	}
	return out, nil
}

// liveReader consumes the latency phase's topic read_committed from its
// start and notes when each transaction's last row arrived. A row seen
// twice, or a row no transaction of the phase inserted, is an error.
type liveReader struct {
	cl     *kgo.Client
	first  int64
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	seen    map[int64]bool
	rows    []int       // per transaction, rows arrived
	visible []time.Time // per transaction, when its last row arrived
	err     error
}

func startLiveReader(brokers []string, topic string, first int64, txns int) (*liveReader, error) {
	// A short fetch wait: a fetch the broker holds for want of data would
	// add its wait to the latency of what commits meanwhile.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &liveReader{cl: cl, first: first, cancel: cancel, done: make(chan struct{}),
		seen: map[int64]bool{}, rows: make([]int, txns), visible: make([]time.Time, txns)}
	go r.consume(ctx, topic)
	return r, nil
}

func (r *liveReader) consume(ctx context.Context, topic string) {
	defer close(r.done)
	for ctx.Err() == nil {
		fs := r.cl.PollFetches(ctx)
		arrived := time.Now()
		var err error
		fs.EachError(func(t string, p int32, e error) {
			if ctx.Err() == nil {
				err = fmt.Errorf("consuming %s partition %d: %w", t, p, e)
			}
		})
		r.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			if err == nil {
				err = r.note(rec, arrived)
			}
		})
		if err != nil && r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// note counts rec's row; r.mu is held.
func (r *liveReader) note(rec *kgo.Record, arrived time.Time) error {
	id, err := strconv.ParseInt(string(rec.Key), 10, 64)
	k := (id - r.first) / liveTxnRows
	if err != nil || id < r.first || k >= int64(len(r.rows)) {
		return fmt.Errorf("partition %d offset %d: key %q is no row of the latency phase (rows %d to %d)",
			rec.Partition, rec.Offset, rec.Key, r.first, r.first+int64(len(r.rows)*liveTxnRows)-1)
	}
	if r.seen[id] {
		return fmt.Errorf("row %d is in the topic twice (partition %d offset %d)", id, rec.Partition, rec.Offset)
	}
	r.seen[id] = true
	if r.rows[k]++; r.rows[k] == liveTxnRows {
		r.visible[k] = arrived
	}
	return nil
}

// waitFirst waits for the first transaction to be visible.
func (r *liveReader) waitFirst(deadline time.Time, exited <-chan struct{}) error {
	return r.wait("the first transaction", deadline, exited, func() bool { return !r.visible[0].IsZero() })
}

// waitAll waits for every transaction to be visible and returns when
// each became so.
func (r *liveReader) waitAll(deadline time.Time, exited <-chan struct{}) ([]time.Time, error) {
	err := r.wait("every transaction", deadline, exited, func() bool { return !slices.ContainsFunc(r.visible, time.Time.IsZero) })
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.visible), err
}

// wait polls until ok (called with r.mu held), the reader fails, the
// child exits or the deadline passes; what names what it waits for.
func (r *liveReader) wait(what string, deadline time.Time, exited <-chan struct{}, ok func() bool) error {
	for {
		r.mu.Lock()
		done, err := ok(), r.err
		var missing int
		for _, n := range r.rows {
			missing += liveTxnRows - n
		}
		r.mu.Unlock()
		switch {
		case err != nil:
			return err
		case done:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("waiting for %s of the latency phase to be visible: %d rows not in the topic after %v", what, missing, liveWait)
		}
		select {
		case <-exited:
			return fmt.Errorf("the child exited before %s of the latency phase was visible", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (r *liveReader) close() {
	r.cancel()
	<-r.done
	r.cl.Close()
}

// percentile is the nearest-rank p-th percentile of xs (0 for none).
func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(p/100*float64(len(s))))-1)]
}

// latencyCells are the table's two latency cells of rs: the percentiles
// of every round's transactions together, empty without samples.
func latencyCells(rs []pgResult) string {
	var all []time.Duration
	for _, r := range rs {
		all = append(all, r.Latencies...)
	}
	if len(all) == 0 {
		return " | "
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("%.1f | %.1f", ms(percentile(all, 50)), ms(percentile(all, 99)))
}

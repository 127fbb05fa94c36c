package main

// The soak (-pgcdc -soak DURATION): a writer updates the table at full
// speed while pgcdc-eos streams it, and the child samples its memory.
// Issue 11 bounds a running pipeline's peak RSS by BatchMaxBytes +
// MaxTransactionBytes + 64 MiB.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

var (
	soakFor   = flag.Duration("soak", 0, "-pgcdc: instead of the table, stream pgcdc-eos this long while a writer updates the table at full speed, and sample its memory (see README.md)")
	soakEvery = flag.Duration("soak-every", 5*time.Second, "-soak: how often the child samples its RSS, heap, rate and lag")
)

// soakHeadroom is what issue 11 allows a running pipeline beyond its two
// buffers: the runtime, the clients, the decoder.
const soakHeadroom = 64 << 20

// soakSpec is what a soak's child needs beyond a run's spec: how often to
// sample, and the two buffer sizes of the bound, set explicitly so that
// the bound printed is the one the run used.
type soakSpec struct {
	Every               time.Duration
	BatchMaxBytes       int // pgcdc.Config.BatchMaxBytes
	MaxTransactionBytes int // kafkasink.Config.MaxTransactionBytes
}

// bound is the peak RSS issue 11 allows.
func (s soakSpec) bound() int64 {
	return int64(s.BatchMaxBytes) + int64(s.MaxTransactionBytes) + soakHeadroom
}

// memoryLimit is the soft memory limit cmd/kafkasink derives by default
// (its -memory-limit, memoryHeadroom there): the two buffers plus half of
// the bound's headroom.
func (s soakSpec) memoryLimit() int64 {
	return int64(s.BatchMaxBytes) + int64(s.MaxTransactionBytes) + soakHeadroom/2
}

// applyMemoryLimit sets memoryLimit in the child, as the program does,
// unless GOMEMLIMIT is in the environment: then, as in the program, it
// wins.
func (s soakSpec) applyMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(s.memoryLimit())
	}
}

// soakSample is one sample of the soak's child.
type soakSample struct {
	At        time.Duration // since the start of the run
	RSS       int64         // VmRSS
	HeapInuse uint64        // Go's heap spans in use
	Events    int64         // delivered so far
	Rate      float64       // events/s since the previous sample
	LagBytes  int64         // WAL between the server's end and the confirmed position
	LagTime   time.Duration // now minus the commit time of the newest change written
}

// soakSampler samples every interval until stopped; with a profile
// prefix it writes a heap profile at each new peak of RSS, so the last
// one written is the peak's.
type soakSampler struct {
	every   time.Duration
	profile string
	w       *markSink
	mon     *pgcdc.Monitor
	start   time.Time
	done    chan struct{}
	wg      sync.WaitGroup
	samples []soakSample
	peak    int64
}

func startSampler(every time.Duration, profile string, w *markSink, mon *pgcdc.Monitor) *soakSampler {
	s := &soakSampler{every: every, profile: profile, w: w, mon: mon, start: time.Now(), done: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.sample()
			case <-s.done:
				return
			}
		}
	})
	return s
}

func (s *soakSampler) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	now := time.Now()
	st := s.mon.Stats()
	x := soakSample{At: now.Sub(s.start), RSS: procStatus("VmRSS:"), HeapInuse: ms.HeapInuse, Events: s.w.events.Load(), LagBytes: st.LagBytes}
	if !st.LastCommit.IsZero() {
		x.LagTime = now.Sub(st.LastCommit)
	}
	prevAt, prevEvents := time.Duration(0), int64(0)
	if n := len(s.samples); n > 0 {
		prevAt, prevEvents = s.samples[n-1].At, s.samples[n-1].Events
	}
	x.Rate = float64(x.Events-prevEvents) / (x.At - prevAt).Seconds()
	s.samples = append(s.samples, x)
	if x.RSS > s.peak {
		s.peak = x.RSS
		if s.profile != "" {
			if f, err := os.Create(s.profile + ".heap"); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}
}

// stop takes a last sample and returns them all; nil for no sampler.
func (s *soakSampler) stop() []soakSample {
	if s == nil {
		return nil
	}
	close(s.done)
	s.wg.Wait()
	s.sample()
	return s.samples
}

// soakReport is what a soak measured.
type soakReport struct {
	cfg      pgConfig
	spec     soakSpec
	size     int
	written  int64         // changes the writer committed
	wrote    time.Duration // how long it wrote
	result   pgResult
	verified bool
}

// soak runs pgcdc-eos in a child for cfg.soak while this process writes:
// it inserts cfg.tableRows rows, then updates them round and round in
// transactions of cfg.txnRows, at full speed. When the time is up it
// gives the child the end mark; the child stops once it delivered it.
// The topic must then hold every change once, and the child's peak RSS
// must be within the bound. The report is returned whenever the child
// ran, also when the bound is exceeded (then with an error).
func soak(ctx context.Context, cfg pgConfig, runOne pgRunner, log io.Writer) (*soakReport, error) {
	e, err := openPGEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := e.createTable(ctx); err != nil {
		return nil, err
	}
	slot, err := e.createSlot(ctx)
	if err != nil {
		return nil, err
	}
	c := pgContenders[slices.IndexFunc(pgContenders, func(c pgContender) bool { return c.name == "pgcdc-eos" })]
	s, err := e.spec(ctx, c, slot, 0)
	defer e.dropRun(ctx, s)
	if err != nil {
		return nil, err
	}
	rep := &soakReport{cfg: cfg, size: cfg.sizes[0],
		spec: soakSpec{Every: cfg.soakEvery, BatchMaxBytes: pgcdc.DefaultBatchMaxBytes, MaxTransactionBytes: kafkasink.DefaultMaxTransactionBytes}}
	s.Soak, s.Headers = &rep.spec, cfg.headers
	if cfg.profile != "" {
		s.Profile = cfg.profile + "/soak"
	}

	// An OS pipe, not io.Pipe: the end mark is one short line, which the
	// pipe's buffer takes even when the child has already failed.
	markR, markW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer markR.Close()
	defer markW.Close()
	var runErr error
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		rep.result, runErr = runOne(ctx, s, markR)
	}()
	began := time.Now()
	mark, err := e.soakWriter(ctx, began.Add(cfg.soak), rep, exited)
	rep.wrote = time.Since(began)
	if err == nil {
		fmt.Fprintf(log, "soak: the writer stopped after %v and %d changes; the end mark is %s\n", rep.wrote.Round(time.Millisecond), rep.written, mark)
		_, err = fmt.Fprintln(markW, mark)
	}
	markW.Close()
	<-exited
	if runErr != nil {
		return nil, runErr
	}
	if err != nil {
		return nil, fmt.Errorf("soak writer: %w", err)
	}
	if rep.result.Changes != rep.written {
		return rep, fmt.Errorf("pgcdc-eos delivered %d changes up to the end mark %s; the writer committed %d", rep.result.Changes, mark, rep.written)
	}
	versions, err := e.versions(ctx)
	if err != nil {
		return nil, err
	}
	want := map[int64]rowWant{}
	for id, v := range versions {
		want[id] = rowWant{changes: v, version: v} // every row was inserted with version 1 after the slot was made
	}
	if rep.result.Bytes, err = verifyTopic(ctx, e.admin, cfg.brokers, s.Topic, want); err != nil {
		return rep, err
	}
	rep.verified = true
	if rep.result.RSS > rep.spec.bound() {
		return rep, fmt.Errorf("peak RSS %d MiB exceeds the bound %d MiB", rep.result.RSS>>20, rep.spec.bound()>>20)
	}
	return rep, nil
}

// soakWriter inserts the table's rows, then updates them until deadline
// or until the child exits, and last commits one more update that takes
// the end mark. Statements never see the deadline: a statement cancelled
// mid-way would leave its commit in doubt, and the count must be exact.
func (e *pgEnv) soakWriter(ctx context.Context, deadline time.Time, rep *soakReport, exited <-chan struct{}) (kafkasink.LSN, error) {
	rows, step := int64(e.cfg.tableRows), int64(e.cfg.txnRows)
	going := func() bool {
		select {
		case <-exited:
			return false
		default:
			return ctx.Err() == nil && time.Now().Before(deadline)
		}
	}
	for from := int64(1); from <= rows; from += step {
		if err := e.insertRows(ctx, from, from+step-1, rep.size); err != nil {
			return 0, err
		}
		rep.written += step
	}
	from := int64(1)
	for going() {
		if _, err := e.updateRows(ctx, from, from+step-1, rep.size, false); err != nil {
			return 0, err
		}
		rep.written += step
		from = (from+step-1)%rows + 1
	}
	mark, err := e.updateRows(ctx, from, from+step-1, rep.size, true)
	if err == nil {
		rep.written += step
	}
	return mark, err
}

// table renders the samples, the peak and the bound.
func (rep *soakReport) table() string {
	var b strings.Builder
	r := rep.result
	fmt.Fprintf(&b, "soak: pgcdc-eos (ExactlyOnce) for %v while a writer updated %d rows of about %d B in transactions of %d: %d changes (%.0f/s); %s compression, %d partitions, %s headers\n\n",
		rep.wrote.Round(time.Second), rep.cfg.tableRows, rep.size, rep.cfg.txnRows, rep.written, float64(rep.written)/rep.wrote.Seconds(), rep.cfg.compression, rep.cfg.partitions, rep.cfg.headers)
	b.WriteString("| t | RSS MiB | Go heap in use MiB | events/s | lag MiB | lag s |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.Samples {
		fmt.Fprintf(&b, "| %v | %.0f | %.0f | %.0f | %.1f | %.1f |\n", x.At.Round(time.Second), float64(x.RSS)/(1<<20), float64(x.HeapInuse)/(1<<20),
			x.Rate, float64(x.LagBytes)/(1<<20), x.LagTime.Seconds())
	}
	verdict := "within the bound"
	if r.RSS > rep.spec.bound() {
		verdict = "EXCEEDS the bound"
	}
	fmt.Fprintf(&b, "\npeak RSS (VmHWM) %.0f MiB: %s of BatchMaxBytes %d MiB + MaxTransactionBytes %d MiB + %d MiB = %d MiB\n",
		float64(r.RSS)/(1<<20), verdict, rep.spec.BatchMaxBytes>>20, rep.spec.MaxTransactionBytes>>20, soakHeadroom>>20, rep.spec.bound()>>20)
	fmt.Fprintf(&b, "delivered %d changes in %.1f s (%.0f/s overall), %.1f allocs/change", r.Changes, r.Seconds, r.rate(), float64(r.Mallocs)/float64(max(r.Changes, 1)))
	if rep.verified {
		b.WriteString("; the topic, read back read_committed, holds each change once and every row's last version")
	}
	b.WriteString("\n")
	return b.String()
}

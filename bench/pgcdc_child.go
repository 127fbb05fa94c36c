package main

// The child-process side of the -pgcdc mode: one contender streams one
// slot until it has consumed the workload's end mark.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// pgChildRunner runs each spec in a child process of exe, so that its
// peak RSS and allocations are its own; stdin, when not nil, is the
// child's standard input (a soak's end mark comes that way).
func pgChildRunner(exe string) pgRunner {
	return func(ctx context.Context, s pgSpec, stdin io.Reader) (pgResult, error) {
		js, _ := json.Marshal(s)
		cmd := exec.CommandContext(ctx, exe, "-pgcdc-child="+string(js))
		cmd.Stdin, cmd.Stderr = stdin, os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return pgResult{}, fmt.Errorf("%s: child process: %w", s.Contender, err)
		}
		var r pgResult
		if err := json.Unmarshal(out, &r); err != nil {
			return pgResult{}, fmt.Errorf("%s: child printed %q: %w", s.Contender, out, err)
		}
		return r, nil
	}
}

// runPGCDCChild runs the spec in js and prints its result.
func runPGCDCChild(js string) int {
	var s pgSpec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		fmt.Fprintln(os.Stderr, "bench -pgcdc-child:", err)
		return 2
	}
	i := slices.IndexFunc(pgContenders, func(c pgContender) bool { return c.name == s.Contender })
	if i < 0 {
		fmt.Fprintf(os.Stderr, "bench -pgcdc-child: unknown contender %q\n", s.Contender)
		return 2
	}
	r, err := pgContenders[i].run(context.Background(), s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench -pgcdc-child: %s: %v\n", s.Contender, err)
		return 1
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	return 0
}

// meter measures the timed part of a run: the wall clock, Go's heap
// allocations, and with a profile prefix a CPU profile.
type meter struct {
	start  time.Time
	before runtime.MemStats
	prof   *os.File
}

func startMeter(profile string) (*meter, error) {
	m := &meter{}
	if profile != "" {
		f, err := os.Create(profile + ".cpu")
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		m.prof = f
	}
	runtime.GC()
	runtime.ReadMemStats(&m.before)
	m.start = time.Now()
	return m, nil
}

// stop returns the seconds and allocations since the start.
func (m *meter) stop() (seconds float64, mallocs uint64) {
	seconds = time.Since(m.start).Seconds()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if m.prof != nil {
		pprof.StopCPUProfile()
		m.prof.Close()
	}
	return seconds, after.Mallocs - m.before.Mallocs
}

// pluginArgs are the pgoutput options pgcdc asks for on PostgreSQL 14
// and later, so that the server does the same work for every contender.
func pluginArgs(publication string) []string {
	return []string{"proto_version '2'", "publication_names '" + publication + "'", "messages 'true'", "streaming 'on'"}
}

// runDiscard is the ceiling: a plain pglogrepl loop on the slot that
// parses every message, counts the changes, answers keepalives and
// confirms commits as any client must, and keeps nothing. The clock
// includes connecting, as pgcdc's does.
func runDiscard(ctx context.Context, s pgSpec) (pgResult, error) {
	cfg, err := pgconn.ParseConfig(s.ConnString)
	if err != nil {
		return pgResult{}, err
	}
	cfg.RuntimeParams["replication"] = "database"
	m, err := startMeter(s.Profile)
	if err != nil {
		return pgResult{}, err
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		m.stop()
		return pgResult{}, fmt.Errorf("connecting for replication: %w", err)
	}
	defer conn.Close(context.Background())
	if err := pglogrepl.StartReplication(ctx, conn, s.Slot, 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: pluginArgs(s.Publication)}); err != nil {
		m.stop()
		return pgResult{}, fmt.Errorf("starting replication on slot %s: %w", s.Slot, err)
	}
	var (
		r         pgResult
		inStream  bool
		confirmed pglogrepl.LSN
		next      = time.Now().Add(pgcdc.DefaultStandbyInterval)
	)
	status := func() error {
		next = time.Now().Add(pgcdc.DefaultStandbyInterval)
		return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: confirmed, WALFlushPosition: confirmed, WALApplyPosition: confirmed})
	}
	consumed := func(end pglogrepl.LSN) bool {
		confirmed = end
		return kafkasink.LSN(end) > s.EndMark
	}
	for done := false; !done; {
		if time.Now().After(next) {
			if err := status(); err != nil {
				m.stop()
				return pgResult{}, err
			}
		}
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			m.stop()
			return pgResult{}, fmt.Errorf("receiving after %d changes: %w", r.Changes, err)
		}
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			m.stop()
			return pgResult{}, pgconn.ErrorResponseToPgError(msg)
		case *pgproto3.CopyData:
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				k, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					m.stop()
					return pgResult{}, err
				}
				if k.ReplyRequested {
					next = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					m.stop()
					return pgResult{}, err
				}
				r.Bytes += int64(len(x.WALData))
				pm, err := pglogrepl.ParseV2(x.WALData, inStream)
				if err != nil {
					m.stop()
					return pgResult{}, err
				}
				switch pm := pm.(type) {
				case *pglogrepl.InsertMessageV2, *pglogrepl.UpdateMessageV2, *pglogrepl.DeleteMessageV2:
					r.Changes++
				case *pglogrepl.StreamStartMessageV2:
					inStream = true
				case *pglogrepl.StreamStopMessageV2:
					inStream = false
				case *pglogrepl.CommitMessage:
					done = consumed(pm.TransactionEndLSN)
				case *pglogrepl.StreamCommitMessageV2:
					done = consumed(pm.TransactionEndLSN)
				}
			}
		}
	}
	r.Seconds, r.Mallocs = m.stop()
	r.RSS = peakRSS()
	return r, status() // the end confirmed, outside the clock
}

// markSink is the run's sink as pgcdc.Run sees it: it counts the events
// of every Write that returned nil and closes reached once one delivered
// the last event of a transaction whose commit ends after the end mark.
// Embedding *kafkasink.Sink keeps its Delivers method for pgcdc.
type markSink struct {
	*kafkasink.Sink
	events atomic.Int64

	mu       sync.Mutex
	mark     kafkasink.LSN
	marked   bool          // mark is known
	endSeen  kafkasink.LSN // the latest commit end delivered
	reached  chan struct{}
	isClosed bool
}

func newMarkSink(s *kafkasink.Sink) *markSink {
	return &markSink{Sink: s, reached: make(chan struct{})}
}

func (s *markSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if err := s.Sink.Write(ctx, b); err != nil {
		return err
	}
	s.events.Add(int64(len(b.Events)))
	for i := len(b.Events) - 1; i >= 0; i-- {
		if end := b.Events[i].Txn.End; end != nil {
			s.mu.Lock()
			s.endSeen = max(s.endSeen, end.CommitEnd)
			s.check()
			s.mu.Unlock()
			break
		}
	}
	return nil
}

// setMark sets the end mark; a soak learns it when its writer stops,
// perhaps after the pipeline delivered past it.
func (s *markSink) setMark(mark kafkasink.LSN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mark, s.marked = mark, true
	s.check()
}

func (s *markSink) check() {
	if s.marked && s.endSeen > s.mark && !s.isClosed {
		close(s.reached)
		s.isClosed = true
	}
}

// runPgcdc is pgcdc.Run into a kafkasink sink in mode, on the spec's
// slot and topic, until the end mark is delivered. The sink is started
// (checkpoint read) before the clock; pgcdc.Run's start-up is inside it.
func runPgcdc(mode kafkasink.Mode) func(context.Context, pgSpec) (pgResult, error) {
	return func(ctx context.Context, s pgSpec) (pgResult, error) {
		codec, err := kafkasink.ParseCompression(s.Compression)
		if err != nil {
			return pgResult{}, err
		}
		kcfg := kafkasink.Config{
			Brokers: s.Brokers, SinkID: s.Topic, Mode: mode, CheckpointTopic: s.CheckpointTopic,
			Topics:        kafkasink.Topics{Routes: map[string]string{"public." + s.Table: s.Topic}, MustExist: true},
			ClientOptions: []kgo.Opt{kgo.ProducerBatchCompression(codec)},
		}
		mon := &pgcdc.Monitor{}
		pcfg := pgcdc.Config{ConnString: s.ConnString, Slot: s.Slot, Publication: s.Publication, Tables: []string{"public." + s.Table}, Monitor: mon}
		if s.Headers != "" {
			if kcfg.Headers, err = kafkasink.ParseHeaderSet(s.Headers); err != nil {
				return pgResult{}, err
			}
		}
		if s.Soak != nil {
			kcfg.MaxTransactionBytes, pcfg.BatchMaxBytes = s.Soak.MaxTransactionBytes, s.Soak.BatchMaxBytes
			s.Soak.applyMemoryLimit()
		}
		sink, err := kafkasink.New(ctx, kcfg)
		if err != nil {
			return pgResult{}, err
		}
		defer sink.Close(context.Background())
		w := newMarkSink(sink)
		rctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		if s.Soak == nil && !s.Latency {
			w.setMark(s.EndMark)
		} else {
			go readMark(os.Stdin, w, stop)
		}

		m, err := startMeter(s.Profile)
		if err != nil {
			return pgResult{}, err
		}
		var sampler *soakSampler
		if s.Soak != nil {
			sampler = startSampler(s.Soak.Every, s.Profile, w, mon)
		}
		runErr := make(chan error, 1)
		go func() { runErr <- pgcdc.Run(rctx, pcfg, w) }()
		select {
		case <-w.reached:
		case err := <-runErr:
			m.stop()
			sampler.stop()
			return pgResult{}, fmt.Errorf("pgcdc.Run returned before the end mark was delivered, after %d events: %w", w.events.Load(), err)
		}
		var r pgResult
		r.Seconds, r.Mallocs = m.stop()
		r.Changes = w.events.Load()
		r.Samples = sampler.stop()
		stop(nil)
		if err := <-runErr; !errors.Is(err, context.Canceled) {
			return pgResult{}, fmt.Errorf("pgcdc.Run, stopped after the end mark: %w", err)
		}
		r.RSS = peakRSS()
		return r, nil
	}
}

// readMark reads the end mark, one LSN on a line, and gives it to w. An
// input that ends without one (the parent is gone) stops the run.
func readMark(in io.Reader, w *markSink, stop context.CancelCauseFunc) {
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		stop(fmt.Errorf("reading the end mark from the standard input: %w", err))
		return
	}
	mark, err := kafkasink.ParseLSN(strings.TrimSpace(line))
	if err != nil {
		stop(fmt.Errorf("the end mark on the standard input: %w", err))
		return
	}
	w.setMark(mark)
}

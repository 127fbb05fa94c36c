package kafkasink_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestRealBrokerLostCommitMarkers reproduces, on the real 3-node cluster,
// Kafka 4.4 completing a commit without writing its markers to a data
// partition that had no leader for a moment, and checks that the sink
// notices. A writer delivers batches of several transactions back to
// back, retrying as a correct caller does, while a broker (nodes 1..3 in
// turn, never node 0) is SIGKILLed and restarted at once, before the
// controller fences it, again and again. Invariant: either a
// read_committed reader sees every acknowledged event exactly once at
// the end, or a Write stopped with ErrCheckpoint, and the events missing
// are exactly those it names (delivered: what the sink's checkpoint
// covers, which includes the committed transactions of a failed Write) (or, for a lost checkpoint, those up to it),
// or a Write stopped with ErrUnexpected for an abort whose markers the
// broker skipped, and every acknowledged event is there once.
// The run logs how many partitions were suspect (markers not seen within
// the wait), how many of those ended committed, and whether a loss was
// caught.
//
//	KAFKASINK_LOSTMARKERS_CYCLES  kill-and-restart cycles (default 6)
//
// Not parallel: it kills brokers of the cluster.
func TestRealBrokerLostCommitMarkers(t *testing.T) {
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers3)
	nodes := testenvNodes(t)
	cycles := knob(t, "KAFKASINK_LOSTMARKERS_CYCLES", 6, positiveInt)
	topic := name + ".public.load"
	ckTopic := name + ".checkpoints"
	logs := &markerLog{t: t}
	config := func(c *kafkasink.Config) {
		c.CheckpointTopic = ckTopic
		c.Topics.Prefix = name
		c.Topics.Partitions = 6
		// One replica: a partition is then leaderless while its
		// broker restarts, the moment Kafka 4.4's coordinator skips
		// its markers ("Couldn't find leader endpoint for partitions
		// ... likely deleted already and hence can be skipped").
		c.Topics.ReplicationFactor = 1
		c.MaxTransactionRecords = 250
		// Longer than a broker's restart: a transaction the broker
		// aborts at its timeout fences the sink (ErrFenced), which
		// ends the run before it shows anything about markers.
		c.TransactionTimeout = time.Minute
		c.Logger = slog.New(logs)
	}
	s := newSink(t, brokers, name, config)

	var (
		sent     []kafkasink.Event
		stopped  error
		batches  atomic.Int64
		restarts int
		done     = make(chan struct{})
		quit     atomic.Bool
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for b := 1; !quit.Load(); b++ {
			events := loadEvents(b, 2000, 97, 200)
			sent = append(sent, events...)
			_, err := writeRetrying(ctx, s, kafkasink.Batch{Events: events})
			if errors.Is(err, kafkasink.ErrFenced) {
				// Kafka 4.4 answers a recovering sink
				// PRODUCER_FENCED after some restarts (issue 30
				// item 5): restart it as a process would, and
				// write the batch again.
				s.Close(ctx)
				restarts++
				var next *kafkasink.Sink
				if next, err = restartSink(ctx, t, brokers, name, config); err == nil {
					s = next
					sent = sent[:len(sent)-len(events)]
					b--
					continue
				}
			}
			if err != nil {
				stopped = err
				return
			}
			batches.Add(1)
		}
	}()
cycling:
	for cycle := 1; cycle <= cycles; cycle++ {
		select {
		case <-done:
			break cycling // the writer stopped
		case <-time.After(time.Duration(500+cycle*300%2000) * time.Millisecond):
		}
		node := 1 + cycle%3
		nodes.kill(node)
		nodes.start(node)
		waitFullISR(t, sinktest.Client(t, brokers), 90*time.Second, topic, ckTopic, "__transaction_state")
		t.Logf("cycle %d: node %d killed and restarted at once; %d batches acknowledged so far", cycle, node, batches.Load())
	}
	quit.Store(true)
	wg.Wait()
	// Delivered, as far as the sink is concerned, is what its
	// checkpoint covers: a Write that fails after some of its
	// transactions committed does not write them again.
	var acked []kafkasink.Event
	for _, e := range sent {
		if e.Position.Compare(s.Checkpoint().Position) <= 0 {
			acked = append(acked, e)
		}
	}
	suspects, late := logs.counts()
	t.Logf("%d cycles, %d batches acknowledged, %d events delivered, %d sink restarts after ErrFenced; %d partitions suspect (markers not seen within the wait), %d of them committed late",
		cycles, batches.Load(), len(acked), restarts, suspects, late)
	switch {
	case stopped == nil:
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), acked)
		t.Logf("no loss: every acknowledged event is there once")
	case errors.Is(stopped, kafkasink.ErrCheckpoint) && strings.Contains(stopped.Error(), "is no longer there for read_committed readers"):
		if !brokerLostCommit(t, stopped, s, brokers, topic, sent) {
			t.Fatalf("writer: %v", stopped)
		}
	case errors.Is(stopped, kafkasink.ErrCheckpoint):
		n := checkNamedLoss(t, stopped, brokers, topic, acked)
		t.Logf("LOSS CAUGHT: %d delivered events lost on a data partition, all named by the sink's error: %v", n, stopped)
	case errors.Is(stopped, kafkasink.ErrUnexpected) && strings.Contains(stopped.Error(), "without writing its abort markers"):
		// The broker skipped an abort's markers too: the sink stopped
		// before a commit could take the aborted records. Nothing
		// acknowledged is lost or duplicated meanwhile.
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), acked)
		t.Logf("ABORT MARKERS LOST, CAUGHT: every acknowledged event is there once, and the sink stopped before committing the aborted records: %v", stopped)
	default:
		t.Fatalf("writer: %v", stopped)
	}
}

// restartSink starts the sink again after ErrFenced, as a supervisor
// restarts a process: while a broker is still down New fails
// retryably (or fenced again, for Kafka 4.4's PRODUCER_FENCED), and
// it is tried again until ctx ends.
func restartSink(ctx context.Context, t *testing.T, brokers []string, name string, config func(*kafkasink.Config)) (*kafkasink.Sink, error) {
	t.Helper()
	for {
		s, err := startSink(t, brokers, name, config)
		if err == nil || !(kafkasink.IsRetryable(err) || errors.Is(err, kafkasink.ErrFenced)) {
			return s, err
		}
		t.Logf("restarting the sink failed; trying again: %v", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("restarting the sink: still failing when the time ran out: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// markerLog is the sink's logger in TestRealBrokerLostCommitMarkers: it
// counts what the commit marker check reports and logs it, and the
// sink's errors and transaction warnings, to the test.
type markerLog struct {
	t  *testing.T
	mu sync.Mutex
	n  struct{ suspects, late int }
}

func (h *markerLog) counts() (suspects, late int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n.suspects, h.n.late
}

func (h *markerLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *markerLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	parts := 0
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		if a.Key == "partitions" || a.Key == "partition" {
			parts += strings.Count(a.Value.String(), "offsets ")
		}
		return true
	})
	h.mu.Lock()
	switch {
	case strings.HasPrefix(r.Message, "commit markers not seen"):
		h.n.suspects += parts
	case strings.HasPrefix(r.Message, "commit markers came late"):
		h.n.late += parts
	}
	h.mu.Unlock()
	if r.Level >= slog.LevelError || strings.Contains(r.Message, "commit markers") || strings.Contains(r.Message, "transaction") {
		h.t.Log(b.String())
	}
	return nil
}

func (h *markerLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *markerLog) WithGroup(string) slog.Handler      { return h }

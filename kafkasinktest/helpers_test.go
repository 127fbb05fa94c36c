package kafkasinktest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// The kit's own test helpers.

const ordersTopic = "kafkasink.public.orders"

// newSink starts an exactly-once sink on c with a 3s transaction timeout
// (so a 1s commit timeout) and closes it at the end of the test.
func newSink(t *testing.T, c *kafkasinktest.Cluster, id string, edit ...func(*kafkasink.Config)) (*kafkasink.Sink, kafkasink.Config) {
	t.Helper()
	cfg := kafkasink.Config{Brokers: c.Brokers(), SinkID: id, TransactionTimeout: 3 * time.Second}
	for _, e := range edit {
		e(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafkasink.New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, cfg
}

// orders returns n changes of public.orders in one transaction at commit
// LSN lsn: inserts of ids from, from+1, ...
func orders(lsn kafkasink.LSN, from, n int) []kafkasink.Event {
	out := make([]kafkasink.Event, n)
	for i := range out {
		out[i] = kafkasink.Event{
			Op: kafkasink.OpInsert, Schema: "public", Table: "orders",
			Position: kafkasink.Position{LSN: lsn, Index: uint64(i)},
			LSN:      lsn - kafkasink.LSN(n-i), XID: uint32(lsn), Commit: time.Unix(1767225600, 0).UTC(),
			Key:   []string{"id"},
			After: kafkasink.Row{{Name: "id", Value: int64(from + i)}, {Name: "note", Value: fmt.Sprintf("order %d", from+i)}},
		}
	}
	return out
}

// writeAgain writes b until it is delivered, as a careful caller does:
// a retryable error is retried, anything else fails the test. It returns
// the retryable errors.
func writeAgain(t *testing.T, s *kafkasink.Sink, b []kafkasink.Event) []error {
	t.Helper()
	var retried []error
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Write(ctx, kafkasink.Batch{Events: b})
		cancel()
		switch {
		case err == nil:
			return retried
		case !kafkasink.IsRetryable(err) || attempt == 20:
			t.Fatalf("Write: %v (after %d retryable errors: %v)", err, len(retried), retried)
		}
		retried = append(retried, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// join concatenates batches of events.
func join(batches ...[]kafkasink.Event) []kafkasink.Event {
	var out []kafkasink.Event
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// recordingTB is a testing.TB that records what an assertion reports
// instead of failing the test, so a test can check an assertion fails,
// and how. Fatal calls end the calling goroutine, as testing's do; the
// assertions never make them.
type recordingTB struct {
	testing.TB
	mu      sync.Mutex
	errors  []string
	fatal   bool
	skipped string // the message of a Skipf
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.mu.Lock()
	r.fatal = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recordingTB) FailNow() {
	r.mu.Lock()
	r.fatal = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recordingTB) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f with r in a goroutine of its own, as testing runs a test,
// so that a Fatal or Skip ends f and not the caller, and waits for it.
func (r *recordingTB) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

// report returns everything reported, one string.
func (r *recordingTB) report() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.errors)
}

package kafkasink_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// preparingEncoder is a Preparer and KeyEncoder that logs its calls: its
// Prepare calls into log, with the events and topics it was given, and
// fails with fail when set. Values are JSONEncoder's; keys are "key:"
// followed by the key columns' names.
type preparingEncoder struct {
	kafkasink.JSONEncoder
	mu       sync.Mutex
	log      *[]string
	prepared [][]kafkasink.Position
	routes   [][]kafkasink.EventRoute
	fail     error
}

func (p *preparingEncoder) Prepare(_ context.Context, events []kafkasink.Event, routes []kafkasink.EventRoute) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	*p.log = append(*p.log, "prepare")
	var pos []kafkasink.Position
	for i := range events {
		pos = append(pos, events[i].Position)
	}
	p.prepared = append(p.prepared, pos)
	p.routes = append(p.routes, slices.Clone(routes))
	return p.fail
}

func (p *preparingEncoder) EncodeKey(dst []byte, e *kafkasink.Event, columns []string) ([]byte, error) {
	dst = append(dst, "key:"...)
	for _, c := range columns {
		dst = append(dst, c...)
	}
	return dst, nil
}

// TestPreparer writes two batches through an Encoder that is a Preparer
// and a KeyEncoder, the second redelivering the first's last event: each
// Prepare comes before any record of its batch reaches the broker, is
// given only the events above the checkpoint with their topics ("" for
// an unroutable one), and keys are the KeyEncoder's for keyed row changes
// and the sink's own (event id) for a truncate. A key column missing from
// the row is ReasonNoKey, as without a KeyEncoder. A failing Prepare
// fails the Write with its class, and nothing of the batch is produced.
func TestPreparer(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	var (
		mu  sync.Mutex
		log []string
	)
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		log = append(log, "produce")
		mu.Unlock()
		return nil, nil, false
	})
	enc := &preparingEncoder{log: &log}
	s := newSink(t, brokers, "preparer", func(cfg *kafkasink.Config) { cfg.Encoder = enc })
	first := sinktest.Inserts("public", "a", 100, 1, 2)
	trunc := kafkasink.Event{Op: kafkasink.OpTruncate, Schema: "public", Table: "a", Position: kafkasink.Position{LSN: 200, Index: 0}}
	second := append([]kafkasink.Event{first[1], trunc}, sinktest.Inserts("public", "a", 300, 3, 1)...)

	write(t, s, first)
	write(t, s, second)
	mu.Lock()
	got := slices.Clone(log)
	mu.Unlock()
	// Compact runs of produce requests: one batch may take several.
	got = slices.Compact(got)
	if want := []string{"prepare", "produce", "prepare", "produce"}; !slices.Equal(got, want) {
		t.Errorf("order of calls: %v, want %v", got, want)
	}
	wantPrepared := [][]kafkasink.Position{{first[0].Position, first[1].Position}, {trunc.Position, second[2].Position}}
	if !slices.EqualFunc(enc.prepared, wantPrepared, slices.Equal) {
		t.Errorf("Prepare was given %v, want %v (the checkpoint covers the redelivered event)", enc.prepared, wantPrepared)
	}
	keyed := kafkasink.EventRoute{Topic: "kafkasink.public.a", KeyColumns: []string{"id"}}
	wantRoutes := [][]kafkasink.EventRoute{{keyed, keyed}, {{Topic: keyed.Topic}, keyed}}
	if !slices.EqualFunc(enc.routes, wantRoutes, func(a, b []kafkasink.EventRoute) bool { return slices.EqualFunc(a, b, sameRoute) }) {
		t.Errorf("Prepare was given routes %v, want %v (a truncate has no key columns)", enc.routes, wantRoutes)
	}
	recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public.a")
	var keys []string
	for _, r := range recs {
		keys = append(keys, string(r.Key))
	}
	slices.Sort(keys) // the truncate's key puts it in another partition
	if want := []string{trunc.Position.String(), "key:id", "key:id", "key:id"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}

	// An unroutable event is given to Prepare with no topic; a missing
	// key column is rejected as without a KeyEncoder.
	bad := sinktest.Inserts("public", "no topic!", 400, 1, 1)
	noKey := sinktest.Inserts("public", "a", 401, 1, 1)
	noKey[0].After = noKey[0].After[1:]
	err := tryWrite(t, s, kafkasink.Batch{Events: append(bad, noKey...)})
	if rej, ok := kafkasink.IsRejected(err); !ok || len(rej) != 2 || rej[0].Reason != kafkasink.ReasonUnroutable || rej[1].Reason != kafkasink.ReasonNoKey {
		t.Fatalf("Write of an unroutable event and one without its key column: %v, want both rejected (unroutable, no_key)", err)
	}
	if len(enc.routes) != 3 {
		t.Fatalf("Prepare was called %d times, want 3", len(enc.routes))
	}
	if last := enc.routes[2]; !slices.EqualFunc(last, []kafkasink.EventRoute{{}, keyed}, sameRoute) {
		t.Errorf("Prepare was given routes %v, want [{} %v] (an unroutable event has none)", last, keyed)
	}

	// A failing Prepare: its class, and no produce request at all.
	for _, retryable := range []bool{false, true} {
		enc.fail = &kafkasink.PrepareError{Retryable: retryable, Err: errors.New("registry says no")}
		mu.Lock()
		log = log[:0]
		mu.Unlock()
		err = tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "a", 500, 1, 1)})
		var pe *kafkasink.PrepareError
		if !errors.As(err, &pe) || kafkasink.IsRetryable(err) != retryable || kafkasink.IsFatal(err) == retryable {
			t.Fatalf("Write with Prepare failing (retryable %t): %v (%s)", retryable, err, errorClass(err))
		}
		mu.Lock()
		produced := slices.Contains(log, "produce")
		mu.Unlock()
		if produced {
			t.Errorf("a Write whose Prepare failed (retryable %t) produced records", retryable)
		}
		if retryable {
			break
		}
		// A fatal error stops the sink: a new one continues.
		s = newSink(t, brokers, "preparer", func(cfg *kafkasink.Config) { cfg.Encoder = enc })
	}
	if n := len(sinktest.ReadUncommitted(t, brokers, "kafkasink.public.a")); n != 4 {
		t.Errorf("the topic holds %d records, want the 4 of the first two batches", n)
	}
}

func sameRoute(a, b kafkasink.EventRoute) bool {
	return a.Topic == b.Topic && slices.Equal(a.KeyColumns, b.KeyColumns)
}

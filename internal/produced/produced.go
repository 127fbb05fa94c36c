// Package produced collects the outcome of every record the sink
// produces: kgo's Flush reports nothing about failed records, so each
// record's promise is checked.
package produced

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Results collects the outcome of every record of a part. Flush alone
// reports nothing about failed records, so each promise is checked.
type Results struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	failed *kgo.Record
	err    error
	// all is every failed record with its error, in the order the
	// promises ran: a record the broker refuses fails the rest of its
	// partition's buffer with it, and finding it needs them all (see
	// the root's refused.go).
	all []Failure
	// outstanding counts the records sent whose promise has not run.
	outstanding atomic.Int64
	// done is pr.promise, made once: a method value passed to Produce
	// is an allocation per record.
	done func(*kgo.Record, error)
}

// Produce sends r, counting it in the results. A record can be produced
// again after a failed attempt, and kgo keeps the first attempt's context in
// r.Context unless it is replaced: set it to this attempt's.
func (pr *Results) Produce(ctx context.Context, cl *kgo.Client, r *kgo.Record) {
	if pr.done == nil {
		pr.done = pr.promise
	}
	pr.wg.Add(1)
	pr.outstanding.Add(1)
	r.Context = ctx
	cl.Produce(ctx, r, pr.done)
}

func (pr *Results) promise(r *kgo.Record, err error) {
	if err != nil {
		pr.mu.Lock()
		if pr.err == nil {
			pr.failed, pr.err = r, err
		}
		pr.all = append(pr.all, Failure{r, err})
		pr.mu.Unlock()
	}
	pr.outstanding.Add(-1)
	pr.wg.Done()
}

// Delivered reports whether every record sent so far was acknowledged:
// none failed and none is still waiting for its outcome.
func (pr *Results) Delivered() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.outstanding.Load() == 0 && pr.err == nil
}

// Wait blocks until every record has its outcome and returns the first
// failure.
func (pr *Results) Wait() (*kgo.Record, error) {
	pr.wg.Wait()
	return pr.failed, pr.err
}

// Failure is a record that failed, with the client's or the broker's
// error.
type Failure struct {
	Record *kgo.Record
	Err    error
}

// Records returns the records of failures, in order.
func Records(failures []Failure) []*kgo.Record {
	rs := make([]*kgo.Record, len(failures))
	for i, f := range failures {
		rs[i] = f.Record
	}
	return rs
}

// Failures returns every failed record; call it after wait.
func (pr *Results) Failures() []Failure {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.all
}

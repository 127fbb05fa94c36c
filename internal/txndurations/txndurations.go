// Package txndurations counts the durations of committed transactions
// into fixed buckets, for kafkasink.Stats.TransactionDurations, safe for
// a Stats call while a Write counts.
package txndurations

import (
	"slices"
	"sync/atomic"
	"time"
)

// bounds are the buckets' upper bounds: from a small transaction on a
// local broker to one near the default transaction timeout.
var bounds = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second,
}

// Histogram counts durations: counts[i] those d with bounds[i-1] < d <=
// bounds[i], the last those above every bound. Its zero value is empty
// and ready; every field is atomic.
type Histogram struct {
	counts     [len(bounds) + 1]atomic.Int64
	count, sum atomic.Int64
}

// Observe counts d.
func (h *Histogram) Observe(d time.Duration) {
	b := 0
	for b < len(bounds) && d > bounds[b] {
		b++
	}
	h.counts[b].Add(1)
	h.count.Add(1)
	h.sum.Add(int64(d))
}

// Snapshot returns the bounds (a copy), the counts per bucket, one longer
// than the bounds, how many durations were counted and their sum.
func (h *Histogram) Snapshot() (bs []time.Duration, counts []int64, count int64, sum time.Duration) {
	count, sum = h.count.Load(), time.Duration(h.sum.Load())
	counts = make([]int64, len(h.counts))
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
	}
	return slices.Clone(bounds[:]), counts, count, sum
}

// Package backoff is the exponential delay that every retry loop in
// kafkasink and pgcdc waits with, so that each loop states only what it
// retries and when it gives up.
package backoff

import (
	"context"
	"time"
)

// Backoff is a delay that doubles after each wait, up to a ceiling. The
// zero value is not usable; use New. A Backoff belongs to one loop and is
// not safe for concurrent use.
type Backoff struct {
	first, max, next time.Duration
}

// New returns a Backoff whose first wait is first and whose waits never
// exceed max.
func New(first, max time.Duration) *Backoff {
	return &Backoff{first: first, max: max, next: min(first, max)}
}

// Delay is how long the next Wait sleeps, for logging it beforehand.
func (b *Backoff) Delay() time.Duration { return b.next }

// Wait sleeps for the current delay, then doubles it up to the ceiling.
// It returns false as soon as ctx ends, without waiting out the delay.
func (b *Backoff) Wait(ctx context.Context) bool {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Reset makes the next wait the first one again, after progress.
func (b *Backoff) Reset() { b.next = min(b.first, b.max) }
